import Foundation
import Strata
import Testing

@testable import StrataConfiguration
import StrataTestSupport

/// `iiif.auth.*`: access services and rules read from a file (the YAML forms an operator
/// writes), and mistakes refused naming the key.
@Suite("Configuration: IIIF Authorization")
struct IIIFAuthSettingsTests {
    @Test func offByDefault() async throws {
        let auth = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:])).iiif.auth
        #expect(!auth.isEnabled)
        #expect(auth.lifetime == .seconds(3600))
        #expect(StrataConfiguration.key(named: "iiif.auth.key")?.isSecret == true)
    }

    @Test func servicesAndRulesFromAFile() async throws {
        let dir = TempDirectory()
        let file = try writeConfig(
            """
            iiif:
              auth:
                key: 0123456789abcdef0123456789abcdef
                lifetime: 20m
                origins: [https://viewer.example.org]
                services:
                  staff: "active login=https://sso.example.org/login?app=strata degraded=256 label=Staff: log in"
                  reading-room: kiosk
                rules:
                  - "restricted/* staff"
                  - "rr/**/scan 1.tif reading-room"

            """, in: dir)
        let auth = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:], filePath: file)).iiif.auth
        #expect(auth.isEnabled)
        #expect(auth.lifetime == .seconds(1200))
        #expect(auth.origins == ["https://viewer.example.org"])
        #expect(
            auth.services["staff"]
                == IIIFAuthSettings.Service(
                    name: "staff", profile: .active, login: "https://sso.example.org/login?app=strata", degraded: 256,
                    label: "Staff: log in"))
        #expect(auth.services["reading-room"]?.profile == .kiosk)
        #expect(auth.services["reading-room"]?.degraded == nil)
        #expect(
            auth.rules == [
                IIIFAuthSettings.Rule(pattern: "restricted/*", service: "staff"),
                IIIFAuthSettings.Rule(pattern: "rr/**/scan 1.tif", service: "reading-room"),
            ])
    }

    @Test(
        arguments: [
            (["--iiif-auth-rules", "a/* staff"], "iiif.auth.rules", "does not define"),
            (["--iiif-auth-rules", "staff"], "iiif.auth.rules", "PATTERN SERVICE"),
            (["--iiif-auth-services", "staff: active", "--iiif-auth-rules", "a/* staff"], "iiif.auth.key", "16 bytes"),
            (["--iiif-auth-services", "staff: sometimes"], "iiif.auth.services", "active, kiosk or external"),
            (["--iiif-auth-services", "staff: kiosk login=https://x.example"], "iiif.auth.services", "only an active service"),
            (["--iiif-auth-services", "staff: active login=ftp://x"], "iiif.auth.services", "http(s) URL"),
            (["--iiif-auth-services", "staff: active degraded=0"], "iiif.auth.services", "1…4096"),
            (["--iiif-auth-services", "staff: active colour=blue"], "iiif.auth.services", "unknown part"),
            (["--iiif-auth-origins", "https://viewer.example.org/page"], "iiif.auth.origins", "not an origin"),
            (["--iiif-auth-lifetime", "1s"], "iiif.auth.lifetime", "at least 10s"),
        ])
    func mistakesNameTheKey(arguments: [String], key: String, says: String) async throws {
        let error = await #expect(throws: ConfigurationError.self) {
            try StrataConfiguration(from: try await ConfigurationLayers(arguments: arguments, environment: [:]))
        }
        #expect(error?.key == key, "\(arguments): \(String(describing: error))")
        #expect(error?.description.contains(says) == true, "\(arguments): \(String(describing: error))")
    }
}
