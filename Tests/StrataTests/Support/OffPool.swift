@testable import Strata

/// Runs `body` on a thread of its own and waits for it without holding a thread of Swift's
/// cooperative pool (which has two on this machine): for tests that block for long (child
/// processes, kills, sleeps). `body` must not use `#expect`: it returns what the test checks.
func offThePool<T: Sendable>(_ name: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        do {
            // Detached when the handle goes away; the continuation is resumed by the thread.
            _ = try OSThread(name: name) { continuation.resume(with: Result { try body() }) }
        } catch {
            continuation.resume(throwing: error)
        }
    }
}
