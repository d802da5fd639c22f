import Testing

@testable import StrataS3

/// Published AWS Signature Version 4 vectors, byte for byte.
///
/// - S3: "Signature Calculations for the Authorization Header: Transferring Payload in a Single Chunk
///   (AWS Signature Version 4)", https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html,
///   section "Examples: Signature Calculations".
/// - Signing key: "Examples of how to derive a signing key for Signature Version 4",
///   https://docs.aws.amazon.com/general/latest/gr/signature-v4-examples.html.
/// - Generic: the AWS Signature Version 4 test suite (aws-sig-v4-test-suite), cases get-vanilla,
///   get-vanilla-query-order-key-case and post-x-www-form-urlencoded,
///   https://docs.aws.amazon.com/general/latest/gr/signature-v4-test-suite.html.
@Suite("SigV4")
struct SigV4Tests {
    // MARK: S3 documentation examples

    static let s3Credentials = AWSCredentials(
        accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY")
    static let s3Signer = SigV4Signer(credentials: s3Credentials, region: "us-east-1")
    static let s3Date = SigV4Date(secondsSince1970: 1_369_353_600)  // 2013-05-24T00:00:00Z
    static let s3Host = ("Host", "examplebucket.s3.amazonaws.com")
    static let s3Scope = "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"

    static func value(_ name: String, in headers: [(String, String)]) -> String? {
        headers.first { $0.0 == name }?.1
    }

    @Test("S3 GET Object: canonical request, string to sign and signature as the documentation prints them")
    func s3GetObject() {
        let signer = Self.s3Signer
        let headers = [Self.s3Host, ("Range", "bytes=0-9")]
        let hash = SigV4Signer.emptyPayloadHash
        let signed = signer.headersToSign(headers, payloadHash: hash, date: Self.s3Date)
        let canonical = signer.canonicalRequest(
            method: "GET", path: "/test.txt", query: [], headers: signed, payloadHash: hash)
        #expect(
            canonical == """
                GET
                /test.txt

                host:examplebucket.s3.amazonaws.com
                range:bytes=0-9
                x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                x-amz-date:20130524T000000Z

                host;range;x-amz-content-sha256;x-amz-date
                e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                """)
        let toSign = signer.stringToSign(canonicalRequest: canonical, date: Self.s3Date)
        #expect(
            toSign == """
                AWS4-HMAC-SHA256
                20130524T000000Z
                20130524/us-east-1/s3/aws4_request
                7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972
                """)
        #expect(
            signer.signature(stringToSign: toSign, date: Self.s3Date)
                == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")

