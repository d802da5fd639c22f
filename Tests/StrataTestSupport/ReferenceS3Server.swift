#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// An S3 stand-in on 127.0.0.1 whose signature check is the AWS SDK's signer
/// (`Tests/moto/reference_s3.py`: botocore's `S3SigV4Auth`, from moto's virtual environment),
/// for what moto cannot check: keys that need percent-encoding (moto 5.2.1 refuses them, a
/// space aside, from boto3 too) and the request's time (moto does not look at it). A request
/// must carry the signature botocore gives it, a path in S3's one canonical encoding, its body's
/// hash, this server's session token when it has one, and a time within 15 minutes of this
/// server's clock, which `clockOffset` moves. Objects live in the server's memory. Stopped by
/// its pid (``stop()``, or ``withReferenceS3(sessionToken:clockOffset:_:)``).
package final class ReferenceS3Server: Sendable {
    package let port: Int
    package let pid: pid_t
    /// The one key the server accepts (a `/` and a `+` in the secret, as AWS's secrets have).
    package static let accessKeyID = "AKIAREFERENCE0000001"
    package static let secretAccessKey = "reference/secret+key/0123456789abcdefghij"
    /// Where the server writes each refused request with botocore's canonical request.
    package let logPath: String

    /// `http://127.0.0.1:<port>`.
    package var endpoint: String { "http://127.0.0.1:\(port)" }

    private init(port: Int, pid: pid_t, logPath: String) {
        self.port = port
        self.pid = pid
        self.logPath = logPath
    }

    /// What the server logged: each refused request and botocore's canonical request for it.
    package var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Starts the server (moto's environment installed if needed, for botocore), with
    /// `sessionToken` required when given and its clock `clockOffset` ahead of this machine's.
    package static func start(sessionToken: String? = nil, clockOffset: Duration = .zero) throws -> ReferenceS3Server {
        let root = MotoServer.packageRoot()
        let python = try MotoServer.installedTools().python
        let port = try MotoServer.freePort()
        let logPath = NSTemporaryDirectory() + "reference-s3-\(port)-\(UUID().uuidString).log"
        guard FileManager.default.createFile(atPath: logPath, contents: nil), let log = FileHandle(forWritingAtPath: logPath) else {
            throw MotoServer.StartError(description: "could not create \(logPath)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        var arguments = [root + "/Tests/moto/reference_s3.py", "\(port)", accessKeyID, secretAccessKey]
        if let sessionToken { arguments += ["--session-token", sessionToken] }
        arguments += ["--clock-offset", "\(Double(clockOffset.components.seconds))"]
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = log
        try process.run()
        guard MotoServer.waitUntilListening(port: port, process: process, seconds: 60) else {
            let said = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            throw MotoServer.StartError(description: "reference_s3.py did not listen on 127.0.0.1:\(port): \(said.suffix(2000))")
        }
        return ReferenceS3Server(port: port, pid: process.processIdentifier, logPath: logPath)
    }

    /// Stops the server (SIGTERM, then SIGKILL after 5 s), reaps it and removes its log.
    package func stop() {
        MotoServer.terminate(pid)
        try? FileManager.default.removeItem(atPath: logPath)
    }
}

/// Runs `body` with a ``ReferenceS3Server`` and stops it afterwards, whatever `body` did.
package func withReferenceS3<T>(
    sessionToken: String? = nil, clockOffset: Duration = .zero, _ body: (ReferenceS3Server) async throws -> T
) async throws -> T {
    let server = try ReferenceS3Server.start(sessionToken: sessionToken, clockOffset: clockOffset)
    defer { server.stop() }
    return try await body(server)
}
