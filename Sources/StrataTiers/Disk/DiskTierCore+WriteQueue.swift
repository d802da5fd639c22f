import Logging
import StrataBase

/// Write-behind: the bounded queue of stores, and the one drain at a time that publishes it in
/// order on the writer pool (the engine's, or the tier's private one-thread pool).
///
/// Whenever items are queued, someone is bound to drain them: a drain job submitted to the
/// pool's prefetch lane (at most one queued; one more in the urgent lane while the queue is
/// more than half full), or a thread draining now (that job, or a
/// ``flush()``/``close()`` that found no drain running and helps). The drainer stops when the
/// queue is empty, deciding so under the queue's lock, so a concurrent store either lands before
/// that decision (and is drained) or sees no drain and submits a new one. A drain job publishes
/// at most ``drainBatch`` stores, then queues its successor behind the work queued meanwhile, so
/// that urgent jobs need not wait for a long queue to be written.
extension DiskTier.Core {
    package struct Job: Sendable {
        package var image: PixelImage
        package var key: String
        package var mode: ContentMode
        package var isWholeOriginal: Bool
        package var sourceVersion: UInt64
        /// The file the job publishes (its key's digest is computed once, by the caller).
        package var name: DiskFileName

        package init(image: PixelImage, key: String, mode: ContentMode, isWholeOriginal: Bool, sourceVersion: UInt64) {
            self.image = image
            self.key = key
            self.mode = mode
            self.isWholeOriginal = isWholeOriginal
            self.sourceVersion = sourceVersion
            name = DiskFileName(
                digest: ImageEntityID(hashing: key), variant: VariantDescriptor(size: image.size, mode: mode, style: image.style),
                isWholeOriginal: isWholeOriginal)
        }
    }

    package enum QueueItem: Sendable {
        case job(Job)
        /// A ``flush()`` or ``close()`` marker: when the drain reaches it, `barriersPassed`
        /// becomes its number.
        case barrier(Int)
    }

    /// The write-behind queue. Flushes sleep on its lock until their barrier is passed or no
    /// drain runs; a synchronous store until the file it supersedes is no longer in flight (so
    /// every change to those is followed by a broadcast).
    package struct Queue {
        package var items: [QueueItem] = []
        package var head = 0
        package var jobs = 0
        package var bytes = 0
        package var closed = false
        package var barriersQueued = 0
        package var barriersPassed = 0
        /// The file the drain is publishing now, if any.
        package var inFlight: DiskFileName?
        /// A drain job is queued in the prefetch lane and has not started.
        package var drainSubmitted = false
        /// A drain job is queued in the urgent lane (the queue was more than half full) and has
        /// not started.
        package var urgentDrainSubmitted = false
        /// A thread is draining now (the only one allowed to take items).
        package var draining = false

        package var isEmpty: Bool { head == items.count }

        /// Marks a drain job as submitted when one is needed, and returns its lane: the prefetch
        /// lane when nobody is bound to drain; the urgent lane as well when the queue is more
        /// than half full and no drain runs — sustained urgent work would otherwise keep the
        /// prefetch job waiting until the queue fills and stores are dropped.
        package mutating func claimDrainJob(capacity: Int, byteLimit: Int) -> Lane? {
            guard !draining, !isEmpty else { return nil }
            if !urgentDrainSubmitted, jobs * 2 > capacity || bytes * 2 > byteLimit {
                urgentDrainSubmitted = true
                return .urgent
            }
            guard !drainSubmitted, !urgentDrainSubmitted else { return nil }
            drainSubmitted = true
            return .prefetch
        }

        /// The drain job of `lane` has started (or was refused): it is no longer queued.
        package mutating func drainJobLeftQueue(_ lane: Lane) {
            if lane == .urgent { urgentDrainSubmitted = false } else { drainSubmitted = false }
        }

        package mutating func popFirst() -> QueueItem {
            let item = items[head]
            head += 1
            if head > 64 && head * 2 > items.count {
                items.removeFirst(head)
                head = 0
            }
            if case .job(let job) = item { inFlight = job.name }
            return item
        }
    }

    /// Makes way for a synchronous store of `name`: queued write-behind stores of the same file
    /// are dropped (they are older, and would otherwise land over it after it returned), and a
    /// store of it that the drain is publishing now is waited for.
    package func supersedeQueued(_ name: DiskFileName) {
        queue.withLock(waitingUntil: { $0.inFlight != name }) { q in
            var kept: [QueueItem] = []
            var dropped = false
            for item in q.items[q.head...] {
                if case .job(let job) = item, job.name == name {
                    q.jobs -= 1
                    q.bytes -= job.image.byteCount
                    dropped = true
                } else {
                    kept.append(item)
                }
            }
            if dropped {
                q.items = kept
                q.head = 0
            }
        }
    }

