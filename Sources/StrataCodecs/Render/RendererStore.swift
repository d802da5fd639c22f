import StrataBase
/// Renderers for jobs on a shared pool: a job takes one from a free list, renders, and gives it
/// back, so a pool needs no per-thread context and every renderer's decode buffer is reused.
///
/// At most `limit` idle renderers are kept (the pool's width is enough: a renderer is only
/// out while its job runs). Cost: one short lock hold to take and one to give back. The
/// renderers are not thread-safe; each is used by one job at a time.
package final class RendererStore: Sendable {
    private let free: Lock<[ImageRenderer]>
    private let make: @Sendable () -> ImageRenderer
    private let limit: Int

    package init(limit: Int, make: @escaping @Sendable () -> ImageRenderer) {
        self.free = Lock([])
        self.make = make
        self.limit = Swift.max(1, limit)
    }

    /// Runs `body` with a renderer no other job holds meanwhile, its parallel parts as jobs of
    /// `pool` in `lane` (the lane of the job calling this), else on ``ForkJoin/dispatch``.
    package func withRenderer<T, E: Error>(
        pool: BlockingPool<Void>? = nil, lane: Lane = .urgent, _ body: (ImageRenderer) throws(E) -> T
    ) throws(E) -> T {
        let renderer = free.withLock { $0.popLast() } ?? make()
        renderer.forkJoin = pool.map { .pool($0, lane: lane) } ?? .dispatch
        defer {
            free.withLock { idle in
                if idle.count < limit { idle.append(renderer) }
            }
        }
        return try body(renderer)
    }
}
