import Testing

@testable import Strata
@testable import StrataHTTPOrigin
import StrataTestSupport

/// ``HTTPSource``'s parts that need no server: its configuration, its URLs, the validator
/// memory and the concurrency cap.
@Suite("HTTPSource configuration and URLs")
struct HTTPSourceConfigurationTests {
    static func configuration(_ change: (inout HTTPSource.Configuration) -> Void) -> HTTPSource.Configuration {
        var configuration = HTTPSource.Configuration(baseURL: "https://images.example.com/originals")
        change(&configuration)
        return configuration
    }

    /// The key `validate()` names for `configuration`, or `nil` when it passes.
    static func failingKey(_ configuration: HTTPSource.Configuration) -> String? {
        do {
            try configuration.validate()
            return nil
        } catch {
            return error.key
        }
    }

    @Test func theDefaultsAreValid() throws {
        try Self.configuration { _ in }.validate()
    }

    @Test(arguments: [
        "ftp://example.com/", "http://", "http:///path", "//example.com/", "example.com/originals",
        "http://user:password@example.com/", "http://example.com/a?b=c", "http://example.com/a#b",
        "http://example.com:0/", "http://example.com:65536/", "http://example.com:80x/", "http://exa mple.com/",
        "http://example.com/a b", "http://example.com/%zz", "http://[::1/", "http://ex_ample.com/",
    ])
    func badBaseURLsNameTheKey(_ url: String) {
        #expect(Self.failingKey(Self.configuration { $0.baseURL = url }) == "source.http.baseURL", "\(url)")
    }

