#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// Where large pixel buffers come from: anonymous mappings in size classes, with a bounded cache
/// of free ones. A freed buffer's mapping is kept (its pages resident, so the next render of a
/// similar size does not fault them in again) while the cache holds less than ``cacheLimit``
/// bytes and for at most ``cacheAge``; beyond either it is unmapped and its memory is the
/// kernel's again. So the process's pixel memory is what is in use plus at most `cacheLimit`,
/// whatever the C library's allocator does with its arenas.
///
/// ``PixelStorage`` takes every buffer of ``threshold`` bytes or more from ``shared``; smaller
/// ones come from `malloc`. Use ``statistics`` to see the bytes in use and cached.
/// Cost: one lock hand-off per allocation and per release; a fresh mapping costs `mmap` and a
/// page fault per page touched, a cached one a lookup (and a `memset` when zeroed bytes are
/// asked for).
public final class PixelMemory: Sendable {
    /// The process's pixel memory (every ``PixelStorage`` uses it).
    public static let shared = PixelMemory()
    /// Buffers from this many bytes on are mapped; smaller ones are the C library's. Under the
    /// address sanitizer (`-DSTRATA_ADDRESS_SANITIZER`, Scripts/asan.sh and fuzz.sh) none is
    /// mapped, so that its redzones catch an overflow of any pixel buffer.
    #if STRATA_ADDRESS_SANITIZER
    public static let threshold = Int.max
    #else
    public static let threshold = 256 << 10
    #endif
    /// The cache's default bound.
    public static let defaultCacheLimit = 64 << 20

    /// What ``statistics`` reports.
    public struct Statistics: Sendable, Hashable {
        /// Bytes of mappings handed out and not yet released (size classes, so up to a quarter
        /// above what was asked).
        public var inUseBytes: Int
        /// Bytes of free mappings kept for reuse (resident).
        public var cachedBytes: Int
        /// The most bytes the cache keeps.
        public var cacheLimit: Int
        /// Mappings made, reused from the cache, and unmapped since the start.
        public var mapped, reused, unmapped: Int
    }

    private struct Entry {
        let base: UnsafeMutableRawPointer
        let released: Int64
    }

    private struct State {
        /// Free mappings per size class, most recently released last.
        var free: [Int: [Entry]] = [:]
        var cachedBytes = 0
        var cacheLimit: Int
        var cacheAge: Int64
        var lastDecay: Int64 = 0
        var inUseBytes = 0
        var mapped = 0, reused = 0, unmapped = 0
    }

    private let state: Lock<State>

    /// A separate pool of mappings (tests); the process's is ``shared``.
    public init(cacheLimit: Int = PixelMemory.defaultCacheLimit, cacheAge: Duration = .seconds(10)) {
        state = Lock(State(cacheLimit: max(0, cacheLimit), cacheAge: Self.nanoseconds(cacheAge)))
    }

    /// The most bytes of free mappings kept for reuse; lowering it unmaps the excess at once.
    public var cacheLimit: Int {
        get { state.withLock { $0.cacheLimit } }
        set {
            let excess = state.withLock { s -> [(UnsafeMutableRawPointer, Int)] in
                s.cacheLimit = max(0, newValue)
                return Self.evict(&s, keeping: s.cacheLimit, olderThan: nil)
            }
            Self.unmap(excess)
        }
    }

    /// How long a free mapping is kept unused before it is unmapped.
    public var cacheAge: Duration {
        get { .nanoseconds(state.withLock { $0.cacheAge }) }
        set { state.withLock { $0.cacheAge = Self.nanoseconds(newValue) } }
    }

    public var statistics: Statistics {
        state.withLock {
            Statistics(
                inUseBytes: $0.inUseBytes, cachedBytes: $0.cachedBytes, cacheLimit: $0.cacheLimit, mapped: $0.mapped,
                reused: $0.reused, unmapped: $0.unmapped)
        }
    }

    /// The size class of a `count`-byte buffer: whole pages, rounded up to a quarter step of its
    /// power of two (at most 25 % above `count`, and few classes to reuse between).
    package static func sizeClass(_ count: Int) -> Int {
        let page = MappedRegion.pageSize
        let pages = (max(count, 1) + page - 1) / page * page
        let power = 1 << (Int.bitWidth - 1 - pages.leadingZeroBitCount)
        let step = max(page, power / 4)
        return (pages + step - 1) / step * step
    }

