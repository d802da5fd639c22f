import CStrataLinux

/// The project's one lock: protects a value of type `State`, with optional sleeping waits for a
/// condition on it. Every structure Strata shares between threads keeps its state behind one.
///
/// A futex mutex with a short adaptive spin (the word and its slow path live in the
/// `CStrataLinux` shim): an uncontended `withLock` is one compare-and-swap to take and one
/// exchange to release, no syscall; a contended one spins about a hundred pauses while the holder
/// is likely still running, then sleeps in the kernel and is woken by the release. Chosen by
/// measurement (`strata-bench locks`, README): `Synchronization.Mutex` on Linux in this toolchain
/// is a priority-inheritance futex that collapses beyond about four contending threads.
///
/// `State` lives in the same 64-byte-aligned allocation as the lock word (one cache miss reaches
/// both; no false sharing with a neighbour's lock). ThreadSanitizer is told about every acquire
/// and release (`ThreadSanitizerHooks`), so `swift test --sanitize=thread` sees the ordering.
///
/// Waiting: ``withLock(waitingUntil:_:)`` sleeps, with the lock released, until a predicate on the
/// state holds; whoever changes the state so that it may hold calls ``signal()`` or
/// ``broadcast()`` after the change. Cost of a signal with no waiter: one atomic load.
public final class Lock<State: ~Copyable>: @unchecked Sendable {
    /// [lock word][condition sequence][waiter count] … padding … [State] at `stateOffset`.
    @usableFromInline package let base: UnsafeMutableRawPointer
    /// `ThreadSanitizerHooks`, read once: a global's lazy-initialisation check on every
    /// acquire would cost as much as the uncontended lock itself.
    @usableFromInline package let tsanAcquire: ThreadSanitizerHooks.Hook?
    @usableFromInline package let tsanRelease: ThreadSanitizerHooks.Hook?

    @usableFromInline package static var stateOffset: Int {
        max(64, (12 + MemoryLayout<State>.alignment - 1) / MemoryLayout<State>.alignment * MemoryLayout<State>.alignment)
    }

    /// A lock around `initial`.
    public init(_ initial: consuming State) {
        // At least one byte of state: a zero-sized state (`Lock<Void>`) would otherwise sit one
        // past the end of the block, on the next allocation's first byte — which ThreadSanitizer
        // then sees accessed under this lock and, atomically, under that block's own.
        base = .allocate(
            byteCount: Self.stateOffset + max(MemoryLayout<State>.size, 1), alignment: max(64, MemoryLayout<State>.alignment))
        base.initializeMemory(as: UInt32.self, repeating: 0, count: 3)
        (base + Self.stateOffset).bindMemory(to: State.self, capacity: 1).initialize(to: initial)
        tsanAcquire = ThreadSanitizerHooks.acquire
        tsanRelease = ThreadSanitizerHooks.release
    }

    deinit {
        state.deinitialize(count: 1)
        base.deallocate()
    }

    @inlinable package var word: UnsafeMutablePointer<UInt32> { base.assumingMemoryBound(to: UInt32.self) }
    @inlinable package var sequence: UnsafeMutablePointer<UInt32> { word + 1 }
    @inlinable package var waiters: UnsafeMutablePointer<UInt32> { word + 2 }
    @inlinable package var state: UnsafeMutablePointer<State> { (base + Self.stateOffset).assumingMemoryBound(to: State.self) }

    @inlinable package func lock() {
        strata_lock_lock(word)
        tsanAcquire?(base)
    }

    @inlinable package func unlock() {
        tsanRelease?(base)
        strata_lock_unlock(word)
    }

    /// Runs `body` with exclusive access to the state. Keep it short and free of blocking calls:
    /// every other thread that needs the state waits for it.
    @inlinable
    public func withLock<R, E: Error>(_ body: (inout State) throws(E) -> R) throws(E) -> R {
        lock()
        defer { unlock() }
        return try body(&state.pointee)
    }

    /// Runs `body` if the lock is free right now; returns `nil` without waiting otherwise.
    @inlinable
    public func withLockIfAvailable<R, E: Error>(_ body: (inout State) throws(E) -> R) throws(E) -> R? {
        guard strata_lock_trylock(word) != 0 else { return nil }
        tsanAcquire?(base)
        defer { unlock() }
        return try body(&state.pointee)
    }

    /// Sleeps (lock released, no spinning) until `predicate` holds, then runs `body` with the
    /// lock held. The predicate is checked with the lock held, first at once and again after
    /// every ``signal()``/``broadcast()`` that wakes this thread. For dedicated threads (a pool's
    /// workers, a shutdown that waits for them), never on Swift's cooperative pool.
    public func withLock<R, E: Error>(
        waitingUntil predicate: (inout State) -> Bool, _ body: (inout State) throws(E) -> R
    ) throws(E) -> R {
        lock()
        defer { unlock() }
        while !predicate(&state.pointee) {
            _ = strata_atomic_add_u32(waiters, 1)
            let seen = strata_atomic_load_u32(sequence)
            unlock()
            _ = strata_futex_wait(sequence, seen)  // EAGAIN (already signalled) and EINTR: re-check
            lock()
            _ = strata_atomic_sub_u32(waiters, 1)
        }
        return try body(&state.pointee)
    }

    /// Wakes one thread sleeping in ``withLock(waitingUntil:_:)``. Call after changing the state
    /// (inside or after the `withLock` that changed it).
    public func signal() { wake(1) }

    /// Wakes every thread sleeping in ``withLock(waitingUntil:_:)``.
    public func broadcast() { wake(Int32.max) }

    private func wake(_ count: Int32) {
        guard strata_atomic_load_u32(waiters) > 0 else { return }
        _ = strata_atomic_add_u32(sequence, 1)
        _ = strata_futex_wake(sequence, count)
    }
}
