#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Tells ThreadSanitizer about the happens-before edges of a `Synchronization.Mutex`.
///
/// The mutex is built on futexes and atomics inside the (uninstrumented) standard library, so
/// under `swift test --sanitize=thread` every access to the protected state is reported as a
/// race even though it is serialised (checked with a four-thread counter: the total is exact
/// and TSan still reports). The caches call ``acquire`` first and ``release`` last inside each
/// critical section, which is exactly the ordering the lock provides. The hooks are found once
/// with `dlsym`; in a normal build they are absent and each call is one predictable branch.
@usableFromInline
enum ThreadSanitizerHooks {
    @usableFromInline typealias Hook = @convention(c) (UnsafeMutableRawPointer?) -> Void

    @usableFromInline static let acquire: Hook? = lookup("__tsan_acquire")
    @usableFromInline static let release: Hook? = lookup("__tsan_release")

    static func lookup(_ name: String) -> Hook? {
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, name) else { return nil }
        return unsafeBitCast(symbol, to: Hook.self)
    }
}
