import Synchronization

/// The test seam of the syscall layer: makes chosen calls fail with a chosen `errno` before they
/// reach the kernel, so that ENOSPC, EIO or EMFILE in the middle of a publish can be tested
/// without a full disk (swift-system's mocking is the model).
///
/// A rule names the call (as ``Syscall`` names it: `"pwrite"`, `"renameat"`, …), a part of the
/// path it must be about (tests use their own temporary directory, so suites running in
/// parallel do not see each other's faults), the errno, and how many calls to fail. While no
/// rule is installed, the check in ``Syscall`` is one relaxed atomic load.
@usableFromInline
package enum SyscallFaults {
    /// One injected failure.
    package struct Rule: Sendable {
        package var call: String
        package var pathContains: String
        package var errno: Int32
        /// How many matching calls fail; `nil` for every one until the rule is removed.
        package var times: Int?
        /// Matching calls to let through before the first failure.
        package var after: Int

        package init(call: String, pathContains: String, errno: Int32, times: Int? = 1, after: Int = 0) {
            self.call = call
            self.pathContains = pathContains
            self.errno = errno
            self.times = times
            self.after = after
        }
    }

    private struct Installed {
        var rule: Rule
        var failed = 0
        var passed = 0
    }

    @usableFromInline package static let armed = Atomic<Int>(0)
    private static let rules = Lock<[Int: Installed]>([:])
    private static let nextToken = Atomic<Int>(1)

    /// Installs `rule` while `body` runs; returns `body`'s result and how many calls it failed.
    package static func injecting<R, E: Error>(
        _ rule: Rule, _ body: () throws(E) -> R
    ) throws(E) -> (result: R, failures: Int) {
        let token = install(rule)
        defer { _ = remove(token) }
        let result = try body()
        return (result, failures(token))
    }

    /// The async twin of ``injecting(_:_:)``.
    package static func injecting<R>(
        _ rule: Rule, _ body: () async throws -> R
    ) async rethrows -> (result: R, failures: Int) {
        let token = install(rule)
        defer { _ = remove(token) }
        let result = try await body()
        return (result, failures(token))
    }

    /// Installs `rule` until ``remove(_:)``; returns its token.
    package static func install(_ rule: Rule) -> Int {
        let token = nextToken.wrappingAdd(1, ordering: .relaxed).oldValue
        rules.withLock { $0[token] = Installed(rule: rule) }
        armed.add(1, ordering: .releasing)
        return token
    }

    /// Removes a rule; returns how many calls it failed.
    @discardableResult
    package static func remove(_ token: Int) -> Int {
        let removed = rules.withLock { $0.removeValue(forKey: token) }
        if removed != nil { armed.subtract(1, ordering: .releasing) }
        return removed?.failed ?? 0
    }

    /// How many calls the rule `token` has failed so far.
    package static func failures(_ token: Int) -> Int {
        rules.withLock { $0[token]?.failed ?? 0 }
    }

    /// The errno to fail `call` on `path` with, if a rule says so (and counts it).
    @usableFromInline
    package static func injectedErrno(_ call: String, path: String?) -> Int32? {
        rules.withLock { rules in
            for (token, installed) in rules where installed.rule.call == call {
                let rule = installed.rule
                guard rule.pathContains.isEmpty || (path?.contains(rule.pathContains) ?? false) else { continue }
                if installed.passed < rule.after {
                    rules[token]!.passed += 1
                    continue
                }
                if let times = rule.times, installed.failed >= times { continue }
                rules[token]!.failed += 1
                return rule.errno
            }
            return nil
        }
    }
}
