import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Everything observable about a directory tree that a read-only tool must leave alone: every
/// name (hidden ones too), its type, inode, permissions, length, modification time and bytes.
struct DirectorySnapshot: Equatable, CustomStringConvertible {
    struct Entry: Equatable {
        var mode: UInt32
        var inode: UInt64
        var size: Int
        var modified: Int
        var bytes: [UInt8]
    }

    var entries: [String: Entry] = [:]

    /// Takes the snapshot of `root` (which must exist).
    init(of root: String) throws {
        try walk(root, prefix: "")
    }

    private mutating func walk(_ path: String, prefix: String) throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: path) {
            let full = path + "/" + name
            var st = stat()
            guard lstat(full, &st) == 0 else { throw POSIXError(.ENOENT) }
            let isFile = st.st_mode & S_IFMT == S_IFREG
            entries[prefix + name] = Entry(
                mode: st.st_mode, inode: UInt64(st.st_ino), size: Int(st.st_size),
                modified: Int(st.st_mtim.tv_sec) * 1_000_000_000 + Int(st.st_mtim.tv_nsec),
                bytes: isFile ? Array(try Data(contentsOf: URL(fileURLWithPath: full))) : [])
            if st.st_mode & S_IFMT == S_IFDIR { try walk(full, prefix: prefix + name + "/") }
        }
    }

    var description: String { entries.keys.sorted().joined(separator: ", ") }
}

/// Makes a file at `path` that looks like another process's store in progress or an abandoned
/// one: a disk-tier temporary name, some bytes, and a modification time two hours ago (old
/// enough that a disk tier opening the directory deletes it).
func makeForeignTemporaryFile(in directory: String) throws -> String {
    let name = ".strata-tmp-0123456789abcdef0123456789abcdef-999999-00000000deadbeef-0"
    let path = directory + "/" + name
    try Data(repeating: 0x5A, count: 5000).write(to: URL(fileURLWithPath: path))
    let past = time(nil) - 7200
    var times = [timespec(tv_sec: past, tv_nsec: 0), timespec(tv_sec: past, tv_nsec: 0)]
    guard utimensat(AT_FDCWD, path, &times, 0) == 0 else { throw POSIXError(.EIO) }
    return name
}
