#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Allocation of the caches' large arrays (index, nodes, sketch). Below 2 MiB: `malloc`
/// memory aligned to 64 bytes. From 2 MiB up: a fresh anonymous mapping aligned to 2 MiB and
/// advised as transparent huge pages (`MADV_HUGEPAGE`) before it is touched — fresh, because
/// heap memory that was already faulted in stays on 4 KiB pages. A hit or a miss touches a
/// random line of each array; with 4 KiB pages, at 100 000 entries and more, most of those
/// touches also missed the TLB (this machine runs in a VM, where a page walk is costly). Where
/// huge pages are off the advice is ignored and nothing else changes.
@usableFromInline
package enum CacheMemory {
    @usableFromInline package static var hugePage: Int { 2 << 20 }

    /// Bytes reserved for `count` values of `T`: the mapping size when it is mapped.
    @inlinable
    package static func mappedSize<T>(_ type: T.Type, count: Int) -> Int? {
        let bytes = Swift.max(1, count * MemoryLayout<T>.stride)
        return bytes >= hugePage ? (bytes + hugePage - 1) / hugePage * hugePage : nil
    }

    @usableFromInline
    package static func allocate<T>(_ type: T.Type, count: Int) -> UnsafeMutablePointer<T> {
        guard let size = mappedSize(type, count: count) else {
            var raw: UnsafeMutableRawPointer?
            let bytes = Swift.max(1, count * MemoryLayout<T>.stride)
            guard posix_memalign(&raw, Swift.max(64, MemoryLayout<T>.alignment), bytes) == 0, let raw else {
                fatalError("out of memory allocating \(bytes) bytes for a cache")
            }
            return raw.bindMemory(to: T.self, capacity: count)
        }
        // Map one huge page more than needed, then unmap the unaligned head and the tail.
        let mapped = mmap(nil, size + hugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let mapped, mapped != MAP_FAILED else {
            fatalError("out of memory mapping \(size) bytes for a cache (errno \(errno))")
        }
        let start = Int(bitPattern: mapped)
        let aligned = (start + hugePage - 1) / hugePage * hugePage
        if aligned > start { munmap(mapped, aligned - start) }
        let tail = start + size + hugePage - (aligned + size)
        if tail > 0 { munmap(UnsafeMutableRawPointer(bitPattern: aligned + size), tail) }
        let raw = UnsafeMutableRawPointer(bitPattern: aligned)!
        _ = madvise(raw, size, MADV_HUGEPAGE)
        return raw.bindMemory(to: T.self, capacity: count)
    }

    /// Zero-filled memory (fresh mappings already are).
    @usableFromInline
    package static func allocateZeroed<T: BitwiseCopyable>(_ type: T.Type, count: Int) -> UnsafeMutablePointer<T> {
        let p = allocate(type, count: count)
        if mappedSize(type, count: count) == nil {
            UnsafeMutableRawPointer(p).initializeMemory(as: UInt8.self, repeating: 0, count: count * MemoryLayout<T>.stride)
        }
        return p
    }

    /// Frees what ``allocate(_:count:)`` returned for the same `count`.
    @usableFromInline
    package static func deallocate<T>(_ pointer: UnsafeMutablePointer<T>, count: Int) {
        if let size = mappedSize(T.self, count: count) {
            munmap(pointer, size)
        } else {
            free(pointer)
        }
    }
}
