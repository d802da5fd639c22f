#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CStrataLinux
import Synchronization

/// A dedicated POSIX thread for blocking work (file I/O, `poll`, `read` on an inotify
/// descriptor) that must never run on Swift's cooperative pool.
///
/// Cost: one `pthread_create` (about 10–50 µs); meant for long-lived workers, not per task.
/// A thread that is never joined is detached when its `OSThread` goes away, so the system
/// reclaims its stack when the body returns (a joinable thread that nobody joins leaks it).
public final class OSThread: Sendable {
    private final class Box {
        let body: @Sendable () -> Void
        let name: String
        init(_ name: String, _ body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }

    private let handle: pthread_t
    /// Set by ``join()``; otherwise `deinit` detaches.
    private let joined = Atomic<Bool>(false)

    /// Starts `body` on a new thread named `name` (the kernel keeps the first 15 bytes).
    public init(name: String, _ body: @escaping @Sendable () -> Void) throws(SystemCallError) {
        let box = Unmanaged.passRetained(Box(name, body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                OSThread.setName(box.name)
                box.body()
                return nil
            }, box)
        if rc != 0 {
            Unmanaged<Box>.fromOpaque(box).release()
            throw SystemCallError(call: "pthread_create", errno: rc)
        }
        self.handle = thread
    }

    deinit {
        if !joined.load(ordering: .acquiring) { _ = pthread_detach(handle) }
    }

    /// Waits for the thread's body to return. Call at most once, never from the thread itself.
    public func join() {
        guard !joined.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _ = pthread_join(handle, nil)
    }

    /// Names the calling thread: the kernel keeps 15 bytes, cut here at a character boundary
    /// (a cut inside a multi-byte UTF-8 sequence would not be a valid name).
    package static func setName(_ name: String) {
        var bytes: [UInt8] = []
        for scalar in name.unicodeScalars {
            let encoded = Array(String(scalar).utf8)
            if bytes.count + encoded.count > 15 { break }
            bytes += encoded
        }
        bytes.append(0)
        bytes.withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                _ = strata_set_thread_name($0)
            }
        }
    }
}
