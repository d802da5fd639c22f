#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An open directory, shared by reference so a hit can keep using it while the watcher swaps
/// in a recreated directory; closed when the last user lets go.
final class DirectoryHandle: Sendable {
    let descriptor: FileDescriptor
    var fd: Int32 { descriptor.rawValue }
    var path: String { descriptor.path }

    init(path: String, create: Bool) throws(SystemCallError) {
        if create { try Self.makeDirectories(path) }
        descriptor = try FileDescriptor(open: path, flags: O_RDONLY | O_DIRECTORY)
    }

    /// `mkdir -p`.
    static func makeDirectories(_ path: String) throws(SystemCallError) {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for part in path.split(separator: "/") {
            prefix += part
            if Glibc.mkdir(prefix, 0o755) != 0 {
                let code = errno
                if code != EEXIST { throw SystemCallError(call: "mkdir", path: prefix, errno: code) }
            }
            prefix += "/"
        }
    }
}

/// Reading a disk-tier directory: names only (`readdir`, which the C library serves with
/// `getdents64` in 32 KiB batches) — no `stat` and no `open` per file.
enum DirectoryScan {
    /// Calls `body` with the name bytes (no terminator) of every entry of the directory open as
    /// `directory`, except `.` and `..`.
    static func forEachName(
        in directory: DirectoryHandle, _ body: (UnsafeBufferPointer<UInt8>) -> Void
    ) throws(SystemCallError) {
        // A fresh open file description, so that the scan has its own read position.
        let fd = try Syscall.retrying("openat", path: directory.path) {
            openat(directory.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        }
        guard let dir = fdopendir(fd) else {
            let code = errno
            _ = close(fd)
            throw SystemCallError(call: "fdopendir", path: directory.path, errno: code)
        }
        defer { closedir(dir) }
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        while true {
            errno = 0
            guard let entry = readdir(dir) else {
                if errno != 0 { throw SystemCallError(call: "readdir", path: directory.path, errno: errno) }
                return
            }
            let name = UnsafeRawPointer(entry).advanced(by: nameOffset).assumingMemoryBound(to: UInt8.self)
            let length = strlen(UnsafeRawPointer(name).assumingMemoryBound(to: CChar.self))
            if name[0] == UInt8(ascii: ".") && (length == 1 || (length == 2 && name[1] == UInt8(ascii: "."))) { continue }
            body(UnsafeBufferPointer(start: name, count: length))
        }
    }

    /// Builds an index from the directory's names alone. Every entry gets `recency`.
    static func buildIndex(
        of directory: DirectoryHandle, recency: UInt32, staleTemporaries: inout [String]
    ) throws(SystemCallError) -> DiskIndex {
        var index = DiskIndex()
        let prefix = Array(DiskFileName.temporaryPrefix.utf8)
        try forEachName(in: directory) { bytes in
            if let name = DiskFileName(bytes: bytes) {
                index.insert(DiskIndexEntry(digest: name.digest, variant: name.variant, recency: recency))
            } else if bytes.starts(with: prefix) {
                staleTemporaries.append(String(decoding: bytes, as: UTF8.self))
            }
        }
        return index
    }
}