    /// A mapping of at least `count` bytes (zero-filled when `zeroed`) and its length, to be
    /// given back with ``release(_:length:)``: the smallest cached one of its size class up to
    /// twice it (a larger buffer serves a smaller image, as a renderer's reused buffer always
    /// did), else a fresh one whose first `count` bytes are faulted in by one `madvise` rather
    /// than a trap per page. Traps when the kernel refuses memory, as a failed `malloc` does in
    /// Swift.
    package func allocate(_ count: Int, zeroed: Bool) -> (base: UnsafeMutableRawPointer, length: Int) {
        let length = Self.sizeClass(count)
        let cached: (UnsafeMutableRawPointer, Int)? = state.withLock { s in
            var best: Int?
            for size in s.free.keys where size >= length && size <= 2 * length && size < (best ?? .max) { best = size }
            guard let size = best, let entry = s.free[size]?.popLast() else {
                s.inUseBytes += length
                s.mapped += 1
                return nil
            }
            if s.free[size]?.isEmpty == true { s.free[size] = nil }
            s.cachedBytes -= size
            s.inUseBytes += size
            s.reused += 1
            return (entry.base, size)
        }
        if let (base, size) = cached {
            if zeroed { memset(base, 0, count) }
            return (base, size)
        }
        let address: Int
        do {
            address = try Syscall.retrying("mmap") {
                Int(bitPattern: mmap(nil, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
            }
        } catch {
            fatalError("\(error) mapping a pixel buffer of \(length) bytes: out of memory")
        }
        let base = UnsafeMutableRawPointer(bitPattern: address)!
        // MADV_POPULATE_WRITE (Linux 5.14): the pages the buffer will use, faulted in at once.
        // Advice only: an older kernel's EINVAL leaves them to fault one by one.
        let page = MappedRegion.pageSize
        _ = madvise(base, (count + page - 1) / page * page, Self.populateWrite)
        return (base, length)
    }

    /// `MADV_POPULATE_WRITE` (not in every C library's headers yet).
    private static let populateWrite: Int32 = 23

    /// Gives back a mapping from ``allocate(_:zeroed:)``: kept for reuse while the cache has room,
    /// unmapped otherwise. Mappings unused for ``cacheAge`` are unmapped too (looked at about once
    /// a second, on a release).
    package func release(_ base: UnsafeMutableRawPointer, length: Int) {
        let now = MonotonicClock.nanoseconds()
        let unmapNow = state.withLock { s -> [(UnsafeMutableRawPointer, Int)] in
            s.inUseBytes -= length
            var gone: [(UnsafeMutableRawPointer, Int)] = []
            if now - s.lastDecay >= 1_000_000_000 {
                s.lastDecay = now
                gone = Self.evict(&s, keeping: s.cacheLimit, olderThan: now - s.cacheAge)
            }
            if s.cachedBytes + length <= s.cacheLimit {
                s.free[length, default: []].append(Entry(base: base, released: now))
                s.cachedBytes += length
            } else {
                gone.append((base, length))
            }
            s.unmapped += gone.count
            return gone
        }
        Self.unmap(unmapNow)
    }

    /// Unmaps every cached mapping (the cache's limit stays).
    public func trim() {
        let all = state.withLock { s -> [(UnsafeMutableRawPointer, Int)] in
            let gone = Self.evict(&s, keeping: 0, olderThan: nil)
            s.unmapped += gone.count
            return gone
        }
        Self.unmap(all)
    }

    /// Takes out of the cache every mapping released before `cutoff`, then the oldest until it
    /// holds at most `keeping` bytes; returns them for unmapping outside the lock.
    private static func evict(_ s: inout State, keeping: Int, olderThan cutoff: Int64?) -> [(UnsafeMutableRawPointer, Int)] {
        var gone: [(UnsafeMutableRawPointer, Int)] = []
        if let cutoff {
            for (length, entries) in s.free where entries.first.map({ $0.released < cutoff }) == true {
                let keep = entries.filter { $0.released >= cutoff }
                for entry in entries where entry.released < cutoff { gone.append((entry.base, length)) }
                s.free[length] = keep.isEmpty ? nil : keep
                s.cachedBytes -= length * (entries.count - keep.count)
            }
        }
        while s.cachedBytes > keeping {
            // The oldest entry of all classes (each class's first is its oldest).
            guard let (length, _) = s.free.min(by: { $0.value[0].released < $1.value[0].released }) else { break }
            let entry = s.free[length]!.removeFirst()
            if s.free[length]!.isEmpty { s.free[length] = nil }
            s.cachedBytes -= length
            gone.append((entry.base, length))
        }
        return gone
    }

    private static func unmap(_ mappings: [(UnsafeMutableRawPointer, Int)]) {
        for (base, length) in mappings { _ = munmap(base, length) }
    }

    private static func nanoseconds(_ d: Duration) -> Int64 {
        d.components.seconds * 1_000_000_000 + d.components.attoseconds / 1_000_000_000
    }
}

/// Bytes of live ``PixelStorage`` by where they are: counted as storages are made and freed (one
/// relaxed atomic add each), so an operator can tell pixels held from memory the process keeps.
public enum PixelStorageCounters {
    static let heap = Atomic<Int>(0)
    static let fileMapping = Atomic<Int>(0)
    static let tableSlot = Atomic<Int>(0)

    /// Live bytes of each ``PixelStorage/Kind``.
    public static func liveBytes(_ kind: PixelStorage.Kind) -> Int {
        switch kind {
        case .heap: heap.load(ordering: .relaxed)
        case .fileMapping: fileMapping.load(ordering: .relaxed)
        case .tableSlot: tableSlot.load(ordering: .relaxed)
        }
    }

    static func add(_ delta: Int, _ kind: PixelStorage.Kind) {
        switch kind {
        case .heap: heap.add(delta, ordering: .relaxed)
        case .fileMapping: fileMapping.add(delta, ordering: .relaxed)
        case .tableSlot: tableSlot.add(delta, ordering: .relaxed)
        }
    }
}