        let added = signer.sign(
            method: "GET", path: "/test.txt", query: [], headers: headers, payloadHash: hash, date: Self.s3Date)
        #expect(added.map(\.0) == ["x-amz-date", "x-amz-content-sha256", "Authorization"])
        #expect(Self.value("x-amz-date", in: added) == "20130524T000000Z")
        #expect(Self.value("x-amz-content-sha256", in: added) == hash)
        #expect(
            Self.value("Authorization", in: added)
                == "AWS4-HMAC-SHA256 Credential=\(Self.s3Scope), SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                + "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }

    @Test("S3 PUT Object: an encoded key, a Date header, a storage class and a signed body")
    func s3PutObject() {
        let signer = Self.s3Signer
        let hash = SigV4Signer.sha256Hex("Welcome to Amazon S3.".utf8)
        #expect(hash == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
        let path = SigV4Signer.encodePath("test$file.text")
        #expect(path == "/test%24file.text")
        let headers = [
            Self.s3Host, ("Date", "Fri, 24 May 2013 00:00:00 GMT"), ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
        ]
        let canonical = signer.canonicalRequest(
            method: "PUT", path: path, query: [],
            headers: signer.headersToSign(headers, payloadHash: hash, date: Self.s3Date), payloadHash: hash)
        #expect(
            canonical == """
                PUT
                /test%24file.text

                date:Fri, 24 May 2013 00:00:00 GMT
                host:examplebucket.s3.amazonaws.com
                x-amz-content-sha256:44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072
                x-amz-date:20130524T000000Z
                x-amz-storage-class:REDUCED_REDUNDANCY

                date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class
                44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072
                """)
        #expect(
            signer.stringToSign(canonicalRequest: canonical, date: Self.s3Date) == """
                AWS4-HMAC-SHA256
                20130524T000000Z
                20130524/us-east-1/s3/aws4_request
                9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d
                """)
        let added = signer.sign(
            method: "PUT", path: path, query: [], headers: headers, payloadHash: hash, date: Self.s3Date)
        #expect(
            Self.value("Authorization", in: added)
                == "AWS4-HMAC-SHA256 Credential=\(Self.s3Scope), "
                + "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class, "
                + "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")
    }

    @Test("S3 GET Bucket Lifecycle: a query parameter without a value")
    func s3GetBucketLifecycle() {
        let signer = Self.s3Signer
        let hash = SigV4Signer.emptyPayloadHash
        let query = [("lifecycle", "")]
        let canonical = signer.canonicalRequest(
            method: "GET", path: "/", query: query,
            headers: signer.headersToSign([Self.s3Host], payloadHash: hash, date: Self.s3Date), payloadHash: hash)
        #expect(
            canonical == """
                GET
                /
                lifecycle=
                host:examplebucket.s3.amazonaws.com
                x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                x-amz-date:20130524T000000Z

                host;x-amz-content-sha256;x-amz-date
                e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                """)
        #expect(
            signer.stringToSign(canonicalRequest: canonical, date: Self.s3Date).hasSuffix(
                "\n9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca"))
        let added = signer.sign(
            method: "GET", path: "/", query: query, headers: [Self.s3Host], payloadHash: hash, date: Self.s3Date)
        #expect(
            Self.value("Authorization", in: added)
                == "AWS4-HMAC-SHA256 Credential=\(Self.s3Scope), SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
                + "Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543")
    }

    @Test("S3 GET Bucket (List Objects): query parameters sorted by name")
    func s3ListObjects() {
        let signer = Self.s3Signer
        let hash = SigV4Signer.emptyPayloadHash
        let query = [("prefix", "J"), ("max-keys", "2")]
        #expect(SigV4Signer.canonicalQueryString(query) == "max-keys=2&prefix=J")
        let canonical = signer.canonicalRequest(
            method: "GET", path: "/", query: query,
            headers: signer.headersToSign([Self.s3Host], payloadHash: hash, date: Self.s3Date), payloadHash: hash)
        #expect(
            signer.stringToSign(canonicalRequest: canonical, date: Self.s3Date).hasSuffix(
                "\ndf57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7"))
        let added = signer.sign(
            method: "GET", path: "/", query: query, headers: [Self.s3Host], payloadHash: hash, date: Self.s3Date)
        #expect(
            Self.value("Authorization", in: added)
                == "AWS4-HMAC-SHA256 Credential=\(Self.s3Scope), SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
                + "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")
    }

    // MARK: Signing key

    @Test("The documented signing key derivation (20120215, us-east-1, iam)")
    func signingKeyExample() {
        let key = SigV4Signer.signingKey(
            secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", dateStamp: "20120215", region: "us-east-1",
            service: "iam")
        #expect(SigV4Signer.hex(key) == "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d")
        let signer = SigV4Signer(
            credentials: AWSCredentials(
                accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            region: "us-east-1", service: "iam")
        // 2012-02-15T12:00:00Z: any time of that day derives the same key.
        #expect(signer.signingKey(date: SigV4Date(secondsSince1970: 1_329_307_200)) == key)
    }

    @Test("The kept signing key is the derived one across days, secrets, regions and the signer's copies")
    func keptSigningKey() {
        let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
        var signer = SigV4Signer(credentials: AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: secret), region: "us-east-1")
        func derived(_ signer: SigV4Signer, _ date: SigV4Date) -> [UInt8] {
            SigV4Signer.signingKey(
                secretAccessKey: signer.credentials.secretAccessKey, dateStamp: date.dateStamp, region: signer.region,
                service: signer.service)
        }
        let lastSecond = SigV4Date(secondsSince1970: 1_329_350_399)  // 2012-02-15T23:59:59Z
        let nextDay = SigV4Date(secondsSince1970: 1_329_350_400)
        #expect(derived(signer, lastSecond) != derived(signer, nextDay))
        for date in [lastSecond, lastSecond, nextDay, nextDay, lastSecond] {
            #expect(signer.signingKey(date: date) == derived(signer, date), "\(date)")
        }
        // A copy shares what is kept; changing its secret or region must not get the other's key.
        var copy = signer
        copy.credentials = AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: secret + "2")
        #expect(copy.signingKey(date: nextDay) == derived(copy, nextDay) && copy.signingKey(date: nextDay) != derived(signer, nextDay))
        #expect(signer.signingKey(date: nextDay) == derived(signer, nextDay))
        signer.region = "eu-west-1"
        #expect(signer.signingKey(date: nextDay) == derived(signer, nextDay))
        #expect(copy.signingKey(date: nextDay) == derived(copy, nextDay))
        // And a whole signature made with the kept key is the documented one (the GET Object example).
        for _ in 0..<3 {
            let added = Self.s3Signer.sign(
                method: "GET", path: "/test.txt", query: [], headers: [Self.s3Host, ("Range", "bytes=0-9")],
                payloadHash: SigV4Signer.emptyPayloadHash, date: Self.s3Date)
            #expect(
                Self.value("Authorization", in: added)?.hasSuffix(
                    "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41") == true)
        }
    }

    // MARK: aws-sig-v4-test-suite

    static let suiteSigner = SigV4Signer(
        credentials: AWSCredentials(
            accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
        region: "us-east-1", service: "service")
    static let suiteDate = SigV4Date(secondsSince1970: 1_440_938_160)  // 2015-08-30T12:36:00Z
    static let suiteHost = ("Host", "example.amazonaws.com")

    struct SuiteCase: Sendable, CustomTestStringConvertible {
        var name: String
        var method: String
        var query: [(String, String)]
        var headers: [(String, String)]
        var body: String
        var canonicalRequest: String
        var stringToSignHash: String
        var authorization: String

        var testDescription: String { name }
    }

    static let suiteCases: [SuiteCase] = [
        SuiteCase(
            name: "get-vanilla", method: "GET", query: [], headers: [suiteHost], body: "",
            canonicalRequest: """
                GET
                /

                host:example.amazonaws.com
                x-amz-date:20150830T123600Z

                host;x-amz-date
                e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                """,
            stringToSignHash: "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
            authorization: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                + "SignedHeaders=host;x-amz-date, "
                + "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        SuiteCase(
            name: "get-vanilla-query-order-key-case", method: "GET",
            query: [("Param2", "value2"), ("Param1", "value1")], headers: [suiteHost], body: "",
            canonicalRequest: """
                GET
                /
                Param1=value1&Param2=value2
                host:example.amazonaws.com
                x-amz-date:20150830T123600Z

                host;x-amz-date
                e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
                """,
            stringToSignHash: "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0",
            authorization: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                + "SignedHeaders=host;x-amz-date, "
                + "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
        SuiteCase(
            name: "post-x-www-form-urlencoded", method: "POST", query: [],
            headers: [("Content-Type", "application/x-www-form-urlencoded"), suiteHost], body: "Param1=value1",
            canonicalRequest: """
                POST
                /

                content-type:application/x-www-form-urlencoded
                host:example.amazonaws.com
                x-amz-date:20150830T123600Z

                content-type;host;x-amz-date
                9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e
                """,
            stringToSignHash: "42a5e5bb34198acb3e84da4f085bb7927f2bc277ca766e6d19c73c2154021281",
            authorization: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                + "SignedHeaders=content-type;host;x-amz-date, "
                + "Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"),
    ]

    @Test("aws-sig-v4-test-suite", arguments: suiteCases)
    func suite(_ vector: SuiteCase) {
        let signer = Self.suiteSigner
        let hash = SigV4Signer.sha256Hex(vector.body.utf8)
        let signed = signer.headersToSign(
            vector.headers, payloadHash: hash, date: Self.suiteDate, addContentSHA256Header: false)
        let canonical = signer.canonicalRequest(
            method: vector.method, path: "/", query: vector.query, headers: signed, payloadHash: hash)
        #expect(canonical == vector.canonicalRequest)
        #expect(
            signer.stringToSign(canonicalRequest: canonical, date: Self.suiteDate)
                == "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
                + vector.stringToSignHash)
        let added = signer.sign(
            method: vector.method, path: "/", query: vector.query, headers: vector.headers, payloadHash: hash,
            date: Self.suiteDate, addContentSHA256Header: false)
        #expect(added.map(\.0) == ["x-amz-date", "Authorization"])
        #expect(Self.value("Authorization", in: added) == vector.authorization)
    }

    // MARK: Canonical forms

    @Test("Canonical headers: lower-cased, sorted, trimmed, inner spaces collapsed, repeated names joined")
    func canonicalHeaders() {
        let result = SigV4Signer.canonicalHeaders([
            ("My-Header1", "  value1  "), ("host", "example.amazonaws.com"), ("my-header2", "\"a   b   c\""),
            ("my-header1", "value2"), ("X-Amz-Meta-Empty", ""),
        ])
        #expect(
            result.canonicalHeaders
                == "host:example.amazonaws.com\nmy-header1:value1,value2\nmy-header2:\"a b c\"\nx-amz-meta-empty:\n")
        #expect(result.signedHeaders == "host;my-header1;my-header2;x-amz-meta-empty")
    }

    @Test("URI encoding: unreserved kept, everything else %XX upper-case, space as %20")
    func uriEncoding() {
        #expect(SigV4Signer.uriEncode("AZaz09-._~") == "AZaz09-._~")
        #expect(SigV4Signer.uriEncode("a b+c/d=e&f*") == "a%20b%2Bc%2Fd%3De%26f%2A")
        #expect(SigV4Signer.uriEncode("a/b c", encodeSlash: false) == "a/b%20c")
        #expect(SigV4Signer.uriEncode("\u{1234}") == "%E1%88%B4")
        #expect(SigV4Signer.encodePath("/bucket/a b.jpg") == "/bucket/a%20b.jpg")
        #expect(
            SigV4Signer.canonicalQueryString([("b", "2"), ("a", "z"), ("a", "y y"), ("c", "")])
                == "a=y%20y&a=z&b=2&c=")
    }

    @Test("The signer replaces the headers it sets and signs the session token")
    func ownHeadersAndSessionToken() {
        let signer = SigV4Signer(
            credentials: AWSCredentials(accessKeyID: "AKID", secretAccessKey: "SECRET", sessionToken: "TOKEN"),
            region: "auto")
        let date = SigV4Date(secondsSince1970: 1_369_353_600)
        let headers = [
            ("host", "h.example"), ("X-Amz-Date", "19990101T000000Z"), ("authorization", "stale"),
            ("x-amz-content-sha256", "stale"),
        ]
        let added = signer.sign(
            method: "GET", path: "/b/k", query: [], headers: headers, payloadHash: SigV4Signer.unsignedPayload,
            date: date)
        #expect(added.map(\.0) == ["x-amz-date", "x-amz-content-sha256", "x-amz-security-token", "Authorization"])
        #expect(Self.value("x-amz-content-sha256", in: added) == "UNSIGNED-PAYLOAD")
        #expect(Self.value("x-amz-security-token", in: added) == "TOKEN")
        let authorization = Self.value("Authorization", in: added) ?? ""
        #expect(authorization.contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, "))
        let expected = SigV4Signer(
            credentials: signer.credentials, region: "auto"
        ).sign(
            method: "GET", path: "/b/k", query: [], headers: [("host", "h.example")],
            payloadHash: SigV4Signer.unsignedPayload, date: date)
        #expect(Self.value("Authorization", in: expected) == authorization)
    }

    @Test("SHA-256 hex of bytes, contiguous or not")
    func sha256Hex() {
        #expect(SigV4Signer.sha256Hex([UInt8]()) == SigV4Signer.emptyPayloadHash)
        #expect(
            SigV4Signer.sha256Hex([UInt8]()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        let body = Array("Welcome to Amazon S3.".utf8)
        #expect(SigV4Signer.sha256Hex(body) == SigV4Signer.sha256Hex(body.lazy.map { $0 }))
        #expect(SigV4Signer.sha256Hex(body[...]) == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
    }

    // MARK: Dates

    @Test(
        "SigV4Date from seconds since the epoch",
        arguments: [
            (Int64(0), "19700101T000000Z"),
            (1_369_353_600, "20130524T000000Z"),
            (1_440_938_160, "20150830T123600Z"),
            (1_709_210_096, "20240229T123456Z"),
            (1_709_251_200, "20240301T000000Z"),
            (951_868_799, "20000229T235959Z"),
            (4_107_542_400, "21000301T000000Z"),
            (-1, "19691231T235959Z"),
            (-2_208_988_800, "19000101T000000Z"),
            (253_402_300_799, "99991231T235959Z"),
        ])
    func dates(_ seconds: Int64, _ amzDate: String) {
        let date = SigV4Date(secondsSince1970: seconds)
        #expect(date.amzDate == amzDate)
        #expect(date.dateStamp == String(amzDate.prefix(8)))
    }

    @Test("SigV4Date.now() is the wall clock")
    func now() {
        let date = SigV4Date.now()
        // After 2024-01-01 and before 2200-01-01.
        #expect(date.secondsSince1970 > 1_704_067_200)
        #expect(date.year < 2200)
        #expect(date.amzDate.count == 16)
    }

    // MARK: Credentials

    @Test("Credentials from the environment")
    func credentialsFromEnvironment() {
        let full = AWSCredentials.fromEnvironment([
            "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET", "AWS_SESSION_TOKEN": "TOKEN",
        ])
        #expect(full == AWSCredentials(accessKeyID: "AKID", secretAccessKey: "SECRET", sessionToken: "TOKEN"))
        let noToken = AWSCredentials.fromEnvironment([
            "AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "SECRET", "AWS_SESSION_TOKEN": "",
        ])
        #expect(noToken == AWSCredentials(accessKeyID: "AKID", secretAccessKey: "SECRET"))
        #expect(AWSCredentials.fromEnvironment(["AWS_ACCESS_KEY_ID": "AKID"]) == nil)
        #expect(AWSCredentials.fromEnvironment(["AWS_SECRET_ACCESS_KEY": "SECRET"]) == nil)
        #expect(AWSCredentials.fromEnvironment(["AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "SECRET"]) == nil)
        #expect(AWSCredentials.fromEnvironment(["AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": ""]) == nil)
        #expect(AWSCredentials.fromEnvironment([:]) == nil)
    }

    @Test("Credentials never print their secret or session token")
    func credentialsAreRedacted() {
        let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
        let token = "FwoGZXIvYXdzEXAMPLETOKEN"
        let credentials = AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: secret, sessionToken: token)
        var dumped = ""
        dump(credentials, to: &dumped)
        var debugPrinted = ""
        debugPrint(credentials, to: &debugPrinted)
        let mirrored = Mirror(reflecting: credentials).children.map { "\($0.label ?? ""): \($0.value)" }.joined()
        let texts = [
            credentials.description, credentials.debugDescription, "\(credentials)", String(describing: credentials),
            String(reflecting: credentials), dumped, debugPrinted, mirrored, "\([credentials])",
            String(describing: Optional(credentials)),
        ]
        for text in texts {
            #expect(text.contains("AKIDEXAMPLE"))
            #expect(text.contains("<redacted>"))
            #expect(!text.contains(secret))
            #expect(!text.contains(token))
            #expect(!text.contains("EXAMPLEKEY"))
            #expect(!text.contains("EXAMPLETOKEN"))
        }
        let withoutToken = AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: secret)
        #expect(withoutToken.description.contains("sessionToken: nil"))
        #expect(!withoutToken.description.contains(secret))
    }
}
