#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The bytes behind a ``PixelImage``: a 64-byte-aligned heap block that Strata allocated, or a
/// region somebody else owns (a mapped disk file, a table slot) with a release action that runs
/// when the last reference goes away.
///
/// The storage is immutable once an image is published; only code that holds the sole reference
/// (see ``PixelImage/withUnsafeMutableBytes(_:)``) writes through it, which is what makes the
/// `@unchecked Sendable` sound.
public final class PixelStorage: @unchecked Sendable {
    /// Where the bytes live; decides how the memory tier counts an image's cost.
    public enum Kind: Sendable, Hashable {
        /// Anonymous memory allocated by Strata: counts fully against memory limits.
        case heap
        /// A read-only or shared file mapping (disk tier): clean page-cache pages the kernel
        /// can drop, so a memory cost of zero-ish is fair.
        case fileMapping
        /// A slot of an image table, pinned while referenced.
        case tableSlot
    }

    @usableFromInline package let base: UnsafeMutableRawPointer
    /// Usable length in bytes.
    public let count: Int
    public let kind: Kind
    /// Whether the bytes may be written by the sole owner (false for read-only mappings).
    public let isWritable: Bool
    private let release: (@Sendable (UnsafeMutableRawPointer, Int) -> Void)?
    /// The length of the ``PixelMemory`` mapping behind a large heap buffer; 0 when `malloc`'s.
    private let mappedLength: Int

    /// Allocates `count` zeroed bytes aligned to ``PixelLayout/rowAlignment``.
    public convenience init(zeroedByteCount count: Int) {
        self.init(heapByteCount: count, zeroed: true)
    }

    /// Allocates `count` bytes aligned to ``PixelLayout/rowAlignment`` without clearing them.
    /// The caller must write every byte it later reads.
    public convenience init(uninitializedByteCount count: Int) {
        self.init(heapByteCount: count, zeroed: false)
    }

    /// A buffer of ``PixelMemory/threshold`` bytes or more is a ``PixelMemory/shared`` mapping
    /// (page aligned); a smaller one comes from `posix_memalign`.
    private init(heapByteCount count: Int, zeroed: Bool) {
        precondition(count >= 0)
        if count >= PixelMemory.threshold {
            let mapping = PixelMemory.shared.allocate(count, zeroed: zeroed)
            self.base = mapping.base
            self.mappedLength = mapping.length
        } else {
            var raw: UnsafeMutableRawPointer?
            let rc = posix_memalign(&raw, PixelLayout.rowAlignment, Swift.max(count, 1))
            guard rc == 0, let raw else { fatalError("posix_memalign(\(count)) failed: out of memory") }
            if zeroed { memset(raw, 0, count) }
            self.base = raw
            self.mappedLength = 0
        }
        self.count = count
        self.kind = .heap
        self.isWritable = true
        self.release = nil
        PixelStorageCounters.add(count, .heap)
    }

    /// Wraps memory owned elsewhere. `release` runs exactly once, when the storage is
    /// deallocated (for a mapping: `munmap`; for a table slot: unpin).
    package init(
        borrowing base: UnsafeMutableRawPointer, count: Int, kind: Kind, writable: Bool,
        release: @escaping @Sendable (UnsafeMutableRawPointer, Int) -> Void
    ) {
        self.base = base
        self.count = count
        self.kind = kind
        self.isWritable = writable
        self.release = release
        self.mappedLength = 0
        PixelStorageCounters.add(count, kind)
    }

    deinit {
        PixelStorageCounters.add(-count, kind)
        if let release {
            release(base, count)
        } else if mappedLength > 0 {
            PixelMemory.shared.release(base, length: mappedLength)
        } else {
            free(base)
        }
    }
}
