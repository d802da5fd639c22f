import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The name of a store's temporary file:
/// `.strata-tmp-<digest>-<pid>-<namespace tag, 16 hex>-<counter>`.
///
/// A store writes the temporary file, then renames it over the published name; a writer killed
/// in between (SIGKILL, OOM) leaves the temporary behind. The pid and the namespace tag
/// (``ProcessLiveness/namespaceTag``) let the next tier that opens the directory delete it at
/// once when its writer is certainly gone, instead of waiting for the age rule (an hour), which
/// still covers names of another kernel or pid namespace and of older versions.
package struct DiskTemporaryName: Hashable, Sendable {
    package var digest: ImageEntityID
    package var pid: pid_t
    package var tag: UInt64
    package var counter: Int

    /// Temporary files this old are deleted whoever wrote them.
    package static let staleAge = 3600

    package var string: String {
        let hex = String(tag, radix: 16)
        return "\(DiskFileName.temporaryPrefix)\(digest)-\(pid)-\(String(repeating: "0", count: 16 - hex.count))\(hex)-\(counter)"
    }

    /// Parses `name`; `nil` unless it has the temporary prefix and exactly the four fields
    /// (older versions' names, without the tag, are left to the age rule).
    package init?(_ name: String) {
        guard name.hasPrefix(DiskFileName.temporaryPrefix) else { return nil }
        let fields = name.dropFirst(DiskFileName.temporaryPrefix.count).split(separator: "-", omittingEmptySubsequences: false)
        guard fields.count == 4, fields[0].count == 32, fields[2].count == 16,
            let high = UInt64(fields[0].prefix(16), radix: 16), let low = UInt64(fields[0].suffix(16), radix: 16),
            fields[1].count <= 10, let pid = Int32(fields[1]), pid > 0,
            let tag = UInt64(fields[2], radix: 16),
            fields[3].count <= 19, let counter = Int(fields[3]), counter >= 0
        else { return nil }
        self.init(digest: ImageEntityID(high: high, low: low), pid: pid, tag: tag, counter: counter)
    }

    package init(digest: ImageEntityID, pid: pid_t, tag: UInt64, counter: Int) {
        self.digest = digest
        self.pid = pid
        self.tag = tag
        self.counter = counter
    }

    /// A name for this process's next temporary file of `digest`.
    package static func next(for digest: ImageEntityID, counter: Int) -> DiskTemporaryName {
        DiskTemporaryName(digest: digest, pid: getpid(), tag: ProcessLiveness.namespaceTag, counter: counter)
    }

    /// Whether the temporary file `name`, last modified at `modified` (seconds since the
    /// epoch), may be deleted at `now`: its writer is certainly gone, or it is older than
    /// ``staleAge``.
    package static func isAbandoned(_ name: String, modified: Int, now: Int) -> Bool {
        if now - modified > staleAge { return true }
        guard let parsed = DiskTemporaryName(name) else { return false }
        return ProcessLiveness.isCertainlyGone(pid: parsed.pid, tag: parsed.tag)
    }
}
