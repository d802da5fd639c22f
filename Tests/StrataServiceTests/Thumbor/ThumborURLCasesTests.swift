import Foundation
import Strata
import StrataTestSupport
import Testing

@testable import StrataService

/// thumbor's own URL cases (Fixtures/thumbor/url-cases.json, made by
/// Scripts/thumbor/port-url-cases.py from thumbor 7.8.0's and libthumbor 2.0.2's tests and docs,
/// every expectation computed by their code): each path parses to what thumbor's route regex
/// gives, each signature is libthumbor's, and each of libthumbor's option sets, written back by
/// ``ThumborURL/options``, parses to the same URL.
@Suite("thumbor's URL cases")
struct ThumborURLCasesTests {
    static func list(_ name: String) -> [[String: Any]] {
        let data = Data(Fixtures.bytes("thumbor/url-cases.json"))
        let cases = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        return cases?[name] as? [[String: Any]] ?? []
    }

    /// The parse as the fixture writes it (libthumbor's `parse_decrypted` names and values).
    static func fields(_ url: ThumborURL) -> [String: String] {
        func side(_ side: ThumborURL.Side) -> String {
            switch side {
            case .orig: "orig"
            case .pixels(let value): String(value)
            }
        }
        var hash = "nil", unsafe = false
        switch url.authority {
        case .none: break
        case .unsafe: unsafe = true
        case .signature(let signature): hash = String(signature)
        }
        let crop = url.crop ?? ThumborURL.Crop(left: 0, top: 0, right: 0, bottom: 0)
        return [
            "unsafe": "\(unsafe)", "hash": hash, "debug": "\(url.debug)", "meta": "\(url.meta)", "trim": url.trim?.text ?? "nil",
            "crop": "\(crop.left),\(crop.top),\(crop.right),\(crop.bottom)", "adaptive": "\(url.adaptive)", "full": "\(url.full)",
            "fit_in": "\(url.fitIn)", "width": side(url.width), "height": side(url.height),
            "horizontal_flip": "\(url.horizontalFlip)", "vertical_flip": "\(url.verticalFlip)", "halign": url.halign.rawValue,
            "valign": url.valign.rawValue, "smart": "\(url.smart)", "filters": String(url.filters), "image": String(url.image),
        ]
    }

    static func expected(_ value: [String: Any]) -> [String: String] {
        var fields: [String: String] = [:]
        for (name, item) in value {
            switch item {
            case let crop as [String: Any]:
                fields[name] = ["left", "top", "right", "bottom"].map { "\(crop[$0] as? Int ?? -1)" }.joined(separator: ",")
            // JSON's booleans and numbers both come as NSNumber: the field's name tells them apart.
            case let number as Int where name == "width" || name == "height": fields[name] = String(number)
            case let flag as Bool: fields[name] = "\(flag)"
            case let text as String: fields[name] = text
            default: fields[name] = "nil"
            }
        }
        return fields
    }

    @Test func theFixtureIsThere() {
        #expect(Self.list("parse").count >= 120 && Self.list("sign").count >= 20 && Self.list("compose").count >= 20)
    }

    /// Where Strata deliberately parses otherwise, and why.
    static let deliberate: [String: String] = [
        "/unsafe/a.jpg\n":
            "Python's `$` matches before a final line feed; Strata refuses a line feed anywhere (HTTP/1 request lines cannot carry one: tornado and NIO refuse it before routing)"
    ]

    @Test func everyPathParsesAsThumborsRouteDoes() {
        var checked = 0
        for item in Self.list("parse") {
            let path = item["path"] as? String ?? ""
            let source = item["source"] as? String ?? ""
            let parsed = ThumborURL(path: Substring(path))
            if Self.deliberate[path] != nil {
                #expect(parsed == nil, "\(path.debugDescription)")
                continue
            }
            guard let expected = item["expected"] as? [String: Any] else {
                #expect(parsed == nil, "\(path.debugDescription) (\(source)) parsed, thumbor's route does not match it")
                continue
            }
            guard let parsed else {
                Issue.record("\(path.debugDescription) (\(source)) did not parse")
                continue
            }
            let want = Self.expected(expected), got = Self.fields(parsed)
            for (name, value) in want where got[name] != value {
                // libthumbor writes `trim` as the raw group text; ours is rebuilt from its parts.
                if name == "trim", let text = got[name], text == value { continue }
                Issue.record("\(path.debugDescription) (\(source)): \(name) is \(got[name] ?? "?"), thumbor's \(value)")
            }
            checked += 1
        }
        #expect(checked >= 100)
    }

    @Test func everySignatureIsLibthumbors() {
        for item in Self.list("sign") {
            let key = item["key"] as? String ?? "", url = item["url"] as? String ?? ""
            let signature = item["signature"] as? String ?? ""
            let signer = ThumborSigner(key: key)
            #expect(signer.signature(Substring(url)) == signature, "\(item["source"] ?? "")")
            #expect(signer.isValid(Substring(signature), for: Substring(url)))
            #expect(!signer.isValid(Substring(signature), for: Substring(url + "x")))
        }
    }

    @Test func optionsWrittenBackParseTheSame() throws {
        for item in Self.list("compose") {
            let url = item["url"] as? String ?? ""
            let source = item["source"] as? String ?? ""
            let theirs = try #require(ThumborURL(path: Substring("/unsafe/" + (url.isEmpty ? "" : url + "/") + "a.jpg")), "\(source)")
            let ours = try #require(ThumborURL(path: Substring("/unsafe/" + theirs.options)), "\(source)")
            #expect(Self.fields(ours) == Self.fields(theirs), "\(source): \(url) written back as \(theirs.options)")
        }
    }
}
