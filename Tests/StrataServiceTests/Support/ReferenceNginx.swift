import Foundation
import StrataTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// nginx on a free port of 127.0.0.1 serving `Fixtures/` under `/images/` (the query is
/// ignored: the original file) and `ok\n` at `/healthz`, with its defaults otherwise: the
/// reference of the HTTP edge-case test. `nil` from ``start()`` when nginx is not installed.
final class ReferenceNginx: @unchecked Sendable {
    let port: Int
    let pid: pid_t
    let prefix: String

    private init(port: Int, pid: pid_t, prefix: String) {
        self.port = port
        self.pid = pid
        self.prefix = prefix
    }

    static func start() async throws -> ReferenceNginx? {
        guard
            let binary = ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"].first(where: {
                FileManager.default.isExecutableFile(atPath: $0)
            })
        else { return nil }
        let prefix = makeScratchDirectory("nginx")
        try FileManager.default.createDirectory(atPath: prefix + "/tmp", withIntermediateDirectories: true)
        let port = try freePort()
        let config = """
            daemon off;
            master_process off;
            worker_processes 1;
            \(geteuid() == 0 ? "user root;" : "")
            pid \(prefix)/nginx.pid;
            error_log \(prefix)/error.log warn;
            events { worker_connections 256; }
            http {
                access_log off;
                client_body_temp_path \(prefix)/tmp/body;
                proxy_temp_path \(prefix)/tmp/proxy;
                fastcgi_temp_path \(prefix)/tmp/fastcgi;
                uwsgi_temp_path \(prefix)/tmp/uwsgi;
                scgi_temp_path \(prefix)/tmp/scgi;
                server {
                    listen 127.0.0.1:\(port);
                    location /images/ { alias \(fixturesDirectory)/; }
                    location = /healthz { default_type text/plain; return 200 "ok\\n"; }
                }
            }
            """
        try config.write(toFile: prefix + "/nginx.conf", atomically: true, encoding: .utf8)
        let pid = try spawn(binary, ["-p", prefix, "-c", prefix + "/nginx.conf", "-e", prefix + "/error.log"])
        let nginx = ReferenceNginx(port: port, pid: pid, prefix: prefix)
        for _ in 0..<500 {
            if (try? RawSocket(port: port, receiveTimeout: 1)) != nil { return nginx }
            try await Task.sleep(for: .milliseconds(20))
        }
        nginx.stop()
        throw TestStepFailure("nginx did not start: \((try? String(contentsOfFile: prefix + "/error.log", encoding: .utf8)) ?? "")")
    }

    /// Stops it by its pid (SIGTERM, then SIGKILL after 2 s: a child spawned from a thread that
    /// blocks SIGTERM may ignore it), reaps it and removes its directory.
    func stop() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        for waited in 0... {
            let rc = waitpid(pid, &status, WNOHANG)
            if rc == pid || (rc < 0 && errno != EINTR) { break }
            if waited == 200 { kill(pid, SIGKILL) }
            usleep(10_000)
        }
        try? FileManager.default.removeItem(atPath: prefix)
    }

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw TestStepFailure("no free port: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
