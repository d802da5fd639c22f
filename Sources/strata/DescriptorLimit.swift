import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The process's limit of open descriptors, which bounds `http.maxConnections` (each
/// connection takes one): `strata serve` raises the soft limit to the hard one at start (the
/// shell's default soft limit, often 1024, would refuse connections long before the default
/// `http.maxConnections`) and warns when the limit is still below what the setting needs.
enum DescriptorLimit {
    /// Descriptors kept for what is not a client connection: the disk tier's files, the origin's
    /// connections, the listening socket, logs.
    static let reserve = 256

    /// Raises the soft limit to the hard one; logs a warning when `maxConnections` plus
    /// ``reserve`` does not fit.
    static func raise(for maxConnections: Int, logger: Logger) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        let needed = rlim_t(maxConnections + reserve)
        if limit.rlim_cur < needed {
            logger.warning(
                "the open-descriptor limit is below http.maxConnections + \(reserve): connections beyond it are refused by the kernel",
                metadata: ["limit": "\(limit.rlim_cur)", "http.maxConnections": "\(maxConnections)"])
        }
    }
}
