import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// Cross-process slot pins: the file `<name>.pins` holds one bitmap of slots per attached table
/// instance ("segment"); an instance sets its bit while it has a live image of the slot, and a
/// writer never reuses a slot whose bit is set in any other segment.
///
/// Segments are leased with an open-file-description lock on one byte of the lock file
/// (``FileDescriptor/tryByteLock(at:exclusive:)``), which the kernel drops when the process
/// dies; a writer that finds a segment unleased clears it, so a crashed process cannot pin
/// slots for ever. Setting or clearing a bit is a plain store into the shared mapping (no
/// syscall), done only when the instance's own pin count of a slot goes 0 → 1 or 1 → 0.
/// Readers never take a lock.
///
/// Ordering (Dekker): a reader stores its bit, fences, then re-reads the entry's trailer; a
/// writer invalidates the trailer, fences, then reads every segment's bit. At least one of
/// them sees the other, so a reader never keeps an image of a slot being rewritten.
package final class SharedPins: Sendable {
    // All mutation of our own segment happens under the owning ImageTable's state lock; other
    // segments are only read (or cleared when their lease is free), through shared memory.
    package static let segments = 32
    package static let leaseBase = 16  // byte offset of segment k's lease lock in the lock file

    package let file: Shared<FileDescriptor>
    package let mapping: Shared<MappedRegion>
    package let segmentBytes: Int
    package let own: Int
    /// The lock file whose bytes hold the leases (the one open when the table was opened).
    package let lockFile: Shared<FileDescriptor>

    /// Opens (creating or growing) the pins file and leases a free segment. Call with the
    /// writer `flock` held.
    package init(path: String, format: String, slots: Int, permissions: UInt32, lockFile: Shared<FileDescriptor>) throws(ImageTableError) {
        segmentBytes = ((slots + 7) / 8 + 63) / 64 * 64
        let length = segmentBytes * Self.segments
        do throws(SystemCallError) {
            let file = try FileDescriptor(open: path, flags: O_RDWR | O_CREAT, mode: mode_t(permissions))
            try file.setPermissions(mode_t(permissions))
            if try file.size() < length { try file.allocate(offset: 0, length: length) }
            mapping = Shared(try MappedRegion(file: file, length: length, writable: true))
            self.file = Shared(file)
        } catch { throw .system(error) }
        self.lockFile = lockFile
        var leased = -1
        for k in 0..<Self.segments where (try? lockFile.resource.tryByteLock(at: Self.leaseBase + k, exclusive: true)) == true {
            leased = k
            break
        }
        guard leased >= 0 else { throw .tooManyInstances(format: format, limit: Self.segments) }
        own = leased
        clear(segment: own)
    }

    private func segment(_ k: Int) -> UnsafeMutableRawPointer { mapping.resource.base + k * segmentBytes }

    private func clear(segment k: Int) {
        segment(k).initializeMemory(as: UInt8.self, repeating: 0, count: segmentBytes)
    }

    /// Clears the bitmaps of segments whose owner has gone (lease free). Writers call this
    /// before declaring a table full (outside the state lock: it only touches other segments).
    package func sweepDeadSegments() {
        for k in 0..<Self.segments where k != own {
            if (try? lockFile.resource.tryByteLock(at: Self.leaseBase + k, exclusive: true)) == true {
                clear(segment: k)
                _ = try? lockFile.resource.tryByteLock(at: Self.leaseBase + k, exclusive: false)
            }
        }
    }

    /// Clears every bit of our own segment (after a reset: old slots are in an unlinked file).
    package func clearOwn() { clear(segment: own) }

    @inline(__always)
    package func set(_ slot: Int, _ on: Bool) {
        let byte = segment(own) + slot >> 3
        let bit = UInt8(1) << UInt8(slot & 7)
        let old = byte.load(as: UInt8.self)
        byte.storeBytes(of: on ? old | bit : old & ~bit, as: UInt8.self)
        if on { atomicMemoryFence(ordering: .sequentiallyConsistent) }
    }

    /// Whether another instance (any process) has a live image of `slot`. The caller has
    /// invalidated the slot's trailer and fenced before asking.
    package func isPinnedElsewhere(_ slot: Int, fence: Bool = true) -> Bool {
        if fence { atomicMemoryFence(ordering: .sequentiallyConsistent) }
        let offset = slot >> 3
        let bit = UInt8(1) << UInt8(slot & 7)
        for k in 0..<Self.segments where k != own {
            if (segment(k) + offset).load(as: UInt8.self) & bit != 0 { return true }
        }
        return false
    }

    package var diskUsage: Int { (try? Int(file.resource.status().st_blocks) * 512) ?? 0 }
}
