import Glibc
import NIOHTTP1

/// What an origin said when it refused a request, read from the first few KiB of its error body
/// the way S3 and its peers write it (`<Error><Code>…</Code><Message>…</Message></Error>`), and
/// how far its `Date` header is from this machine's clock when that is past the 15 minutes that
/// signed requests allow. Never holds request headers.
package struct ServerRefusal: Sendable, Equatable {
    package var code: String?
    package var message: String?
    package var clockSkewSeconds: Int?

    /// The most of an error body read for its code and message.
    static let bodyLimit = 8 << 10
    /// Signed requests (AWS Signature Version 4) are refused past this skew.
    static let allowedSkewSeconds = 15 * 60

    /// What an answer with `headers` and (the start of) `body` says; `nil` when nothing usable.
    /// `sentAt` is this machine's clock when the request left, in seconds since 1970.
    package static func read(headers: HTTPHeaders, body bytes: [UInt8], sentAt: Int64) -> ServerRefusal? {
        let body = String(decoding: bytes.prefix(bodyLimit), as: UTF8.self)
        var refusal = ServerRefusal(
            code: element("Code", in: body).map { printable($0, limit: 64) },
            message: element("Message", in: body).map { printable($0, limit: 300) })
        if let date = headers.first(name: "date"), let serverTime = WallClock.parseHTTPDate(date) {
            let skew = serverTime - sentAt
            if abs(skew) > Int64(allowedSkewSeconds) { refusal.clockSkewSeconds = Int(skew) }
        }
        return refusal.code == nil && refusal.clockSkewSeconds == nil ? nil : refusal
    }

    /// The text of the first `<name>…</name>` element of `xml` (no nesting, entities kept).
    static func element(_ name: String, in xml: String) -> String? {
        guard let open = xml.firstRange(of: "<\(name)>"), let close = xml[open.upperBound...].firstRange(of: "</\(name)>") else {
            return nil
        }
        let text = xml[open.upperBound..<close.lowerBound]
        return text.isEmpty ? nil : String(text)
    }

    /// `text` without control characters, cut to `limit` characters (it goes into logs).
    static func printable(_ text: String, limit: Int) -> String {
        let kept = text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }
        let cut = String(String.UnicodeScalarView(kept.prefix(limit)))
        return kept.count > limit ? cut + "…" : cut
    }
}

/// This machine's wall clock and HTTP dates, without Foundation.
package enum WallClock {
    /// Seconds since 1970-01-01T00:00:00Z now (`clock_gettime(CLOCK_REALTIME)`).
    package static func secondsSince1970() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec)
    }

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110 §5.6.7) in seconds since 1970;
    /// `nil` for anything else.
    package static func parseHTTPDate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]), let year = Int(parts[3]),
            let month = months.firstIndex(of: String(parts[2])).map({ $0 + 1 })
        else { return nil }
        let clock = parts[4].split(separator: ":").compactMap { Int($0) }
        guard clock.count == 3, (1...31).contains(day), (0...23).contains(clock[0]), (0...59).contains(clock[1]),
            (0...60).contains(clock[2])
        else { return nil }
        return daysFromCivil(year: year, month: month, day: day) * 86_400 + Int64(clock[0] * 3600 + clock[1] * 60 + clock[2])
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    package static func daysFromCivil(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
