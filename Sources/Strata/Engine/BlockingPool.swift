#if canImport(Glibc)
import Glibc
#endif

/// A fixed set of dedicated threads for blocking C work (decoding, file I/O), so that it never
/// occupies Swift's cooperative pool. Use it for work that blocks a thread or runs long in C;
/// plain Swift computation belongs on the cooperative pool.
///
/// Each thread owns one `Context` made by the factory on that thread (for example a decoder
/// with its reusable buffers); a job receives the context of the thread it runs on, so
/// per-thread state needs no lock. Jobs start in submission order, at most ``width`` at once.
///
/// Modelled on swift-nio's `NIOThreadPool`:
/// - a job is let go of the moment a thread takes it and has run it (whatever it captured — an
///   original of hundreds of MiB, a pinned table slot — is released then, not later);
/// - ``run(_:)`` suspends the calling task until its job has finished; cancelling that task
///   while the job is still queued removes the job (it never runs) and `run` throws
///   ``BlockingPoolError/cancelled``; a job that has started is never interrupted;
/// - after ``shutdown()`` new work is refused with ``BlockingPoolError/shutDown`` (no trap);
///   the jobs queued before it still run.
///
/// The threads keep the pool alive until ``shutdown()`` (see `BlockingPoolOwner`).
/// Cost: one ``Lock`` hand-off per job and a futex wake when a thread sleeps, plus one small allocation for
/// `run`'s cancellation ticket; cancelling a queued job is O(1).
public final class BlockingPool<Context>: @unchecked Sendable {
    /// What a queued job is handed: the context of the thread running it, or word that it
    /// will never run (its `run` call was cancelled while it was queued).
    enum Turn {
        case run(Context)
        case cancelled
    }
    typealias Job = @Sendable (Turn) -> Void

    private struct State {
        /// Queued jobs in submission order; a job cancelled while queued leaves a `nil` that
        /// the workers skip.
        var queue = RingBuffer<Job?>()
        /// Sequence number of the job at the front of `queue` (each queued job's number stays
        /// the same, so a cancellation finds its slot without a search).
        var frontSequence: UInt64 = 0
        var stopping = false
        var threadsLeft = 0
        /// The workers' thread ids, so `shutdown` called from a worker does not wait for itself.
        var workerThreads: [pthread_t] = []

        /// Queues `job`; returns its sequence number.
        mutating func enqueue(_ job: @escaping Job) -> UInt64 {
            let sequence = frontSequence &+ UInt64(queue.count)
            queue.append(job)
            return sequence
        }
    }

    /// The queue and the workers' bookkeeping; workers sleep on it until work arrives.
    private let state = Lock(State())
    /// Number of threads.
    public let width: Int

    /// Starts `width` threads named `name`, each calling `makeContext` once on itself.
    /// Throws when the system refuses a thread (the threads already started are stopped).
    public init(width: Int, name: String, makeContext: @escaping @Sendable () -> Context) throws(SystemCallError) {
        precondition(width > 0, "a pool needs at least one thread")
        self.width = width
        for index in 0..<width {
            do {
                _ = try OSThread(name: "\(name)-\(index)") { [self] in
                    state.withLock { $0.workerThreads.append(pthread_self()) }
                    self.work(makeContext())
                }
                state.withLock { $0.threadsLeft += 1 }
            } catch {
                shutdown()
                throw error
            }
        }
    }

