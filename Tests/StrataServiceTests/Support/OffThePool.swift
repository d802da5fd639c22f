import Foundation

/// Runs `body` on a thread of its own and waits for it without holding a thread of Swift's
/// cooperative pool: the servers these tests start run in this process on that pool (two
/// threads on a 2-core machine), so a test that blocks there — a socket read, a browser, a
/// child process — could starve the very server it waits for. `body` reports failures by
/// throwing, not with `#expect`.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// A failed step of a test helper that runs off the pool.
struct TestStepFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
