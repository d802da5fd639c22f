import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reading a disk-tier directory: names and inode numbers only (`getdents64`) — no `stat` and
/// no `open` per file.
package enum DirectoryScan {
    /// Calls `body` with the name bytes (no terminator) and the inode number of every entry of
    /// the directory open as `directory`, except `.` and `..`. Reads `getdents64` batches of
    /// 1 MiB (glibc's `readdir` uses 32 KiB), so a million names take about 80 calls.
    package static func forEachName(
        in directory: borrowing FileDescriptor, _ body: (UnsafeBufferPointer<UInt8>, UInt64) -> Void
    ) throws(SystemCallError) {
        // A fresh open file description, so that the scan has its own read position.
        let scan = try FileDescriptor(openAt: directory, name: ".", flags: O_RDONLY | O_DIRECTORY)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 8)
        defer { buffer.deallocate() }
        // struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
        let nameOffset = 19
        while true {
            let n = try scan.readDirectoryEntries(into: buffer)
            if n == 0 { return }
            var offset = 0
            while offset < n {
                let inode = buffer.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                let recordLength = Int(buffer.loadUnaligned(fromByteOffset: offset + 16, as: UInt16.self))
                let name = UnsafeBufferPointer(
                    start: (buffer.baseAddress! + offset + nameOffset).assumingMemoryBound(to: UInt8.self),
                    count: recordLength - nameOffset)
                let length = name.firstIndex(of: 0) ?? name.count  // NUL-padded to the record
                offset += recordLength
                if name[0] == UInt8(ascii: ".") && (length == 1 || (length == 2 && name[1] == UInt8(ascii: "."))) { continue }
                body(UnsafeBufferPointer(rebasing: name[..<length]), inode)
            }
        }
    }

    /// Roughly how many entries a directory holds, from its size (ext4, xfs and tmpfs all grow
    /// a directory with its entries), so that the index is allocated once.
    package static func estimatedEntryCount(of directory: borrowing FileDescriptor) -> Int {
        guard let st = try? directory.status() else { return 0 }
        return min(Int(st.st_size) / 64, 1 << 26)
    }

    /// Builds an index from the directory's names alone, in directory order (the first name
    /// listed is the least recently used), with each file's inode.
    package static func buildIndex(
        of directory: borrowing FileDescriptor, staleTemporaries: inout [String]
    ) throws(SystemCallError) -> DiskIndex {
        var index = DiskIndex(minimumCapacity: estimatedEntryCount(of: directory))
        let prefix = Array(DiskFileName.temporaryPrefix.utf8)
        try forEachName(in: directory) { bytes, inode in
            if let name = DiskFileName(bytes: bytes) {
                index.insert(DiskIndexEntry(name, inode: inode))
            } else if bytes.starts(with: prefix) {
                staleTemporaries.append(String(decoding: bytes, as: UTF8.self))
            }
        }
        return index
    }
}