    /// Runs `body` on one of the pool's threads with that thread's context and returns its
    /// result.
    ///
    /// Throws ``BlockingPoolError/failed(_:)`` with the error `body` threw;
    /// ``BlockingPoolError/cancelled`` when the calling task is cancelled before a thread has
    /// taken the job (the job never runs, and is released at once); ``BlockingPoolError/shutDown``
    /// when the pool was shut down before the call. A job that has started runs to the end
    /// even if the task is cancelled meanwhile, and its result is returned.
    public func run<T: Sendable, E: Error>(
        _ body: @escaping @Sendable (Context) throws(E) -> T
    ) async throws(BlockingPoolError<E>) -> T {
        let ticket = Ticket()
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, BlockingPoolError<E>>, Never>) in
                let job: Job = { turn in
                    switch turn {
                    case .run(let context):
                        do throws(E) {
                            continuation.resume(returning: .success(try body(context)))
                        } catch {
                            continuation.resume(returning: .failure(.failed(error)))
                        }
                    case .cancelled:
                        continuation.resume(returning: .failure(.cancelled))
                    }
                }
                let refusal: BlockingPoolError<E>? = state.withLock { s in
                    if s.stopping { return .shutDown }
                    // The cancellation handler ran before the job could be queued.
                    if case .cancelled = ticket.state { return .cancelled }
                    ticket.state = .queued(sequence: s.enqueue(job))
                    return nil
                }
                if let refusal {
                    continuation.resume(returning: .failure(refusal))
                } else {
                    state.signal()
                }
            }
        } onCancel: {
            cancel(ticket)
        }
        return try result.get()
    }

    /// Queues `job` without waiting for it; it runs even if the pool is shut down after this
    /// call. Throws ``BlockingPoolError/shutDown`` (and drops `job`) after ``shutdown()``.
    public func submit(_ job: @escaping @Sendable (Context) -> Void) throws(BlockingPoolError<Never>) {
        let accepted = state.withLock { s in
            if s.stopping { return false }
            _ = s.enqueue { turn in
                if case .run(let context) = turn { job(context) }
            }
            return true
        }
        if !accepted { throw BlockingPoolError<Never>.shutDown }
        state.signal()
    }

    /// Refuses new work, lets the queued jobs finish, then stops the threads (waiting for
    /// them, unless called from one of them). Further `run` and `submit` calls throw
    /// ``BlockingPoolError/shutDown``. Calling it again does nothing more.
    public func shutdown() {
        let me = pthread_self()
        let fromWorker = state.withLock { s in
            s.stopping = true
            return s.workerThreads.contains { pthread_equal($0, me) != 0 }
        }
        state.broadcast()
        // From one of the pool's own threads (say, the last reference to an owner dropped
        // inside a job), waiting would wait for ourselves: the workers stop on their own.
        if fromWorker { return }
        state.withLock(waitingUntil: { $0.threadsLeft == 0 }) { _ in }
    }

    /// Jobs queued and not yet taken by a thread, cancelled ones included until a thread
    /// skips them (for tests).
    var queuedJobCount: Int { state.withLock { $0.queue.count } }

    /// The cancellation handler of a `run` call: takes its job out of the queue if no thread
    /// has taken it yet, and tells it so (outside the lock).
    private func cancel(_ ticket: Ticket) {
        let job: Job? = state.withLock { s in
            defer { ticket.state = .cancelled }
            guard case .queued(let sequence) = ticket.state else { return nil }
            let offset = sequence &- s.frontSequence
            guard offset < UInt64(s.queue.count) else { return nil }  // already taken by a thread
            let job = s.queue[Int(offset)]
            s.queue[Int(offset)] = nil
            return job
        }
        job?(.cancelled)
    }

    private func work(_ context: Context) {
        while true {
            let job: Job? = state.withLock(waitingUntil: { !$0.queue.isEmpty || $0.stopping }) { s in
                while let slot = s.queue.popFirst() {
                    s.frontSequence &+= 1
                    if let job = slot { return job }
                    // A job cancelled while queued: skip it.
                }
                return nil
            }
            guard let job else {
                // Only cancelled jobs were left: wait again, unless the pool is stopping.
                let exiting = state.withLock { s in
                    guard s.stopping, s.queue.isEmpty else { return false }
                    s.threadsLeft -= 1
                    return true
                }
                if exiting {
                    state.broadcast()
                    return
                }
                continue
            }
            // The queue no longer refers to the job: it (and all it captured) is released at
            // the end of this iteration, before the next job is taken.
            job(.run(context))
        }
    }

    /// Where one `run` call's job is; guarded by the pool's lock.
    private final class Ticket: @unchecked Sendable {
        enum State {
            case notQueued
            case queued(sequence: UInt64)
            case cancelled
        }
        var state = State.notQueued
    }
}

/// Why ``BlockingPool`` work did not produce a result.
///
/// `Failure` is the error type of the job's body (`Never` for ``BlockingPool/submit(_:)``).
public enum BlockingPoolError<Failure: Error>: Error, CustomStringConvertible {
    /// The pool had been shut down: the job was not queued and never ran.
    case shutDown
    /// The calling task was cancelled while the job was still queued: the job never ran.
    case cancelled
    /// The job ran and threw this error.
    case failed(Failure)

    public var description: String {
        switch self {
        case .shutDown: return "the blocking pool is shut down"
        case .cancelled: return "cancelled before the blocking pool ran the job"
        case .failed(let error): return String(describing: error)
        }
    }
}

extension BlockingPoolError: Equatable where Failure: Equatable {}

/// Shuts a private ``BlockingPool`` down when the last reference to it goes away — for types
/// that make their own pool when the caller gives none (`DirectorySource`, `ImageTableCache`);
/// the pool's threads would otherwise keep it alive forever.
package final class BlockingPoolOwner<Context>: Sendable {
    let pool: BlockingPool<Context>
    package init(_ pool: BlockingPool<Context>) { self.pool = pool }
    deinit { pool.shutdown() }
}
