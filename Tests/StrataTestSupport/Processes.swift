#if canImport(Glibc)
import Glibc
#endif
import Strata

/// The `strata` executable built next to the test bundle (`swift test` builds every product).
package func strataExecutable() -> String? {
    var candidates: [String] = []
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    if n > 0 { candidates.append(String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)) }
    candidates.append(CommandLine.arguments[0])
    for exe in candidates {
        var dir = exe
        // The test binary lives in .build/<triple>/debug/ (or inside an .xctest bundle there).
        for _ in 0..<4 {
            guard let slash = dir.lastIndex(of: "/") else { break }
            dir = String(dir[..<slash])
            let path = dir + "/strata"
            if access(path, X_OK) == 0 { return path }
        }
    }
    return nil
}

/// Starts `path` with `arguments`; returns the child's pid.
package func spawn(_ path: String, _ arguments: [String]) throws -> pid_t {
    var pid: pid_t = 0
    var argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for p in argv { free(p) } }
    let rc = posix_spawn(&pid, path, nil, nil, &argv, environ)
    guard rc == 0 else { throw SystemCallError(call: "posix_spawn", path: path, errno: rc) }
    return pid
}

/// Waits for `pid`; returns its exit status, or 128 + signal.
package func waitFor(_ pid: pid_t) -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    if status & 0x7F == 0 { return (status >> 8) & 0xFF }
    return 128 + (status & 0x7F)
}

/// The name of the calling thread (`/proc/thread-self/comm`, at most 15 bytes), or "" when it
/// cannot be read.
package func currentThreadName() -> String {
    let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
    return comm.hasSuffix("\n") ? String(comm.dropLast()) : comm
}
