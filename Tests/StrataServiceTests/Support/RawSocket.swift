import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A TCP connection to 127.0.0.1 driven byte by byte (the abuse and edge-case tests send what
/// no HTTP client would). Blocking calls with timeouts: use it off the pool (`offThePool`).
final class RawSocket: @unchecked Sendable {
    let fd: Int32

    /// Connects to 127.0.0.1:`port`; reads wait at most `receiveTimeout` seconds.
    init(port: Int, receiveTimeout: Double = 10) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestStepFailure("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let error = errno
            Glibc.close(fd)
            throw TestStepFailure("connect: errno \(error)")
        }
        setTimeout(SO_RCVTIMEO, seconds: receiveTimeout)
        setTimeout(SO_SNDTIMEO, seconds: receiveTimeout)
    }

    deinit { Glibc.close(fd) }

    /// Reads wait at most `seconds` from now on.
    func setReceiveTimeout(_ seconds: Double) { setTimeout(SO_RCVTIMEO, seconds: seconds) }

    private func setTimeout(_ option: Int32, seconds: Double) {
        var timeout = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, option, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends all of `bytes`; the count sent before an error (a closed connection, the send
    /// timeout).
    @discardableResult
    func send(_ bytes: [UInt8]) -> Int {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { break }
            sent += n
        }
        return sent
    }

    @discardableResult
    func send(_ text: String) -> Int { send(Array(text.utf8)) }

    /// Shuts the sending side (a half-closed socket).
    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// What one `recv` gives: bytes, the end (EOF or reset), or nothing before the timeout.
    enum Received: Equatable {
        case bytes([UInt8])
        case closed
        case timedOut
    }

    func receive() -> Received {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 { return .bytes(Array(chunk.prefix(n))) }
        return ended(n)
    }

    /// `.closed` or `.timedOut` for a `recv` that returned `n` ≤ 0 (errno read right after it).
    private func ended(_ n: Int) -> Received {
        n == 0 ? .closed : errno == EAGAIN || errno == EWOULDBLOCK ? .timedOut : .closed
    }

    /// Whether the server has closed the connection, without waiting (what it sent is dropped).
    func hasClosed() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if n > 0 { continue }
            return n == 0 || !(errno == EAGAIN || errno == EWOULDBLOCK)
        }
    }

    /// Reads until the server closes the connection (reading and dropping what comes); `false`
    /// when it stays open past the receive timeout.
    func waitForClose() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { continue }
            return ended(n) == .closed
        }
    }

    /// Reads whole responses (bodies framed by `Content-Length`, none for `HEAD` answers when
    /// `heads` says so) until `count` have come, the connection closes or a read times out;
    /// also returns whether it closed and the bytes left over.
    func responses(_ count: Int, headRequests: Set<Int> = []) -> (answers: [RawResponse], closed: Bool, rest: [UInt8]) {
        var received: [UInt8] = []
        var answers: [RawResponse] = []
        var closed = false
        while answers.count < count {
            if let answer = RawResponse.parse(&received, bodiless: headRequests.contains(answers.count)) {
                // An interim answer (`100 Continue`) is not the request's answer.
                if !(100..<200).contains(answer.status) { answers.append(answer) }
                continue
            }
            switch receive() {
            case .bytes(let bytes): received += bytes
            case .closed:
                closed = true
                return (answers, closed, received)
            case .timedOut: return (answers, closed, received)
            }
        }
        return (answers, closed, received)
    }
}

/// A response read off a ``RawSocket``.
struct RawResponse: Sendable {
    var statusLine: String
    var head: String
    var body: [UInt8]

    /// The status code (0 when the status line does not parse).
    var status: Int { Int(statusLine.split(separator: " ").dropFirst().first ?? "") ?? 0 }

    func header(_ name: String) -> String? {
        head.split(separator: "\r\n").dropFirst().first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
            .map { $0.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces) }
    }

    /// Takes one whole response off the front of `bytes` (`nil`: not all of it is there yet).
    static func parse(_ bytes: inout [UInt8], bodiless: Bool) -> RawResponse? {
        guard let end = bytes.firstRange(of: Array("\r\n\r\n".utf8)) else { return nil }
        let head = String(decoding: bytes[..<end.lowerBound], as: UTF8.self)
        var answer = RawResponse(statusLine: String(head.prefix { $0 != "\r" }), head: head, body: [])
        let status = answer.status
        let length =
            bodiless || status == 304 || status == 204 || (100..<200).contains(status)
            ? 0 : Int(answer.header("content-length") ?? "0") ?? 0
        guard bytes.count - end.upperBound >= length else { return nil }
        answer.body = Array(bytes[end.upperBound..<(end.upperBound + length)])
        bytes.removeFirst(end.upperBound + length)
        return answer
    }
}
