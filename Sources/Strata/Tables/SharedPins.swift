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
/// Segments are leased with an OFD `fcntl` write lock on one byte of the lock file, which the
/// kernel drops when the process dies; a writer that finds a segment unleased clears it, so a
/// crashed process cannot pin slots for ever. Setting or clearing a bit is a plain store into
/// the shared mapping (no syscall), done only when the instance's own pin count of a slot goes
/// 0 → 1 or 1 → 0. Readers never take a lock.
///
/// Ordering (Dekker): a reader stores its bit, fences, then re-reads the entry's trailer; a
/// writer invalidates the trailer, fences, then reads every segment's bit. At least one of
/// them sees the other, so a reader never keeps an image of a slot being rewritten.
final class SharedPins: @unchecked Sendable {
    // All mutation of our own segment happens under the owning ImageTable's state mutex; other
    // segments are only read (or cleared when their lease is free), through raw shared memory.
    static let segments = 32
    static let leaseBase = 16   // byte offset of segment k's lease lock in the lock file

    let file: TableFileHandle
    let mapping: TableMapping
    let segmentBytes: Int
    let own: Int
    let lockFile: TableFileHandle

    /// Opens (creating or growing) the pins file and leases a free segment. Call with the
    /// writer `flock` held.
    init(path: String, format: String, slots: Int, permissions: UInt32, lockFile: TableFileHandle) throws(ImageTableError) {
        segmentBytes = ((slots + 7) / 8 + 63) / 64 * 64
        let length = segmentBytes * Self.segments
        do {
            file = try .open(path, flags: O_RDWR | O_CREAT, permissions: permissions)
            _ = fchmod(file.fd, mode_t(permissions))
            if try file.size() < length { try file.reserve(offset: 0, length: length) }
            mapping = try TableMapping(fd: file.fd, offset: 0, length: length, path: path)
        } catch { throw .system(error) }
        self.lockFile = lockFile
        var leased = -1
        for k in 0..<Self.segments where Self.lease(lockFile.fd, k, F_WRLCK) {
            leased = k
            break
        }
        guard leased >= 0 else { throw .tooManyInstances(format: format, limit: Self.segments) }
        own = leased
        clear(segment: own)
    }

    // F_OFD_SETLK is not exported by Swift's Glibc module.
    private static let ofdSetLock: Int32 = 37

    /// Tries to take (`F_WRLCK`) or drop (`F_UNLCK`) the lease of segment `k`; never blocks.
    @discardableResult
    static func lease(_ fd: Int32, _ k: Int, _ type: Int32) -> Bool {
        var lock = flock()
        lock.l_type = Int16(type)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(leaseBase + k)
        lock.l_len = 1
        lock.l_pid = 0
        while true {
            let rc = fcntl(fd, ofdSetLock, &lock)
            if rc == 0 { return true }
            if errno == EINTR { continue }
            return false
        }
    }

    private func clear(segment k: Int) {
        (mapping.base + k * segmentBytes).initializeMemory(as: UInt8.self, repeating: 0, count: segmentBytes)
    }

    /// Clears the bitmaps of segments whose owner has gone (lease free). Writers call this
    /// before declaring a table full.
    func sweepDeadSegments() {
        for k in 0..<Self.segments where k != own {
            if Self.lease(lockFile.fd, k, F_WRLCK) {
                clear(segment: k)
                Self.lease(lockFile.fd, k, F_UNLCK)
            }
        }
    }

    /// Clears every bit of our own segment (after a reset: old slots are in an unlinked file).
    func clearOwn() { clear(segment: own) }

    @inline(__always)
    func set(_ slot: Int, _ on: Bool) {
        let byte = mapping.base + own * segmentBytes + slot >> 3
        let bit = UInt8(1) << UInt8(slot & 7)
        let old = byte.load(as: UInt8.self)
        byte.storeBytes(of: on ? old | bit : old & ~bit, as: UInt8.self)
        if on { atomicMemoryFence(ordering: .sequentiallyConsistent) }
    }

    /// Whether another instance (any process) has a live image of `slot`. The caller has
    /// invalidated the slot's trailer and fenced before asking.
    func isPinnedElsewhere(_ slot: Int, fence: Bool = true) -> Bool {
        if fence { atomicMemoryFence(ordering: .sequentiallyConsistent) }
        let offset = slot >> 3
        let bit = UInt8(1) << UInt8(slot & 7)
        for k in 0..<Self.segments where k != own {
            if (mapping.base + k * segmentBytes + offset).load(as: UInt8.self) & bit != 0 { return true }
        }
        return false
    }

    var diskUsage: Int { (try? Int(file.stat().st_blocks) * 512) ?? 0 }
}
