#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Strata

/// A real moto server (PyPI `moto[server]`, installed by `Scripts/moto.sh` in
/// `.build/moto-venv`) on 127.0.0.1, with AWS Signature Version 4 checked: it is started with
/// `INITIAL_NO_AUTH_ACTION_COUNT=3`, `Tests/moto/setup.py` spends those three unsigned actions
/// on an IAM user with S3 rights and its access key, and every later request must be signed
/// with that key. Stopped by its pid (``stop()``, or ``withMoto(buckets:_:)``).
package final class MotoServer: Sendable {
    package let port: Int
    package let pid: pid_t
    package let accessKeyID: String
    package let secretAccessKey: String

    private init(port: Int, pid: pid_t, accessKeyID: String, secretAccessKey: String) {
        self.port = port
        self.pid = pid
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
    }

    /// `http://127.0.0.1:<port>`.
    package var endpoint: String { "http://127.0.0.1:\(port)" }

    package struct StartError: Error, CustomStringConvertible {
        package var description: String
    }

    /// Installs moto if needed, starts it on a free port, waits for it, makes the user, the key
    /// and `buckets`.
    package static func start(buckets: [String], port requested: Int? = nil) throws -> MotoServer {
        let root = packageRoot()
        let tools = try installedTools()
        let port = try requested ?? freePort()
        var environment = ProcessInfo.processInfo.environment
        environment["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"
        environment["AWS_ACCESS_KEY_ID"] = nil
        environment["AWS_SECRET_ACCESS_KEY"] = nil
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tools.server)
        process.arguments = ["-H", "127.0.0.1", "-p", "\(port)"]
        process.environment = environment
        // STRATA_MOTO_LOG=FILE keeps the server's request log (for debugging a test).
        let log = ProcessInfo.processInfo.environment["STRATA_MOTO_LOG"].flatMap { path -> FileHandle? in
            _ = FileManager.default.createFile(atPath: path, contents: nil)
            return FileHandle(forWritingAtPath: path)
        }
        process.standardOutput = log ?? FileHandle.nullDevice
        process.standardError = log ?? FileHandle.nullDevice
        try process.run()
        let pid = process.processIdentifier
        guard waitUntilListening(port: port, process: process, seconds: 180) else {
            throw StartError(description: "moto_server did not listen on 127.0.0.1:\(port) within 180 s")
        }
        let output: String
        do {
            output = try run(tools.python, [root + "/Tests/moto/setup.py", "http://127.0.0.1:\(port)"] + buckets, environment: nil)
        } catch {
            kill(pid, SIGKILL)
            throw error
        }
        guard let data = output.data(using: .utf8),
            let key = try? JSONSerialization.jsonObject(with: data) as? [String: String],
            let id = key["accessKeyID"], let secret = key["secretAccessKey"]
        else {
            kill(pid, SIGKILL)
            throw StartError(description: "Tests/moto/setup.py printed \(output.debugDescription)")
        }
        return MotoServer(port: port, pid: pid, accessKeyID: id, secretAccessKey: secret)
    }

    /// Stops the server (SIGTERM, then SIGKILL after 5 s) and reaps it.
    package func stop() { Self.terminate(pid) }

    /// Stops the process `pid` (SIGTERM, then SIGKILL after 5 s) and reaps it.
    static func terminate(_ pid: pid_t) {
        kill(pid, SIGTERM)
        for _ in 0..<100 {
            var status: Int32 = 0
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid || reaped < 0 { return }
            usleep(50_000)
        }
        kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }

    /// Installs moto's virtual environment if needed (`Scripts/moto.sh`): its `moto_server` and
    /// its `python` (which has boto3 and botocore).
    static func installedTools() throws -> (server: String, python: String) {
        let paths = try run(packageRoot() + "/Scripts/moto.sh", [], environment: nil).split(separator: " ")
            .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
        guard paths.count == 2 else { throw StartError(description: "Scripts/moto.sh printed \(paths)") }
        return (paths[0], paths[1])
    }

    /// Waits up to `seconds` for `process` to accept connections on 127.0.0.1:`port`; kills it
    /// (SIGKILL) and returns false when it exits first or does not.
    static func waitUntilListening(port: Int, process: Process, seconds: Int) -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !canConnect(port: port) {
            if ContinuousClock.now > deadline || !process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                return false
            }
            usleep(50_000)
        }
        return true
    }

    /// Stops the server abruptly, as a crash or a network cut would (SIGKILL).
    package func kill9() {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }

    /// The repository's root (where Package.swift is), from this file's path.
    package static func packageRoot() -> String {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }

    private static func run(_ path: String, _ arguments: [String], environment: [String: String]?) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let pipe = Pipe()
        let errors = Pipe()
        process.standardOutput = pipe
        process.standardError = errors
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw StartError(description: "\(path) exited \(process.terminationStatus): \(errorText.suffix(2000))")
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw StartError(description: "socket failed: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw StartError(description: "bind failed: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func canConnect(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

/// Runs `body` with a moto server holding `buckets`, and stops it afterwards, whatever `body`
/// did.
package func withMoto<T>(buckets: [String], _ body: (MotoServer) async throws -> T) async throws -> T {
    let moto = try MotoServer.start(buckets: buckets)
    defer { moto.stop() }
    return try await body(moto)
}
