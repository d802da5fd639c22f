#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Tells ThreadSanitizer about happens-before edges it cannot see: those of the project's
/// ``Lock`` and of a continuation resumed before its task suspended (``release(before:)``).
///
/// A futex lock (``Lock``, like `Synchronization.Mutex`) orders its critical sections through
/// atomics and kernel waits that ThreadSanitizer does not take for a lock, so under
/// `swift test --sanitize=thread` every access to the protected state is reported as a race
/// even though it is serialised (checked with a four-thread counter: the total is exact
/// and TSan still reports). The caches call ``acquire`` first and ``release`` last inside each
/// critical section, which is exactly the ordering the lock provides. The hooks are found once
/// with `dlsym`; in a normal build they are absent and each call is one predictable branch.
@usableFromInline
package enum ThreadSanitizerHooks {
    @usableFromInline package typealias Hook = @convention(c) (UnsafeMutableRawPointer?) -> Void

    @usableFromInline package static let acquire: Hook? = lookup("__tsan_acquire")
    @usableFromInline package static let release: Hook? = lookup("__tsan_release")

    /// Marks the end of this thread's part before a continuation is resumed: everything done
    /// so far happens before the waiter's ``acquire(after:)`` on the same `token`.
    ///
    /// Needed because Swift's runtime tells ThreadSanitizer of a resume only when the waiting
    /// task has already suspended (the resume enqueues it). A resume that comes first — the
    /// work finished before the awaiting task reached `swift_continuation_await` — is ordered
    /// by an atomic inside the uninstrumented runtime (`swift_continuation_awaitImpl`'s
    /// "already resumed" path), and TSan reported the result's fields as a race (seen once in
    /// CI: a disk hit served without waiting, read by the coalesced waiter).
    @inlinable
    package static func release(before token: AnyObject) {
        release?(Unmanaged.passUnretained(token).toOpaque())
    }

    /// The waiter's side of ``release(before:)``, right after its continuation returns.
    @inlinable
    package static func acquire(after token: AnyObject) {
        acquire?(Unmanaged.passUnretained(token).toOpaque())
    }

    package static func lookup(_ name: String) -> Hook? {
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, name) else { return nil }
        return unsafeBitCast(symbol, to: Hook.self)
    }
}
