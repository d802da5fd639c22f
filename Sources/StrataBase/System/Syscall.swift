#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// A failed system call: which call, on which path (if any), and the errno it returned.
///
/// Every syscall Strata makes goes through ``Syscall`` so that `EINTR` is retried in one place
/// and failures carry enough to act on ("open(/var/cache/x): No space left on device").
public struct SystemCallError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The call that failed, e.g. `"open"`.
    public var call: String
    /// The path the call was about, when there is one.
    public var path: String?
    /// The `errno` value.
    public var errno: Int32

    public init(call: String, path: String? = nil, errno: Int32) {
        self.call = call
        self.path = path
        self.errno = errno
    }

    /// The C library's text for ``errno``.
    public var reason: String { String(cString: strerror(errno)) }

    public var description: String {
        if let path { return "\(call)(\(path)): \(reason) (errno \(errno))" }
        return "\(call): \(reason) (errno \(errno))"
    }
}

/// The one place Strata calls the C library's syscall wrappers.
public enum Syscall {
    /// Runs `body` (a C call returning -1 and setting `errno` on failure), retrying on `EINTR`,
    /// and throws a ``SystemCallError`` naming `call` and `path` on any other failure.
    @inlinable
    @discardableResult
    public static func retrying<T: FixedWidthInteger>(
        _ call: String, path: String? = nil, _ body: () -> T
    ) throws(SystemCallError) -> T {
        try injectedFault(call, path)
        while true {
            let result = body()
            if result != -1 { return result }
            let code = Glibc.errno
            if code == EINTR { continue }
            throw SystemCallError(call: call, path: path, errno: code)
        }
    }

    /// For calls such as `posix_fallocate` that return the error number instead of setting
    /// `errno`: retries on `EINTR`, throws on any other non-zero result.
    @inlinable
    public static func retryingReturnedErrno(
        _ call: String, path: String? = nil, _ body: () -> Int32
    ) throws(SystemCallError) {
        try injectedFault(call, path)
        while true {
            let code = body()
            if code == 0 { return }
            if code == EINTR { continue }
            throw SystemCallError(call: call, path: path, errno: code)
        }
    }
}

extension Syscall {
    /// Throws the errno a `SyscallFaults` rule injects for `call` on `path`, if any. One relaxed
    /// atomic load when no rule is installed.
    @inlinable
    public static func injectedFault(_ call: String, _ path: String?) throws(SystemCallError) {
        if SyscallFaults.armed.load(ordering: .relaxed) != 0, let code = SyscallFaults.injectedErrno(call, path: path) {
            throw SystemCallError(call: call, path: path, errno: code)
        }
    }
}
