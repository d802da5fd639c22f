#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension FileDescriptor {
    /// The canonical absolute form of `path` (`realpath`): `.`, `..`, repeated and trailing
    /// slashes and symbolic links resolved. The path must exist.
    public static func resolvedPath(_ path: String) throws(SystemCallError) -> String {
        try Syscall.injectedFault("realpath", path)
        guard let resolved = realpath(path, nil) else {
            throw SystemCallError(call: "realpath", path: path, errno: errno)
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The parent directory and the last component of a canonical path (``resolvedPath(_:)``):
    /// `("/a", "b")` for `/a/b`, `("/", "a")` for `/a`, `("/", "")` for `/`.
    public static func splitParent(ofResolved path: String) -> (parent: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let parent = slash == path.startIndex ? "/" : String(path[..<slash])
        return (parent, String(path[path.index(after: slash)...]))
    }
}
