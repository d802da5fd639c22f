#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An inotify instance (`inotify_init1`): its watches and the events read from it. Owns its
/// descriptor, closed when the last reference goes away. Every call retries `EINTR`, names the
/// path in its error and can be failed by a `SyscallFaults` rule.
///
/// One inode has one watch per instance, whatever path reached it: adding a watch on
/// `dir/.` or on the parent of `/` returns the watch of `dir` or `/`, and without
/// ``addWatch(_:mask:merge:)``'s `merge` the new mask *replaces* the old one. Callers that
/// watch two paths which may be one inode merge, and compare the returned descriptors.
public final class Inotify: Sendable {
    /// The inotify descriptor (for `poll`).
    public let descriptor: FileDescriptor

    /// A new instance (close-on-exec; non-blocking unless `nonBlocking` is false).
    public init(nonBlocking: Bool = true) throws(SystemCallError) {
        let flags = Int32(IN_CLOEXEC) | (nonBlocking ? Int32(IN_NONBLOCK) : 0)
        let fd = try Syscall.retrying("inotify_init1") { inotify_init1(flags) }
        descriptor = FileDescriptor(adopting: fd, path: "inotify")
    }

    /// Watches `path` for the events in `mask`; returns the watch descriptor. With `merge`,
    /// `mask` is added to the mask of an existing watch on the same inode (`IN_MASK_ADD`)
    /// instead of replacing it.
    public func addWatch(_ path: String, mask: UInt32, merge: Bool = false) throws(SystemCallError) -> Int32 {
        let fd = descriptor.rawValue
        let flags = mask | (merge ? UInt32(IN_MASK_ADD) : 0)
        return try Syscall.retrying("inotify_add_watch", path: path) { inotify_add_watch(fd, path, flags) }
    }

    /// Removes the watch `watch` (the kernel then queues `IN_IGNORED` for it).
    public func removeWatch(_ watch: Int32) throws(SystemCallError) {
        let fd = descriptor.rawValue
        try Syscall.retrying("inotify_rm_watch", path: "inotify") { inotify_rm_watch(fd, watch) }
    }

    /// Reads queued events into `buffer` (one `read`; at least 64 KiB holds any event). Returns
    /// the number of bytes, 0 when none are queued on a non-blocking instance.
    public func readEvents(into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Int {
        do throws(SystemCallError) {
            return try descriptor.readOnce(into: buffer)
        } catch  where error.errno == EAGAIN {
            return 0
        }
    }

    /// One event as read from the instance; `name` points into the read buffer.
    public struct Event {
        public var watch: Int32
        public var mask: UInt32
        public var cookie: UInt32
        /// The name of the entry the event is about (no terminator); empty for events about
        /// the watched inode itself.
        public var name: UnsafeBufferPointer<UInt8>

        /// Whether `mask` has any of the bits of `flags` (e.g. `IN_MOVED_TO | IN_CLOSE_WRITE`).
        public func has(_ flags: Int32) -> Bool { mask & UInt32(bitPattern: flags) != 0 }
    }

    /// Calls `body` for each complete `struct inotify_event` in `bytes` (as returned by
    /// ``readEvents(into:)``), in order.
    public static func forEachEvent(in bytes: UnsafeRawBufferPointer, _ body: (Event) -> Void) {
        let headerLength = 16  // wd, mask, cookie, len
        var offset = 0
        while offset + headerLength <= bytes.count {
            let watch = bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)
            let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
            let cookie = bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self)
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
            let nameStart = offset + headerLength
            offset = nameStart + length
            guard offset <= bytes.count else { return }
            // The name is NUL-padded to `length`.
            var nameLength = 0
            while nameLength < length && bytes[nameStart + nameLength] != 0 { nameLength += 1 }
            let name = UnsafeBufferPointer(
                start: (bytes.baseAddress! + nameStart).assumingMemoryBound(to: UInt8.self), count: nameLength)
            body(Event(watch: watch, mask: mask, cookie: cookie, name: name))
        }
    }
}
