import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
@testable import StrataHTTPOrigin
import StrataTestSupport

/// Runs `body` with an ``HTTPSource`` for `baseURL` and always shuts the source down
/// afterwards. Unless `configure` says otherwise: a 20 ms retry backoff, and read and total
/// timeouts far above the defaults — on a loaded 2-core machine a test's task can wait many
/// seconds for a thread, and a timeout there would retry and add requests to the log the
/// test counts (the timeout tests set their own).
func withHTTPSource<T>(
    _ baseURL: String, _ configure: (inout HTTPSource.Configuration) -> Void = { _ in },
    _ body: (HTTPSource) async throws -> T
) async throws -> T {
    var configuration = HTTPSource.Configuration(baseURL: baseURL)
    configuration.retryBackoff = .milliseconds(20)
    configuration.readTimeout = .seconds(120)
    configuration.totalTimeout = .seconds(300)
    configure(&configuration)
    let source = try HTTPSource(configuration: configuration)
    do {
        let result = try await body(source)
        try await source.shutdown()
        return result
    } catch {
        try? await source.shutdown()
        throw error
    }
}

/// A short random marker for request paths, so that a test finds its own lines in the access
/// log that the suite's tests share.
func logMarker() -> String { "t" + UUID().uuidString.prefix(8).lowercased() }

/// The ETag nginx computes for a file: `"<mtime hex>-<size hex>"`.
func nginxETag(ofFileAt path: String) throws -> String {
    var st = stat()
    guard stat(path, &st) == 0 else { throw SystemCallError(call: "stat", path: path, errno: errno) }
    return "\"\(String(st.st_mtim.tv_sec, radix: 16))-\(String(st.st_size, radix: 16))\""
}

/// A port on 127.0.0.1 that nothing listens on (bound to port 0, read back, closed).
func closedPort() -> Int? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    return ok ? Int(UInt16(bigEndian: address.sin_port)) : nil
}
