import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
import StrataTestSupport

/// A real nginx on 127.0.0.1 for the suite it is attached to (``NginxTrait``): configured from
/// `Tests/nginx/nginx.conf.template`, in its own temporary prefix (pid file, logs, temp
/// files), in the foreground as a child of the test process, stopped by its pid when the suite
/// ends — whether its tests passed, failed or threw.
final class Nginx: Sendable {
    let port: Int
    /// The temporary directory nginx runs in.
    let prefix: URL
    let pid: pid_t
    /// The socket behind `/stall/`: accepts connections (the kernel's backlog) and never answers.
    private let stallSocket: Int32

    private init(port: Int, prefix: URL, pid: pid_t, stallSocket: Int32) {
        self.port = port
        self.prefix = prefix
        self.pid = pid
        self.stallSocket = stallSocket
    }

    /// `http://127.0.0.1:<port>/<path>/`.
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)/\(path)/" }

    /// The directory behind `/mutable/`.
    var mutableDirectory: URL { prefix.appendingPathComponent("mutable", isDirectory: true) }

    /// One request nginx logged (see the `strata` log format in the template).
    struct LogLine: CustomStringConvertible {
        var method: String
        /// As sent (percent-encoded).
        var requestURI: String
        /// As nginx understood it: decoded, dot segments resolved, slashes merged.
        var uri: String
        var status: Int
        var bytesSent: Int
        /// Whether nginx sent the whole response.
        var completed: Bool
        var ifNoneMatch: String
        var ifModifiedSince: String
        var authorization: String
        var host: String
        /// When the request ended and how long it took (seconds).
        var end: Double
        var duration: Double

        var description: String {
            "\(method) \(requestURI) [\(uri)] \(status) \(bytesSent)B \(completed ? "OK" : "incomplete") host=\(host)"
        }
    }

    /// Every request logged so far.
    func accessLog() -> [LogLine] {
        guard let text = try? String(contentsOf: prefix.appendingPathComponent("access.log"), encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: "\t", omittingEmptySubsequences: false).map { Self.unescape(String($0)) }
            guard f.count == 12 else { return nil }
            return LogLine(
                method: f[0], requestURI: f[1], uri: f[2], status: Int(f[3]) ?? 0, bytesSent: Int(f[4]) ?? 0,
                completed: f[5] == "OK", ifNoneMatch: f[6], ifModifiedSince: f[7], authorization: f[8], host: f[9],
                end: Double(f[10]) ?? 0, duration: Double(f[11]) ?? 0)
        }
    }

    /// The logged requests matching `predicate`, once there are at least `count` of them (or
    /// after 30 s). nginx writes a request's line after sending the response, so a client can
    /// see the response before the line is there.
    func logged(_ count: Int, where predicate: (LogLine) -> Bool) async -> [LogLine] {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            // Every 25 ms: each look reads and parses the whole log.
            let lines = accessLog().filter(predicate)
            if lines.count >= count || ContinuousClock.now >= deadline { return lines }
            try? await Task.sleep(for: .milliseconds(25))
        }
    }

    /// ``logged(_:where:)`` for the requests whose request URI contains `marker`.
    func logged(_ count: Int, containing marker: String) async -> [LogLine] {
        await logged(count) { $0.requestURI.contains(marker) }
    }

    /// nginx's `escape=json` undone for the characters it escapes (`\"`, `\\`, `\uXXXX`).
    private static func unescape(_ field: String) -> String {
        guard field.contains("\\") else { return field }
        var out = ""
        var chars = field.makeIterator()
        while let c = chars.next() {
            guard c == "\\", let next = chars.next() else {
                out.append(c)
                continue
            }
            if next == "u" {
                let hex = String([chars.next(), chars.next(), chars.next(), chars.next()].compactMap { $0 })
                if let value = UInt32(hex, radix: 16), let scalar = Unicode.Scalar(value) { out.unicodeScalars.append(scalar) }
            } else {
                out.append(next)
            }
        }
        return out
    }

    /// The end of nginx's error log (for failure messages).
    func errorLogTail() -> String {
        Self.tail(of: prefix.appendingPathComponent("error.log"))
    }

    private static func tail(of url: URL) -> String {
        let text = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
        return String(text.suffix(2000))
    }

    // MARK: - Start and stop

    enum StartError: Error, CustomStringConvertible {
        case unavailable(String)
        case failed(String)
        var description: String {
            switch self {
            case .unavailable(let why), .failed(let why): return why
            }
        }
    }

    /// The nginx binary, installing the Debian package when it is missing (as root, with
    /// apt-get). Throws ``StartError/unavailable(_:)`` saying why when it cannot be had.
    static func binary() async throws(StartError) -> String {
        let candidates = ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx", "/usr/local/bin/nginx"]
        if let found = candidates.first(where: { access($0, X_OK) == 0 }) { return found }
        guard geteuid() == 0 else {
            throw .unavailable("nginx is not installed and the tests are not root, so cannot run `apt-get install -y nginx`")
        }
        guard access("/usr/bin/apt-get", X_OK) == 0 else {
            throw .unavailable("nginx is not installed and there is no apt-get to install it")
        }
        var status = await run("/usr/bin/apt-get", ["install", "-y", "-qq", "nginx"])
        if status != 0 {
            _ = await run("/usr/bin/apt-get", ["update", "-qq"])
            status = await run("/usr/bin/apt-get", ["install", "-y", "-qq", "nginx"])
        }
        if let found = candidates.first(where: { access($0, X_OK) == 0 }) { return found }
        throw .unavailable("nginx is not installed and `apt-get install -y nginx` failed (exit status \(status))")
    }

    /// Runs a command to completion without blocking a cooperative thread (polls `waitpid`).
    private static func run(_ path: String, _ arguments: [String]) async -> Int32 {
        setenv("DEBIAN_FRONTEND", "noninteractive", 1)
        guard let pid = try? spawn(path, arguments) else { return 127 }
        while true {
            if let status = reap(pid) { return status }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    /// The exit status of `pid` if it has exited (`waitpid` without waiting), else `nil`.
    private static func reap(_ pid: pid_t) -> Int32? {
        var status: Int32 = 0
        var rc: pid_t
        repeat { rc = waitpid(pid, &status, WNOHANG) } while rc < 0 && errno == EINTR
        if rc == 0 { return nil }
        if rc < 0 { return -1 }
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    }

    /// Starts nginx on a free port (a few tries: another process may take the port between
    /// our probe and nginx's bind).
    static func start() async throws(StartError) -> Nginx {
        let binary = try await binary()
        stopLeftovers()
        var lastError = ""
        for _ in 0..<3 {
            do {
                return try await start(binary: binary)
            } catch {
                lastError = error.description
            }
        }
        throw .failed(lastError)
    }

    /// Stops the nginx of an earlier test process that died before stopping it: its prefix
    /// is still there, the test process that wrote `owner.pid` there is gone, and the pid in
    /// `nginx.pid` still runs nginx with that prefix. (Another live test process's nginx is
    /// left alone.)
    private static func stopLeftovers() {
        let fm = FileManager.default
        let temporary = fm.temporaryDirectory
        guard let names = try? fm.contentsOfDirectory(atPath: temporary.path) else { return }
        for name in names where name.hasPrefix("strata-nginx-") {
            let prefix = temporary.appendingPathComponent(name)
            guard let ownerText = try? String(contentsOf: prefix.appendingPathComponent("owner.pid"), encoding: .utf8),
                let owner = pid_t(ownerText.trimmingCharacters(in: .whitespacesAndNewlines)),
                kill(owner, 0) != 0 && errno == ESRCH
            else { continue }
            guard let text = try? String(contentsOf: prefix.appendingPathComponent("nginx.pid"), encoding: .utf8),
                let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)),
                let commandLine = try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))
            else { continue }
            let arguments = commandLine.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            guard arguments.first?.hasSuffix("nginx") == true || arguments.first?.hasPrefix("nginx:") == true,
                arguments.contains(prefix.path) || arguments.contains(where: { $0.contains(prefix.path) })
            else { continue }
            kill(pid, SIGTERM)
            // Not our child: wait (at most 5 s) for it to be gone before removing its files.
            for _ in 0..<500 where kill(pid, 0) == 0 { usleep(10_000) }
            try? fm.removeItem(at: prefix)
        }
    }

    private static func start(binary: String) async throws(StartError) -> Nginx {
        let fm = FileManager.default
        let prefix = fm.temporaryDirectory.appendingPathComponent("strata-nginx-\(UUID().uuidString)", isDirectory: true)
        let (stallSocket, stallPort) = try listeningSocket()
        do {
            for sub in ["tmp", "www", "mutable"] {
                try fm.createDirectory(at: prefix.appendingPathComponent(sub), withIntermediateDirectories: true)
            }
            try Data("outside the base path\n".utf8).write(to: prefix.appendingPathComponent("www/secret.txt"))
            try Data("\(getpid())\n".utf8).write(to: prefix.appendingPathComponent("owner.pid"))
            let port = try freePort()
            let template = try String(contentsOf: templateURL, encoding: .utf8)
            let config =
                template
                .replacingOccurrences(of: "{{PREFIX}}", with: prefix.path)
                .replacingOccurrences(of: "{{PORT}}", with: "\(port)")
                .replacingOccurrences(of: "{{STALL_PORT}}", with: "\(stallPort)")
                .replacingOccurrences(of: "{{FIXTURES}}", with: Fixtures.directory.path)
                // Root starts the master; the workers read the fixtures as root too.
                .replacingOccurrences(of: "{{USER}}", with: geteuid() == 0 ? "user root;" : "")
            let configURL = prefix.appendingPathComponent("nginx.conf")
            try Data(config.utf8).write(to: configURL)
            let pid = try spawn(binary, ["-p", prefix.path, "-c", configURL.path, "-e", prefix.appendingPathComponent("error.log").path])
            let nginx = Nginx(port: port, prefix: prefix, pid: pid, stallSocket: stallSocket)
            // Ready when it accepts connections; gone when it could not bind.
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                if let status = reap(pid) {
                    close(stallSocket)
                    throw StartError.failed("nginx exited with status \(status): \(nginx.errorLogTail())")
                }
                if canConnect(port: port) { return nginx }
                try? await Task.sleep(for: .milliseconds(20))
            }
            nginx.stop()
            throw StartError.failed("nginx did not accept connections on port \(port) within 60 s: \(nginx.errorLogTail())")
        } catch let error as StartError {
            throw error
        } catch {
            close(stallSocket)
            throw .failed("cannot prepare nginx's directory \(prefix.path): \(error)")
        }
    }

    /// Stops nginx (SIGTERM, then SIGKILL if it lingers), reaps it and removes its prefix.
    func stop() {
        kill(pid, SIGTERM)
        var waited = 0
        while Self.reap(pid) == nil {
            if waited == 10_000 { kill(pid, SIGKILL) }
            usleep(1000)
            waited += 1
        }
        close(stallSocket)
        try? FileManager.default.removeItem(at: prefix)
    }

    /// `Tests/nginx/nginx.conf.template`, beside the `Fixtures/` directory's parent.
    private static var templateURL: URL {
        Fixtures.directory.deletingLastPathComponent().appendingPathComponent("Tests/nginx/nginx.conf.template")
    }

    /// A port nobody listens on right now (bound to port 0, read back, closed).
    private static func freePort() throws(StartError) -> Int {
        let (fd, port) = try listeningSocket()
        close(fd)
        return port
    }

    /// A TCP socket listening on 127.0.0.1 at a free port.
    private static func listeningSocket() throws(StartError) -> (Int32, Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw .failed("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                bind(fd, sa, length) == 0 && listen(fd, 128) == 0 && getsockname(fd, sa, &length) == 0
            }
        }
        guard ok else {
            let error = errno
            close(fd)
            throw .failed("cannot listen on 127.0.0.1: errno \(error)")
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    private static func canConnect(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

/// One nginx for the whole suite it is attached to (`@Suite(.nginx)`): started before the
/// suite's first test, stopped after its last, whatever happened in between. Tests reach it
/// with ``current()``.
struct NginxTrait: SuiteTrait, TestScoping {
    @TaskLocal static var running: Result<Nginx, Nginx.StartError>?

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let started: Result<Nginx, Nginx.StartError>
        do {
            started = .success(try await Nginx.start())
        } catch {
            started = .failure(error)
        }
        defer { if case .success(let nginx) = started { nginx.stop() } }
        try await Self.$running.withValue(started) { try await function() }
    }

    /// The suite's nginx. Skips (cancels) the calling test with the reason when nginx cannot be
    /// installed; records a failure when it is installed but would not start.
    static func current() throws -> Nginx {
        switch running {
        case .success(let nginx)?:
            return nginx
        case .failure(.unavailable(let why))?:
            try Test.cancel("skipped: \(why)")
        case .failure(.failed(let why))?:
            Issue.record("nginx would not start: \(why)")
            throw Nginx.StartError.failed(why)
        case nil:
            Issue.record("no nginx: attach the .nginx trait to the suite")
            throw Nginx.StartError.failed("no .nginx trait")
        }
    }
}

extension Trait where Self == NginxTrait {
    /// A real nginx for the suite (``NginxTrait``).
    static var nginx: Self { NginxTrait() }
}
