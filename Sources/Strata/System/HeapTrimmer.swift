import CStrataLinux
import Synchronization

/// Hands the process's freed heap pages back to the system every `interval` (glibc's
/// `malloc_trim(0)`, which advises away the free pages inside every arena, not only at their
/// tops).
///
/// Decoded images are large, short-lived heap blocks. Once glibc has freed one mapped block it
/// raises its mapping threshold, so the next ones come from its arenas, and the pages they
/// free stay resident until something reuses them: with an evicting cache the process's RSS
/// then drifts well above what its caches hold. A trim puts it back near what is live; the
/// cost is a walk of the arenas' free lists (each arena locked in turn) and the page faults
/// when the memory is used again.
///
/// Runs as one urgent job on a ``BlockingPool`` per interval (a task sleeps in between: no
/// thread of its own; not a prefetch job, which a busy pool would never start, and a busy pool
/// is when the heap fragments). Stops on ``stop()``, when released, or when the pool shuts down.
/// Where the C library has no `malloc_trim` (musl) it starts nothing.
public final class HeapTrimmer: Sendable {
    private final class State: Sendable {
        let stopped = Atomic<Bool>(false)
        let trims = Atomic<Int>(0)
    }

    private let state = State()
    private let task: Task<Void, Never>?

    /// Whether this C library can trim its heap.
    public static var isAvailable: Bool {
        #if canImport(Glibc)
        true
        #else
        false
        #endif
    }

    /// Returns the heap's free pages to the system now; true when any were released.
    @discardableResult
    public static func trimNow() -> Bool {
        strata_malloc_trim() != 0
    }

    /// Starts trimming every `interval` (at least 100 ms) on `pool`'s urgent lane.
    public init(interval: Duration, pool: BlockingPool<Void>) {
        guard Self.isAvailable else {
            task = nil
            return
        }
        let interval = max(interval, .milliseconds(100))
        let state = self.state
        task = Task.detached {
                while !state.stopped.load(ordering: .acquiring) {
                    do {
                        try await Task.sleep(for: interval)
                    } catch {
                        return  // cancelled by stop()
                    }
                    let ran: Void? = try? await pool.run(lane: .urgent) { _ in
                        if !state.stopped.load(ordering: .acquiring) {
                            Self.trimNow()
                            state.trims.add(1, ordering: .relaxed)
                        }
                    }
                    // The pool refused: shut down, or this task cancelled by stop().
                    guard ran != nil else { return }
                }
        }
    }

    /// How many trims have run.
    public var trimCount: Int { state.trims.load(ordering: .relaxed) }

    /// Stops trimming; a trim already running on the pool finishes.
    public func stop() {
        state.stopped.store(true, ordering: .releasing)
        task?.cancel()
    }

    deinit { stop() }
}
