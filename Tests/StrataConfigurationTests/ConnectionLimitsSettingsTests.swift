import Strata
@testable import StrataConfiguration
import Testing

/// `http.headerTimeout`, `http.idleTimeout`, `http.maxConnections`: read from any source,
/// defaulted, refused naming the key.
@Suite("Connection limit settings")
struct ConnectionLimitsSettingsTests {
    @Test func theKeysAreReadAndDefaulted() async throws {
        let defaults = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:])).http
        #expect(defaults.headerTimeout == .seconds(20))
        #expect(defaults.idleTimeout == .seconds(75))
        #expect(defaults.maxConnections == 10_000)
        let read = try StrataConfiguration(
            from: try await ConfigurationLayers(
                arguments: ["--http-header-timeout", "1500ms", "--http-max-connections", "64"],
                environment: ["STRATA_HTTP_IDLE_TIMEOUT": "2m"])
        ).http
        #expect(read.headerTimeout == .milliseconds(1500))
        #expect(read.idleTimeout == .seconds(120))
        #expect(read.maxConnections == 64)
    }

    @Test func badValuesNameTheKey() async throws {
        for (arguments, key) in [
            (["--http-header-timeout", "0s"], "http.headerTimeout"),
            (["--http-header-timeout", "soon"], "http.headerTimeout"),
            (["--http-idle-timeout", "0ms"], "http.idleTimeout"),
            (["--http-max-connections", "0"], "http.maxConnections"),
            (["--http-max-connections", "many"], "http.maxConnections"),
        ] {
            let error = await #expect(throws: ConfigurationError.self) {
                try StrataConfiguration(from: try await ConfigurationLayers(arguments: arguments, environment: [:]))
            }
            #expect(error?.key == key, "\(arguments): \(String(describing: error))")
        }
    }
}
