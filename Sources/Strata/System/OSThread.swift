#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// glibc's `pthread_setname_np` is declared only under `_GNU_SOURCE`, so Swift does not see it.
@_silgen_name("pthread_setname_np")
private func strataSetThreadName(_ thread: pthread_t, _ name: UnsafePointer<CChar>) -> Int32

/// A dedicated POSIX thread for blocking work (file I/O, `poll`, `read` on an inotify
/// descriptor) that must never run on Swift's cooperative pool.
///
/// Cost: one `pthread_create` (about 10–50 µs); meant for long-lived workers, not per task.
public final class OSThread: Sendable {
    private final class Box {
        let body: @Sendable () -> Void
        let name: String
        init(_ name: String, _ body: @escaping @Sendable () -> Void) { self.name = name; self.body = body }
    }

    private let handle: pthread_t

    /// Starts `body` on a new thread named `name` (the kernel keeps the first 15 bytes).
    public init(name: String, _ body: @escaping @Sendable () -> Void) throws(SystemCallError) {
        let box = Unmanaged.passRetained(Box(name, body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            _ = strataSetThreadName(pthread_self(), String(box.name.utf8.prefix(15))!)
            box.body()
            return nil
        }, box)
        if rc != 0 {
            Unmanaged<Box>.fromOpaque(box).release()
            throw SystemCallError(call: "pthread_create", errno: rc)
        }
        self.handle = thread
    }

    /// Waits for the thread's body to return. Call at most once, never from the thread itself.
    public func join() {
        _ = pthread_join(handle, nil)
    }
}