    @Test func badValuesNameTheirKey() {
        let cases: [(String, (inout HTTPSource.Configuration) -> Void)] = [
            ("source.http.connectTimeout", { $0.connectTimeout = .zero }),
            ("source.http.readTimeout", { $0.readTimeout = .seconds(-1) }),
            ("source.http.totalTimeout", { $0.totalTimeout = .zero }),
            ("source.http.maxBodySize", { $0.maxBodyBytes = 0 }),
            ("source.http.maxRedirects", { $0.maxRedirects = -1 }),
            ("source.http.maxRedirects", { $0.maxRedirects = 21 }),
            ("source.http.maxConcurrentRequests", { $0.maxConcurrentRequests = 0 }),
            ("source.http.retryBackoff", { $0.retryBackoff = .seconds(-1) }),
            ("source.http.rememberedVersions", { $0.rememberedVersions = -1 }),
            ("source.http.headers", { $0.headers = ["Bad Name": "v"] }),
            ("source.http.headers", { $0.headers = ["": "v"] }),
            ("source.http.headers", { $0.headers = ["Host": "other.example.com"] }),
            ("source.http.headers", { $0.headers = ["if-none-match": "x"] }),
            ("source.http.headers", { $0.headers = ["X-Token": "secret\r\nX-Injected: 1"] }),
        ]
        for (key, change) in cases {
            #expect(Self.failingKey(Self.configuration(change)) == key)
        }
        // The source refuses to start with the same error.
        #expect(throws: HTTPSourceConfigurationError.self) {
            _ = try HTTPSource(configuration: Self.configuration { $0.maxRedirects = 99 })
        }
    }

    @Test func errorsShowTheValueAndWhatIsAllowedButNeverAHeaderValue() {
        do {
            try Self.configuration { $0.maxConcurrentRequests = 0 }.validate()
            Issue.record("accepted 0 concurrent requests")
        } catch {
            #expect(error.description.contains("source.http.maxConcurrentRequests") && error.description.contains("\"0\""))
            #expect(error.description.contains("1...4096"))
        }
        do {
            try Self.configuration { $0.headers = ["Authorization": "Bearer hunter2\n"] }.validate()
            Issue.record("accepted a header value with a line feed")
        } catch {
            #expect(error.key == "source.http.headers" && !error.description.contains("hunter2"), "\(error)")
            #expect(error.description.contains("Authorization"))
        }
    }

    @Test func redactedDescriptionListsEveryKeyAndHidesHeaderValues() {
        let configuration = Self.configuration { $0.headers = ["Authorization": "Bearer hunter2", "X-Api-Key": "k-123"] }
        let text = configuration.redactedDescription
        for key in [
            "baseURL", "connectTimeout", "readTimeout", "totalTimeout", "maxBodySize", "maxRedirects",
            "allowCrossHostRedirects", "maxConcurrentRequests", "headers", "retryBackoff", "rememberedVersions",
        ] {
            #expect(text.contains("source.http.\(key) = "), "\(key)")
        }
        #expect(text.contains("Authorization: <redacted>") && text.contains("X-Api-Key: <redacted>"))
        #expect(!text.contains("hunter2") && !text.contains("k-123"))
        #expect("\(configuration)" == text && String(reflecting: configuration) == text)
    }

    // MARK: - URLs

    @Test func keysBecomeEncodedSegmentsUnderTheBasePath() throws {
        let base = try HTTPSource.Configuration(baseURL: "http://Images.Example.COM:8080/base").parsedBaseURL()
        func url(_ key: String) throws -> String {
            try base.appending(encodedSegments: HTTPSource.validatedSegments(of: key)).description
        }
        #expect(try url("a/b.jpg") == "http://images.example.com:8080/base/a/b.jpg")
        #expect(try url("a//b.jpg") == "http://images.example.com:8080/base/a/b.jpg")
        #expect(try url("a b/c?d#e%2F.jpg") == "http://images.example.com:8080/base/a%20b/c%3Fd%23e%252F.jpg")
        #expect(try url("café.jpg") == "http://images.example.com:8080/base/caf%C3%A9.jpg")
        #expect(try url("...") == "http://images.example.com:8080/base/...")
    }

    @Test func everyByteOutsideTheUnreservedSetIsEscaped() {
        for value in 1...0x7F {
            let scalar = Unicode.Scalar(UInt8(value))
            let segment = "a\(Character(scalar))b"
            let encoded = OriginURL.percentEncode(segment)
            if OriginURL.isUnreserved(UInt8(value)) {
                #expect(encoded == segment)
            } else {
                #expect(encoded == "a%" + hex(UInt8(value)) + "b", "\(segment.debugDescription)")
            }
        }
        // Non-ASCII: each UTF-8 byte.
        #expect(OriginURL.percentEncode("ü") == "%C3%BC")
        #expect(OriginURL.percentEncode("\u{2215}") == "%E2%88%95")
    }

    private func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }

    @Test func redirectTargetsResolveAgainstTheCurrentURL() throws {
        let current = try OriginURL.parse("http://a.example:8080/dir/file.jpg")
        func resolve(_ location: String) throws -> String { try current.resolving(location: location).description }
        #expect(try resolve("/other/x.jpg") == "http://a.example:8080/other/x.jpg")
        #expect(try resolve("y.jpg") == "http://a.example:8080/dir/y.jpg")
        #expect(try resolve("y.jpg?v=2#top") == "http://a.example:8080/dir/y.jpg?v=2")
        #expect(try resolve("//b.example/z.jpg") == "http://b.example/z.jpg")
        #expect(try resolve("HTTPS://B.example/z.jpg") == "https://b.example/z.jpg")
        #expect(throws: OriginURL.ParseError.self) { try current.resolving(location: "file:///etc/passwd") }
        #expect(throws: OriginURL.ParseError.self) { try current.resolving(location: "javascript:alert(1)") }
        #expect(throws: OriginURL.ParseError.self) { try current.resolving(location: "http://user@b.example/") }
        #expect(throws: OriginURL.ParseError.self) { try current.resolving(location: "/a b") }
        #expect(throws: OriginURL.ParseError.self) { try current.resolving(location: "") }
    }

    @Test func sameOriginComparesSchemeHostAndEffectivePort() throws {
        let base = try OriginURL.parse("http://Example.com/a/")
        #expect(try OriginURL.parse("http://example.com:80/b").isSameOrigin(as: base))
        #expect(try !OriginURL.parse("https://example.com/b").isSameOrigin(as: base))
        #expect(try !OriginURL.parse("http://example.com:8080/b").isSameOrigin(as: base))
        #expect(try !OriginURL.parse("http://www.example.com/b").isSameOrigin(as: base))
        #expect(try OriginURL.parse("https://[::1]:443/").isSameOrigin(as: OriginURL.parse("https://[::1]/")))
    }

    // MARK: - Validators, errors, the cap

    @Test func theValidatorMemoryIsBoundedOldestFirst() {
        let memory = ValidatorMemory(capacity: 3)
        func etag(_ i: Int) -> HTTPValidator? { HTTPValidator(etag: "\"\(i)\"", lastModified: nil) }
        for i in 0..<5 { memory.remember(etag(i), forKey: "k\(i)") }
        #expect(memory.count == 3)
        #expect(memory.validator(forKey: "k0") == nil && memory.validator(forKey: "k1") == nil)
        #expect(memory.validator(forKey: "k4") == etag(4))
        memory.remember(etag(9), forKey: "k4")
        #expect(memory.count == 3 && memory.validator(forKey: "k4") == etag(9))
        memory.remember(nil, forKey: "k4")
        #expect(memory.validator(forKey: "k4") == nil && memory.count == 2)
        // Many forget/store cycles keep it bounded.
        for round in 0..<200 {
            memory.remember(etag(round), forKey: "x")
            memory.remember(nil, forKey: "x")
        }
        #expect(memory.count <= 3)
    }

    @Test func validatorsPreferTheETag() {
        let both = HTTPValidator(etag: "\"e\"", lastModified: "Mon, 23 Nov 2026 10:00:00 GMT")
        #expect(both?.version == "\"e\"" && both?.conditionalHeader.name == "If-None-Match")
        let date = HTTPValidator(etag: nil, lastModified: "Mon, 23 Nov 2026 10:00:00 GMT")
        #expect(date?.version == "last-modified: Mon, 23 Nov 2026 10:00:00 GMT")
        #expect(date?.conditionalHeader.name == "If-Modified-Since")
        #expect(HTTPValidator(etag: "", lastModified: nil) == nil)
    }

    @Test func onlyTransientFailuresAreRetried() {
        func retryable(_ kind: HTTPOriginError.Kind) -> Bool { HTTPOriginError(kind: kind, url: "http://x/").isRetryable }
        #expect(retryable(.status(500)) && retryable(.status(503)) && retryable(.connection("reset")))
        #expect(retryable(.timeout(.connect)) && retryable(.timeout(.read)))
        #expect(!retryable(.timeout(.total)) && !retryable(.status(403)) && !retryable(.status(429)))
        #expect(!retryable(.bodyTooLarge(limit: 1, declared: nil)) && !retryable(.tooManyRedirects(limit: 3)))
    }

    @Test func aWaiterCancelledAtTheCapLeavesWithoutTakingAPermit() async throws {
        let limit = ConcurrencyLimit(limit: 2)
        let gate = Gate()
        let holders = (0..<2).map { _ in Task { try await limit.withPermit { _ = await gate.wait() } } }
        #expect(await eventually { limit.inUse == 2 })
        let waiter = Task { try await limit.withPermit { () -> Int in 1 } }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        gate.open()
        for holder in holders { try await holder.value }
        #expect(limit.inUse == 0)
        #expect(try await limit.withPermit { () -> Int in 7 } == 7)
    }

    @Test func everyWaiterAtTheCapGetsItsTurn() async throws {
        let limit = ConcurrencyLimit(limit: 1)
        let gate = Gate()
        let first = Task { try await limit.withPermit { _ = await gate.wait() } }
        #expect(await eventually { limit.inUse == 1 })
        let order = Lock<[Int]>([])
        let others = (0..<3).map { i in Task { try await limit.withPermit { order.withLock { $0.append(i) } } } }
        gate.open()
        try await first.value
        for other in others { try await other.value }
        #expect(order.withLock { $0.count } == 3 && limit.inUse == 0)
    }
}
