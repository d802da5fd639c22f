import Foundation
import Testing

@testable import Strata
import StrataConfiguration
import StrataS3

/// `source.s3.*`: read, checked naming the key, credentials from the AWS variables when no
/// key names them, secrets never shown.
@Suite struct S3SettingsTests {
    static func read(_ arguments: [String], environment: [String: String] = [:]) async throws -> StrataConfiguration {
        try StrataConfiguration(from: try await ConfigurationLayers(arguments: arguments, environment: environment))
    }

    static func failure(_ arguments: [String], environment: [String: String] = [:]) async -> ConfigurationError? {
        await #expect(throws: ConfigurationError.self) { try await read(arguments, environment: environment) }
    }

    @Test func aBucketURLWithCredentialsFromTheAWSVariables() async throws {
        let configuration = try await Self.read(
            ["--source-s3-bucket", "s3://photos/originals/2026", "--source-s3-endpoint", "http://127.0.0.1:9000"],
            environment: ["AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "very-secret", "AWS_SESSION_TOKEN": "tok"])
        guard case .s3(let bucket) = configuration.source else {
            Issue.record("expected a bucket, got \(configuration.source)")
            return
        }
        #expect(bucket.endpoint.bucket == "photos" && bucket.prefix == "originals/2026")
        #expect(bucket.endpoint.effectiveAddressing == .path && bucket.endpoint.region == "us-east-1")
        #expect(bucket.credentials == AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "very-secret", sessionToken: "tok"))
        let secret = configuration.resolved.first { $0.key.name == "source.s3.secretAccessKey" }
        #expect(secret?.value == "<redacted>" && "\(secret!.origin)" == "environment AWS_SECRET_ACCESS_KEY")
        let id = configuration.resolved.first { $0.key.name == "source.s3.accessKeyID" }
        #expect(id?.value == "AKIDEXAMPLE" && "\(id!.origin)" == "environment AWS_ACCESS_KEY_ID")
        #expect(!configuration.resolved.contains { $0.value?.contains("very-secret") == true || $0.value?.contains("tok") == true })
    }

    @Test func explicitKeysWinOverTheAWSVariables() async throws {
        let configuration = try await Self.read(
            [
                "--source-s3-bucket", "photos", "--source-s3-access-key-id", "MINE", "--source-s3-secret-access-key", "mine",
                "--source-s3-max-retries", "4", "--source-s3-region", "eu-west-1",
            ],
            environment: ["AWS_ACCESS_KEY_ID": "AMBIENT", "AWS_SECRET_ACCESS_KEY": "ambient"])
        guard case .s3(let bucket) = configuration.source else {
            Issue.record("expected a bucket, got \(configuration.source)")
            return
        }
        #expect(bucket.credentials.accessKeyID == "MINE" && bucket.credentials.secretAccessKey == "mine")
        #expect(bucket.maxRetries == 4 && bucket.endpoint.effectiveAddressing == .virtual)
    }

    @Test func mistakesNameTheKey() async throws {
        let aws = ["AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "B"]
        #expect(await Self.failure(["--source-s3-bucket", "photos"])?.key == "source.s3.accessKeyID")
        #expect(await Self.failure(["--source-s3-bucket", "Bad_Bucket"], environment: aws)?.key == "source.s3.bucket")
        #expect(
            await Self.failure(["--source-s3-bucket", "photos", "--source-s3-endpoint", "minio:9000"], environment: aws)?.key
                == "source.s3.endpoint")
        #expect(
            await Self.failure(["--source-s3-bucket", "photos", "--source-s3-addressing", "sideways"], environment: aws)?.key
                == "source.s3.addressing")
        #expect(
            await Self.failure(["--source-s3-bucket", "s3://photos/a", "--source-s3-prefix", "b"], environment: aws)?.key
                == "source.s3.bucket")
        #expect(
            await Self.failure(["--source-s3-bucket", "photos", "--source-s3-max-concurrent-requests", "0"], environment: aws)?.key
                == "source.s3.maxConcurrentRequests")
        let both = await Self.failure(["--source-s3-bucket", "photos", "--source-directory", "/tmp"], environment: aws)
        #expect(both?.key == "source.directory" && both?.description.contains("source.s3.bucket") == true, "\(String(describing: both))")
    }
}
