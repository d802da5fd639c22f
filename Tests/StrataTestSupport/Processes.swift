#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Strata

/// The `strata` executable built next to the test bundle (`swift test` builds every product).
package func strataExecutable() -> String? { builtExecutable(named: "strata") }

/// The built `strata-test-helper` (the crash tests' children) beside the tests, if any.
package func testHelperExecutable() -> String? { builtExecutable(named: "strata-test-helper") }

/// The built executable `name` beside the test bundle, if any.
package func builtExecutable(named name: String) -> String? {
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
            let path = dir + "/" + name
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

/// Waits for `pid`; returns its exit status (or 128 + signal) and its peak resident set in
/// bytes: the largest `VmHWM` of `/proc/PID/status` read every 10 ms while it runs. (Not
/// `wait4`'s `ru_maxrss`: for a child made by `posix_spawn` it keeps the *parent's* peak from
/// before the `exec`, the two sharing their memory until then.)
package func waitForPeakResident(_ pid: pid_t) -> (status: Int32, peakResidentBytes: Int) {
    var peak = 0
    while true {
        if let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        {
            peak = max(peak, kilobytes * 1024)
        }
        var status: Int32 = 0
        let done = waitpid(pid, &status, WNOHANG)
        if done == pid {
            let code = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
            return (code, peak)
        }
        if done < 0 && errno != EINTR { return (-1, peak) }
        usleep(10_000)
    }
}
