#if canImport(Glibc)
import Glibc
#endif

/// A fixed set of dedicated threads for blocking C work (decoding, file I/O), so that it never
/// occupies Swift's cooperative pool.
///
/// Each thread owns one `Context` made by the factory on that thread (for example a decoder
/// with its reusable buffers); a job receives the context of the thread it runs on, so
/// per-thread state needs no lock. The threads keep the pool alive until ``shutdown()``. Jobs run in submission order; `run` suspends the calling
/// task until its job has finished. Cost: one mutex hand-off and one condition signal per job.
public final class BlockingPool<Context>: @unchecked Sendable {
    private let lock = ConditionLock()
    private var jobs: [(Context) -> Void] = []
    private var head = 0
    private var stopping = false
    private var threadsLeft: Int
    /// The workers' thread ids, so `shutdown` called from a worker does not wait for itself.
    private var workerThreads: [pthread_t] = []
    /// Number of threads.
    public let width: Int

    /// Starts `width` threads named `name`, each calling `makeContext` once on itself.
    /// Throws when the system refuses a thread (the threads already started are stopped).
    public init(width: Int, name: String, makeContext: @escaping @Sendable () -> Context) throws(SystemCallError) {
        precondition(width > 0, "a pool needs at least one thread")
        self.width = width
        self.threadsLeft = 0
        for index in 0..<width {
            do {
                _ = try OSThread(name: "\(name)-\(index)") { [self] in
                    lock.withLock { workerThreads.append(pthread_self()) }
                    self.work(makeContext())
                }
                lock.withLock { threadsLeft += 1 }
            } catch {
                shutdown()
                throw error
            }
        }
    }

    /// Runs `body` on one of the pool's threads with that thread's context and returns its
    /// result. Cancellation of the calling task does not interrupt a job that has started.
    public func run<T: Sendable, E: Error>(_ body: @escaping @Sendable (Context) throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, E>, Never>) in
            submit { context in
                do throws(E) {
                    continuation.resume(returning: .success(try body(context)))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// Queues `job` without waiting for it.
    public func submit(_ job: @escaping @Sendable (Context) -> Void) {
        lock.withLock {
            precondition(!stopping, "BlockingPool used after shutdown")
            jobs.append(job)
            lock.signal()
        }
    }

    /// Lets queued jobs finish, then stops the threads (waiting for them, unless called from
    /// one of them). Further `run`/`submit` calls trap.
    public func shutdown() {
        lock.withLock {
            stopping = true
            lock.broadcast()
            // From one of the pool's own threads (say, the last reference to an owner dropped
            // inside a job), waiting would wait for ourselves: the workers stop on their own.
            let me = pthread_self()
            if workerThreads.contains(where: { pthread_equal($0, me) != 0 }) { return }
            while threadsLeft > 0 { lock.wait() }
        }
    }

    private func work(_ context: Context) {
        while true {
            let job: ((Context) -> Void)? = lock.withLock {
                while head == jobs.count && !stopping { lock.wait() }
                if head == jobs.count {
                    threadsLeft -= 1
                    lock.broadcast()
                    return nil
                }
                let next = jobs[head]
                head += 1
                if head > 1024 && head * 2 > jobs.count {
                    jobs.removeFirst(head)
                    head = 0
                }
                return next
            }
            guard let job else { return }
            job(context)
        }
    }
}

/// Shuts a private ``BlockingPool`` down when the last reference to it goes away — for types
/// that make their own pool when the caller gives none (`DirectorySource`, `ImageTableCache`);
/// the pool's threads would otherwise keep it alive forever.
package final class BlockingPoolOwner<Context>: Sendable {
    let pool: BlockingPool<Context>
    package init(_ pool: BlockingPool<Context>) { self.pool = pool }
    deinit { pool.shutdown() }
}

/// A pthread mutex with one condition variable. Used only where a thread must sleep until
/// work arrives (Swift's `Mutex` has no condition variable).
final class ConditionLock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    init() {
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        condition.deallocate()
    }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Must be called with the lock held.
    func wait() { pthread_cond_wait(condition, mutex) }
    func signal() { pthread_cond_signal(condition) }
    func broadcast() { pthread_cond_broadcast(condition) }
}
