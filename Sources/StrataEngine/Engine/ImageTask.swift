import StrataBase
/// One request in flight, started by ``ImageCache/task(for:)`` or ``ImageCache/prefetch(_:)``:
/// its result, its cancellation, and its lane, which ``ImageCache/prioritize(_:)`` and
/// ``ImageCache/deprioritize(_:)`` change while it waits (SGImageCache: a cell that scrolled off
/// screen becomes a prefetch, a prefetched image the user now looks at becomes urgent). Moving a
/// request never duplicates its work: the shared work follows the highest lane of its waiters.
///
/// Cost: one unstructured `Task` and two small objects per request.
public final class ImageTask: Sendable {
    public let request: ImageRequest
    package let ticket = CoalescerTicket()
    private let lane: Lock<Lane>
    private let task: Task<Result<CachedImage, ImageCacheError>, Never>

    package init(_ request: ImageRequest, cache: ImageCache) {
        self.request = request
        self.lane = Lock(request.priority)
        let ticket = self.ticket
        task = Task {
            do throws(ImageCacheError) {
                return .success(try await cache.image(for: request, ticket: ticket))
            } catch {
                return .failure(error)
            }
        }
    }

    /// The image, once served; throws what ``ImageCache/image(for:)`` would.
    public var value: CachedImage {
        get async throws(ImageCacheError) { try await task.value.get() }
    }

    /// Stops waiting: the call throws ``ImageCacheError/cancelled(key:)``; the shared work stops
    /// when no other request waits for it.
    public func cancel() { task.cancel() }

    /// The lane the request waits in now.
    public var priority: Lane { lane.withLock { $0 } }

    package func setLane(_ new: Lane, in coalescer: (Lane, CoalescerTicket) -> Void) {
        let changed = lane.withLock { current -> Bool in
            defer { current = new }
            return current != new
        }
        if changed { coalescer(new, ticket) }
    }
}

extension ImageCache {
    /// Starts `request` now and returns its handle (for moving it between lanes or cancelling
    /// it); ``image(for:)`` is the same without a handle.
    public func task(for request: ImageRequest) -> ImageTask {
        ImageTask(request, cache: self)
    }

    /// Starts each request in the prefetch lane (run one at a time, paused while urgent work
    /// waits); the handles let the caller promote or cancel them.
    public func prefetch(_ requests: [ImageRequest]) -> [ImageTask] {
        requests.map { request in
            var request = request
            request.priority = .prefetch
            return ImageTask(request, cache: self)
        }
    }

    /// Moves `task` to the urgent lane (its shared work too, if it is waiting in the queue).
    public func prioritize(_ task: ImageTask) {
        task.setLane(.urgent) { lane, ticket in flights.setPriority(lane, for: ticket) }
    }

    /// Moves `task` to the prefetch lane (its shared work too, unless another urgent request
    /// waits for it).
    public func deprioritize(_ task: ImageTask) {
        task.setLane(.prefetch) { lane, ticket in flights.setPriority(lane, for: ticket) }
    }
}
