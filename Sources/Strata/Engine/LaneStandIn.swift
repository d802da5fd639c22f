// Temporary until the lanes branch lands (it defines Lane beside BlockingPool).
public enum Lane: Sendable, Hashable, Comparable { case prefetch, urgent }
extension BlockingPool {
    func run<T: Sendable, E: Error>(lane: Lane, _ body: @escaping @Sendable (Context) throws(E) -> T) async throws(BlockingPoolError<E>) -> T {
        try await run(body)
    }
    var queueDepths: (urgent: Int, prefetch: Int) { (queuedJobCount, 0) }
}
