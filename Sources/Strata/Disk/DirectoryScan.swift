#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `getdents64(2)` (glibc ≥ 2.30 declares it only under `_GNU_SOURCE`).
@_silgen_name("getdents64")
private func strataGetdents64(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int

/// An open directory, shared by reference so a hit can keep using it while the watcher swaps
/// in a recreated directory; closed when the last user lets go.
package final class DirectoryHandle: Sendable {
    let descriptor: FileDescriptor
    var fd: Int32 { descriptor.rawValue }
    var path: String { descriptor.path }

    package init(path: String, create: Bool) throws(SystemCallError) {
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

/// Reading a disk-tier directory: names only (`getdents64`) — no `stat` and no `open` per file.
package enum DirectoryScan {
    /// Calls `body` with the name bytes (no terminator) and the inode number of every entry of
    /// the directory open as `directory`, except `.` and `..`. Reads `getdents64` batches of 1 MiB (glibc's `readdir`
    /// uses 32 KiB), so a million names take about 80 calls.
    package static func forEachName(
        in directory: DirectoryHandle, _ body: (UnsafeBufferPointer<UInt8>, UInt64) -> Void
    ) throws(SystemCallError) {
        // A fresh open file description, so that the scan has its own read position.
        let fd = try Syscall.retrying("openat", path: directory.path) {
            openat(directory.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        }
        defer { _ = close(fd) }
        let capacity = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
        defer { buffer.deallocate() }
        // struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
        let nameOffset = 19
        while true {
            let n = try Syscall.retrying("getdents64", path: directory.path) { strataGetdents64(fd, buffer, capacity) }
            if n == 0 { return }
            var offset = 0
            while offset < n {
                let inode = buffer.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                let recordLength = Int(buffer.loadUnaligned(fromByteOffset: offset + 16, as: UInt16.self))
                let name = buffer.advanced(by: offset + nameOffset).assumingMemoryBound(to: UInt8.self)
                let length = strnlen(UnsafeRawPointer(name).assumingMemoryBound(to: CChar.self), recordLength - nameOffset)
                offset += recordLength
                if name[0] == UInt8(ascii: ".") && (length == 1 || (length == 2 && name[1] == UInt8(ascii: "."))) { continue }
                body(UnsafeBufferPointer(start: name, count: length), inode)
            }
        }
    }

    /// Roughly how many entries a directory holds, from its size (ext4, xfs and tmpfs all grow
    /// a directory with its entries), so that the index is allocated once.
    static func estimatedEntryCount(of directory: DirectoryHandle) -> Int {
        var st = stat()
        guard fstat(directory.fd, &st) == 0 else { return 0 }
        return min(Int(st.st_size) / 64, 1 << 26)
    }

    /// Builds an index from the directory's names alone, in directory order (the first name
    /// listed is the least recently used).
    package static func buildIndex(
        of directory: DirectoryHandle, staleTemporaries: inout [String]
    ) throws(SystemCallError) -> DiskIndex {
        var index = DiskIndex(minimumCapacity: estimatedEntryCount(of: directory))
        let prefix = Array(DiskFileName.temporaryPrefix.utf8)
        try forEachName(in: directory) { bytes, inode in
            if let name = DiskFileName(bytes: bytes) {
                index.insert(DiskIndexEntry(digest: name.digest, variant: name.variant, inode: inode))
            } else if bytes.starts(with: prefix) {
                staleTemporaries.append(String(decoding: bytes, as: UTF8.self))
            }
        }
        return index
    }
}