    /// Queues `job` unless the queue is full or closed (then counts it dropped); submits a drain
    /// job when none is bound to run. O(1) under the lock, plus one pool hand-off per drain.
    package func enqueue(_ job: Job) -> Bool {
        let bytes = job.image.byteCount
        let (accepted, submit) = queue.withLock { q -> (Bool, Lane?) in
            guard !q.closed, q.jobs < configuration.writeQueueCapacity,
                q.bytes + bytes <= configuration.writeQueueByteLimit || q.jobs == 0
            else { return (false, nil) }
            q.items.append(.job(job))
            q.jobs += 1
            q.bytes += bytes
            return (true, claimDrainJob(&q))
        }
        if !accepted { droppedStores.add(1, ordering: .relaxed) }
        if let submit { submitDrain(lane: submit) }
        return accepted
    }

    /// ``Queue/claimDrainJob(capacity:byteLimit:)`` with this tier's limits.
    package func claimDrainJob(_ q: inout Queue) -> Lane? {
        q.claimDrainJob(capacity: configuration.writeQueueCapacity, byteLimit: configuration.writeQueueByteLimit)
    }

    /// Submits a drain job to the writer pool's `lane` (prefetch, or urgent when the queue is
    /// more than half full). A pool that is shut down refuses it: then the calling thread drains
    /// the queue itself (the stores still land, in order, at the cost of this caller's time).
    package func submitDrain(lane: Lane) {
        do {
            try writer.submit(lane: lane) { [self] _ in drainJob(lane) }
        } catch {
            let mine = queue.withLock { q -> Bool in
                q.drainJobLeftQueue(lane)
                guard !q.draining else { return false }  // the drainer takes the new items too
                q.draining = true
                return true
            }
            if mine { drain(until: nil) }
        }
    }

    /// Stores one drain job publishes before it queues its successor.
    package static var drainBatch: Int { 8 }

    /// The pool job: drains up to ``drainBatch`` stores, unless a helping flush drains now (it
    /// submits a new job if it leaves items behind).
    private func drainJob(_ lane: Lane) {
        let mine = queue.withLock { q -> Bool in
            q.drainJobLeftQueue(lane)
            guard !q.draining else { return false }
            q.draining = true
            return true
        }
        if mine { drain(until: nil, batch: Self.drainBatch) }
    }

    /// Publishes queued items in order; the caller has set `draining`. Stops when the queue is
    /// empty, after `batch` stores, or, for a helping flush, once barrier `ticket` has passed;
    /// then gives up `draining` and, if items remain that no drain job will take, submits one.
    package func drain(until ticket: Int?, batch: Int = .max) {
        var published = 0
        while true {
            let (item, resubmit) = queue.withLock { q -> (QueueItem?, Lane?) in
                if q.isEmpty || published >= batch || ticket.map({ q.barriersPassed >= $0 }) == true {
                    q.draining = false
                    return (nil, claimDrainJob(&q))
                }
                return (q.popFirst(), nil)
            }
            guard let item else {
                queue.broadcast()  // flushes waiting for a drainer to help
                if let resubmit { submitDrain(lane: resubmit) }
                return
            }
            switch item {
            case .job(let job):
                do {
                    try publish(
                        image: job.image, key: job.key, digest: job.name.digest, mode: job.mode,
                        isWholeOriginal: job.isWholeOriginal, sourceVersion: job.sourceVersion)
                } catch {
                    failedStores.add(1, ordering: .relaxed)
                    logger.warning("write-behind store failed", metadata: ["error": "\(error)"])
                }
                queue.withLock { q in
                    q.jobs -= 1
                    q.bytes -= job.image.byteCount
                    q.inFlight = nil
                }
                published += 1
            case .barrier(let number):
                queue.withLock { $0.barriersPassed = number }
            }
            queue.broadcast()
        }
    }

    /// Waits until every store queued before the call has been written (or failed). Helps when
    /// no drain runs (a drain job still waiting for the pool, or none): it drains on the calling
    /// thread up to its barrier, so a flush from one of the pool's own threads cannot wait for a
    /// job queued behind it. Returns at once on a closed tier (``close()`` drained it).
    package func flush() {
        let ticket: Int? = queue.withLock { q in
            guard !q.closed else { return nil }
            return q.appendBarrier()
        }
        if let ticket { awaitBarrier(ticket) }
    }

    /// Refuses later stores and waits until everything queued has been written, helping as
    /// ``flush()`` does. Called once, by ``close()``.
    package func closeQueue() {
        let ticket = queue.withLock { q in
            q.closed = true
            return q.appendBarrier()
        }
        awaitBarrier(ticket)
    }

    private func awaitBarrier(_ ticket: Int) {
        let help = queue.withLock(waitingUntil: { $0.barriersPassed >= ticket || !$0.draining }) { q -> Bool in
            guard q.barriersPassed < ticket else { return false }
            q.draining = true
            return true
        }
        if help { drain(until: ticket) }
    }
}

extension DiskTier.Core.Queue {
    /// Queues the next barrier; returns its number.
    fileprivate mutating func appendBarrier() -> Int {
        barriersQueued += 1
        items.append(.barrier(barriersQueued))
        return barriersQueued
    }
}
