#if canImport(Glibc)
import Glibc
#endif

/// A tmpfs of a few MiB mounted for one test (needs root, or CAP_SYS_ADMIN), unmounted at the
/// end: a real file system that fills up (ENOSPC) and can be made read-only (EROFS).
package final class SmallFilesystem {
    package let path: String

    /// Whether this process may mount a tmpfs (tried once); the tests that need one are skipped
    /// with a message otherwise.
    package static let canMount: Bool = {
        guard let probe = SmallFilesystem(megabytes: 1) else { return false }
        _ = probe
        return true
    }()

    package static let skipMessage = "mounting a tmpfs needs root (CAP_SYS_ADMIN); skipped"

    /// Mounts a tmpfs of `megabytes` MiB on a fresh directory; `nil` when mounting fails.
    package init?(megabytes: Int) {
        var template = Array("/tmp/strata-smallfs-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else { return nil }
        path = String(cString: made)
        guard Self.command("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m,mode=0755", "tmpfs", path]) else {
            rmdir(path)
            return nil
        }
    }

    deinit {
        _ = Self.command("/bin/umount", ["-l", path])
        rmdir(path)
    }

    /// Remounts read-only (`true`) or read-write.
    package func remount(readOnly: Bool) -> Bool {
        Self.command("/bin/mount", ["-o", readOnly ? "remount,ro" : "remount,rw", path])
    }

    /// Free bytes left.
    package var freeBytes: Int {
        var s = statvfs()
        guard statvfs(path, &s) == 0 else { return 0 }
        return Int(s.f_bavail) * Int(s.f_frsize)
    }

    /// Writes a file of `bytes` bytes at `name` (fewer when the file system fills first);
    /// returns how many were written.
    @discardableResult
    package func ballast(_ name: String, bytes: Int) -> Int {
        let fd = open(path + "/" + name, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0xA5, count: 64 << 10)
        var written = 0
        while written < bytes {
            let n = chunk.withUnsafeBytes { write(fd, $0.baseAddress, min($0.count, bytes - written)) }
            if n <= 0 { break }
            written += n
        }
        return written
    }

    private static func command(_ executable: String, _ arguments: [String]) -> Bool {
        guard let pid = try? spawn(executable, arguments) else { return false }
        return waitFor(pid) == 0
    }
}
