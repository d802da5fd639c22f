import ArgumentParser
import Foundation
import Strata
import StrataConfiguration
import StrataService

/// `strata sign URL [--config FILE] [--KEY VALUE …]`
struct SignCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Print URL signed with http.signingKey or a key of http.signingKeys (HMAC-SHA256 of its path and query, as `sig=`).",
        discussion: """
            URL is a whole URL (http://host:port/images/…?w=…) or just its path and query. The \
            signature covers the path and every parameter before it, exactly as written, so sign \
            the URL you will request; an existing sig= is replaced. The key comes from the \
            configuration (http.signingKey: --config FILE, STRATA_HTTP_SIGNING_KEY, or \
            --http-signing-key).
            """
    )

    @Argument(help: "The URL, or its path and query, to sign.")
    var url: String

    @Option(name: .customLong("key-id"), help: "Sign with this key of http.signingKeys (adds kid=); default: http.signingKey.")
    var keyID: String?

    @Option(
        help:
            "Make the URL expire after this long (adds exp=, Unix seconds): a duration as the configuration writes them, 90s, 15m, 1h, 7d.")
    var expires: String?

    @OptionGroup var configurationOptions: ConfigurationOptions

    func validate() throws {
        if let expires, Self.seconds(expires) == nil {
            throw ValidationError("--expires \(expires): expected a duration of at least a second, such as 90s, 15m, 1h or 7d")
        }
    }

    /// Whole seconds in `text` (``ConfigurationUnits/duration(_:)``), at least one; `nil` otherwise.
    static func seconds(_ text: String) -> Int? {
        guard let duration = ConfigurationUnits.duration(text), duration >= .seconds(1) else { return nil }
        return Int(duration.components.seconds)
    }

    func run() async throws {
        let (_, configuration) = await configurationOptions.load()
        guard let signer = URLSigner(keys: configuration.http.signingKeys, defaultKey: configuration.http.signingKey) else {
            fail(
                "no signing key is set: give http.signingKey (or http.signingKeys) in the configuration file, STRATA_HTTP_SIGNING_KEY or --http-signing-key",
                code: 2)
        }
        let expiry = expires.flatMap(Self.seconds).map { Int(Date().timeIntervalSince1970) + $0 }
        guard let signed = signer.sign(url, keyID: keyID, expires: expiry) else {
            let why =
                keyID.map { "key \($0.debugDescription) is not in http.signingKeys" }
                ?? "http.signingKey is not set: name a key with --key-id"
            fail(why, code: 2)
        }
        print(signed)
    }
}
