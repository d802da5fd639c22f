#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Calls relative to a directory descriptor (`*at`) and on paths: every one retries `EINTR`,
/// names the path in its error, and can be failed by a ``SyscallFaults`` rule.
extension FileDescriptor {
    /// Opens the directory at `path` (`O_RDONLY | O_DIRECTORY`), creating it and its parents
    /// first when `create` is set.
    public init(directory path: String, create: Bool = false) throws(SystemCallError) {
        if create { try Self.makeDirectories(path) }
        try self.init(open: path, flags: O_RDONLY | O_DIRECTORY)
    }

    /// `fstat` of this descriptor.
    public func status() throws(SystemCallError) -> stat {
        var st = stat()
        try Syscall.retrying("fstat", path: path) { fstat(rawValue, &st) }
        return st
    }

    /// `fstatat(AT_SYMLINK_NOFOLLOW)` of `name` in this directory.
    public func status(of name: String) throws(SystemCallError) -> stat {
        var st = stat()
        try Syscall.retrying("fstatat", path: path + "/" + name) { fstatat(rawValue, name, &st, AT_SYMLINK_NOFOLLOW) }
        return st
    }

    /// `unlinkat` of `name` in this directory (`AT_REMOVEDIR` when `directory`).
    public func unlink(_ name: String, directory: Bool = false) throws(SystemCallError) {
        try Syscall.retrying("unlinkat", path: path + "/" + name) {
            unlinkat(rawValue, name, directory ? AT_REMOVEDIR : 0)
        }
    }

    /// `renameat` of `name` to `newName`, both in this directory (atomic replace).
    public func rename(_ name: String, to newName: String) throws(SystemCallError) {
        try Syscall.retrying("renameat", path: path + "/" + newName) {
            renameat(rawValue, name, rawValue, newName)
        }
    }

    /// `linkat` of `name` to `newName`, both in this directory (fails with `EEXIST` rather than
    /// replace).
    public func link(_ name: String, to newName: String) throws(SystemCallError) {
        try Syscall.retrying("linkat", path: path + "/" + newName) {
            linkat(rawValue, name, rawValue, newName, 0)
        }
    }

    /// `mkdirat` of `name` in this directory.
    public func makeDirectory(_ name: String, mode: mode_t = 0o755) throws(SystemCallError) {
        try Syscall.retrying("mkdirat", path: path + "/" + name) { mkdirat(rawValue, name, mode) }
    }

    /// `stat` (following symbolic links) of `path`.
    public static func status(ofPath path: String) throws(SystemCallError) -> stat {
        var st = stat()
        try Syscall.retrying("stat", path: path) { stat(path, &st) }
        return st
    }

    /// `unlink` of `path`.
    public static func unlink(path: String) throws(SystemCallError) {
        try Syscall.retrying("unlink", path: path) { Glibc.unlink(path) }
    }

    /// `rename` of `path` to `newPath` (atomic replace).
    public static func rename(path: String, to newPath: String) throws(SystemCallError) {
        try Syscall.retrying("rename", path: newPath) { Glibc.rename(path, newPath) }
    }

    /// `mkdir -p`: creates `path` and any missing parents; existing ones are fine.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o755) throws(SystemCallError) {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for part in path.split(separator: "/") {
            prefix += part
            do throws(SystemCallError) {
                try Syscall.retrying("mkdir", path: prefix) { Glibc.mkdir(prefix, mode) }
            } catch  where error.errno == EEXIST {
            }
            prefix += "/"
        }
    }

    /// Whether `a` and `b` are the same file (device and inode).
    public static func isSameFile(_ a: stat, _ b: stat) -> Bool {
        a.st_dev == b.st_dev && a.st_ino == b.st_ino
    }
}
