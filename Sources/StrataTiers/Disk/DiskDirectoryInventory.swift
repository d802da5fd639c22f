import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A read-only census of a disk-tier directory: how many cache files it holds, for how many
/// keys, how many bytes they take and which variant shapes they are.
///
/// Use it to inspect a directory that a running tier (in this or another process) may be
/// using — `strata stats` does. Unlike ``DiskTier/init(directory:configuration:pool:)``, which
/// creates the directory, deletes abandoned temporary files, watches it and may evict, taking
/// an inventory never creates, deletes, renames or writes anything: it opens the directory
/// read-only, lists its names (`getdents64`, as the tier builds its index) and, with
/// `measuringFiles`, `fstatat`s each name. It opens no file.
///
/// The result is a snapshot of a directory that may change while it is taken: a name deleted
/// between the listing and its `fstatat` is counted in ``vanished``, not in ``files``.
///
/// Cost: one listing pass (≈ 1 s per million names) plus, when measuring, one `fstatat` per
/// name (about as much again); memory for the distinct keys (16 bytes each) and variant shapes.
public struct DiskDirectoryInventory: Sendable, Hashable {
    /// The directory, as given.
    public var directory: String
    /// Published cache files (canonical `<digest>-<w>x<h>-<mode><style>.px` names).
    public var files = 0
    /// Distinct keys (digests) among ``files``.
    public var keys = 0
    /// Bytes the tier's byte limit charges for ``files``: pixel rows plus a 4 KiB allowance
    /// per file (``DiskTier/Statistics/bytes`` counts the same way).
    public var chargedBytes = 0
    /// Sum of the files' lengths (`st_size`); 0 unless measured.
    public var fileBytes = 0
    /// Sum of the blocks the files occupy (`st_blocks` × 512); 0 unless measured.
    public var allocatedBytes = 0
    /// Files per variant shape (size, mode and style).
    public var variants: [VariantDescriptor: Int] = [:]
    /// Temporary files (`.strata-tmp-…`): stores in progress in some process, or left by a
    /// writer that died (the next tier to open the directory deletes those).
    public var temporaryFiles = 0
    /// Bytes of ``temporaryFiles`` (`st_size`); 0 unless measured.
    public var temporaryBytes = 0
    /// Other names, which the tier ignores (files of other programs, subdirectories).
    public var otherEntries = 0
    /// Cache-file names that were deleted between the listing and their `fstatat`.
    public var vanished = 0
    /// Whether ``fileBytes``, ``allocatedBytes`` and ``temporaryBytes`` were measured.
    public var measured = false

    /// Takes the inventory of the disk-tier directory at `directory` (see the type's
    /// documentation: nothing is written). With `measuringFiles`, each name is `fstatat`ed
    /// for its length and blocks (a name that is not a regular file counts as other).
    ///
    /// - Throws: ``DiskTierError/cannotUseDirectory(path:underlying:)`` when the directory
    ///   does not exist, is not a directory or cannot be read: check the path and its
    ///   permissions. Nothing is created in its place.
    public init(scanning directory: String, measuringFiles: Bool = true) throws(DiskTierError) {
        self.directory = directory
        measured = measuringFiles
        let handle: FileDescriptor
        do {
            handle = try FileDescriptor(directory: directory, create: false)
        } catch {
            throw .cannotUseDirectory(path: directory, underlying: error)
        }
        var digests = Set<ImageEntityID>()
        var result = self
        let temporaryPrefix = Array(DiskFileName.temporaryPrefix.utf8)
        let directoryFD = handle.rawValue  // for `fstatat` inside the listing's callback
        do {
            try DirectoryScan.forEachName(in: handle) { bytes, _ in
                if let name = DiskFileName(bytes: bytes) {
                    if measuringFiles {
                        switch Self.status(of: bytes, in: directoryFD) {
                        case .regular(let st):
                            result.fileBytes += Int(st.st_size)
                            result.allocatedBytes += Int(st.st_blocks) * 512
                        case .other:
                            result.otherEntries += 1
                            return
                        case .gone:
                            result.vanished += 1
                            return
                        }
                    }
                    result.files += 1
                    result.chargedBytes += DiskIndexEntry(name).chargedBytes
                    result.variants[name.variant, default: 0] += 1
                    digests.insert(name.digest)
                } else if bytes.starts(with: temporaryPrefix) {
                    result.temporaryFiles += 1
                    if measuringFiles, case .regular(let st) = Self.status(of: bytes, in: directoryFD) {
                        result.temporaryBytes += Int(st.st_size)
                    }
                } else {
                    result.otherEntries += 1
                }
            }
        } catch {
            throw .cannotUseDirectory(path: directory, underlying: error)
        }
        result.keys = digests.count
        self = result
    }

    private enum NameStatus {
        case regular(stat)
        case other
        case gone
    }

    /// `fstatat(AT_SYMLINK_NOFOLLOW)` of the name `bytes` in the directory open as `directory`.
    private static func status(of bytes: UnsafeBufferPointer<UInt8>, in directory: Int32) -> NameStatus {
        var name = [CChar](repeating: 0, count: bytes.count + 1)
        for (i, byte) in bytes.enumerated() { name[i] = CChar(bitPattern: byte) }
        var st = stat()
        while fstatat(directory, name, &st, AT_SYMLINK_NOFOLLOW) != 0 {
            if errno == EINTR { continue }
            return errno == ENOENT ? .gone : .other
        }
        return st.st_mode & S_IFMT == S_IFREG ? .regular(st) : .other
    }
}
