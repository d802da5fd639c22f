#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CStrataLinux

/// The process's memory as the kernel and the C library see it: resident anonymous and
/// file-backed bytes (`/proc/self/status`) and what `malloc` holds free. What an operator
/// compares with the caches' own counts to tell a cache from a leak. Cost: one small file read
/// and a walk of `malloc`'s arenas (for `/stats` and `/metrics`, not per request).
public struct ProcessMemory: Sendable, Hashable {
    /// `VmRSS`: resident bytes in all.
    public var resident: Int
    /// `RssAnon`: resident anonymous bytes (heap, pixel buffers, stacks): what a container's
    /// limit cannot reclaim.
    public var anonymous: Int
    /// `RssFile`: resident file-backed bytes (the binary, mapped disk and table files): clean
    /// pages the kernel can drop under pressure.
    public var fileBacked: Int
    /// `RssShmem`: resident shared memory.
    public var shared: Int
    /// The process's general allocator: `jemalloc` when it is loaded (`strata serve` preloads
    /// it), else `glibc`.
    public var allocator: String
    /// Bytes the general allocator keeps resident but not handed out: glibc's free bytes in its
    /// arenas, or jemalloc's resident less allocated bytes (its dirty pages, metadata).
    public var mallocFree: Int
    /// Bytes the general allocator has from the kernel: glibc's arenas and mappings, or
    /// jemalloc's resident bytes.
    public var mallocTotal: Int

    /// Reads the current values (zeros where `/proc` cannot be read).
    public static func current() -> ProcessMemory {
        var allocated = 0, resident = 0
        var memory =
            strata_jemalloc_stats(&allocated, &resident) == 0
            ? ProcessMemory(
                resident: 0, anonymous: 0, fileBacked: 0, shared: 0, allocator: "jemalloc", mallocFree: max(0, resident - allocated),
                mallocTotal: resident)
            : ProcessMemory(
                resident: 0, anonymous: 0, fileBacked: 0, shared: 0, allocator: "glibc", mallocFree: Int(strata_malloc_free_bytes()),
                mallocTotal: Int(strata_malloc_total_bytes()))
        guard let fd = try? FileDescriptor(open: "/proc/self/status", flags: O_RDONLY), let bytes = try? fd.readAll() else {
            return memory
        }
        let fields = parseStatus(String(decoding: bytes, as: UTF8.self))
        memory.resident = fields["VmRSS"] ?? 0
        memory.anonymous = fields["RssAnon"] ?? 0
        memory.fileBacked = fields["RssFile"] ?? 0
        memory.shared = fields["RssShmem"] ?? 0
        return memory
    }

    /// The `Name:   N kB` lines of a `/proc/PID/status` text, in bytes.
    package static func parseStatus(_ text: String) -> [String: Int] {
        var fields: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let parts = line[line.index(after: colon)...].split(whereSeparator: \.isWhitespace)
            guard parts.count == 2, parts[1] == "kB", let kib = Int(parts[0]) else { continue }
            fields[String(line[..<colon])] = kib << 10
        }
        return fields
    }
}
