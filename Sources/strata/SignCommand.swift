import ArgumentParser
import Foundation
import Strata
import StrataService

/// `strata sign URL [--config FILE] [--KEY VALUE …]`
struct SignCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign",
        abstract: "Print URL signed with http.signingKey (HMAC-SHA256 of its path and query, as `sig=`).",
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

    @OptionGroup var configurationOptions: ConfigurationOptions

    func run() async throws {
        let (_, configuration) = await configurationOptions.load()
        guard let key = configuration.http.signingKey else {
            fail("http.signingKey is not set: give it in the configuration file, STRATA_HTTP_SIGNING_KEY or --http-signing-key", code: 2)
        }
        print(URLSigner(key: key).sign(url))
    }
}
