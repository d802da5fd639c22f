#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// This machine's host name (`gethostname(2)`), read once: the default name of a service node.
package enum HostName {
    /// The host name, or `nil` when the call fails or the name is empty.
    package static let current: String? = {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return nil }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? nil : name
    }()
}
