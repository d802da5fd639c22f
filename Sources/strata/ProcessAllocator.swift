import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The general allocator `strata serve` runs on (`process.allocator`): `jemalloc` (the default)
/// or `system` (glibc's malloc). glibc keeps freed buffers of codecs and answers in per-thread
/// arenas that it rarely returns, so the service's RSS drifts far above its configured caches;
/// jemalloc, with its dirty pages decaying back to the kernel within about a second, keeps it
/// near them (measured: docs/Reliability.md, "Memory"). Pixel buffers are Strata's own
/// (`PixelMemory`) either way, and the library leaves the choice to whoever embeds it.
///
/// jemalloc is preloaded: when it is chosen and not loaded yet, the process executes itself
/// again with Debian's `libjemalloc.so.2` in `LD_PRELOAD` (the same pid, before any work), and
/// then takes it back out of `LD_PRELOAD` so that programs it starts do not inherit it. Without
/// the library it logs a warning and runs on the system's allocator.
enum ProcessAllocator {
    /// Where Debian and other distributions put the library, tried in order.
    static let libraryPaths = [
        "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "/usr/lib/aarch64-linux-gnu/libjemalloc.so.2", "/usr/lib64/libjemalloc.so.2",
        "/usr/lib/libjemalloc.so.2", "/usr/local/lib/libjemalloc.so.2",
    ]
    /// jemalloc's settings unless `MALLOC_CONF` names others: a background thread returns dirty
    /// pages after 1 s unused (muzzy ones at once), over 4 arenas (not one per core times 4).
    static let settings = "background_thread:true,narenas:4,dirty_decay_ms:1000,muzzy_decay_ms:0"

    /// Whether a sanitizer's runtime (ASan, TSan, MSan) is in the process: it owns `malloc`, and
    /// a preloaded jemalloc would hand out memory that the sanitizer's `free` then refuses.
    static var sanitizerLoaded: Bool {
        let runtimes: [String] = ["__asan_init", "__tsan_init", "__msan_init"]
        return runtimes.contains { dlsym(UnsafeMutableRawPointer(bitPattern: 0), $0) != nil }
    }

    /// Whether jemalloc is the process's allocator now.
    static var jemallocLoaded: Bool { dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallctl") != nil }

    /// Applies `choice` (`jemalloc` or `system`): may execute the program again, in which case it
    /// does not return.
    static func apply(_ choice: String, logger: Logger) {
        let preload = ProcessInfo.processInfo.environment["LD_PRELOAD"] ?? ""
        let library = libraryPaths.first { access($0, R_OK) == 0 }
        if jemallocLoaded {
            // Loaded by our own re-execution: take it back out of the environment.
            if let library, preload.split(separator: " ").contains(Substring(library)) {
                let rest = preload.split(separator: " ").filter { $0 != library }.joined(separator: " ")
                if rest.isEmpty { unsetenv("LD_PRELOAD") } else { setenv("LD_PRELOAD", rest, 1) }
            }
            if choice != "jemalloc" {
                logger.warning("process.allocator is \(choice), but jemalloc was preloaded by the environment; it stays")
            }
            return
        }
        guard choice == "jemalloc" else { return }
        if sanitizerLoaded {
            logger.info("process.allocator is jemalloc, but a sanitizer's runtime owns malloc in this build; it stays")
            return
        }
        guard let library else {
            logger.warning(
                "process.allocator is jemalloc, but libjemalloc.so.2 is not installed (Debian: libjemalloc2); running on the system's allocator, whose arenas keep freed memory"
            )
            return
        }
        if preload.split(separator: " ").contains(Substring(library)) {
            logger.warning("libjemalloc.so.2 is in LD_PRELOAD but did not load; running on the system's allocator")
            return
        }
        setenv("LD_PRELOAD", preload.isEmpty ? library : library + " " + preload, 1)
        if ProcessInfo.processInfo.environment["MALLOC_CONF"] == nil { setenv("MALLOC_CONF", settings, 1) }
        execv("/proc/self/exe", CommandLine.unsafeArgv)
        // Only on failure:
        logger.warning("could not execute strata again with jemalloc preloaded (errno \(errno)); running on the system's allocator")
    }
}
