#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory under /tmp, removed when the value goes away.
package final class TempDirectory {
    package let path: String
    package init() {
        var template = Array("/tmp/strata-tables-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }
    deinit { _ = system("rm -rf '\(path)'") }
}
