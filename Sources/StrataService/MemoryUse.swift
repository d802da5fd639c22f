import Strata

/// The process's memory by part, for `/stats` (`memoryUse`) and `/metrics`
/// (`strata_memory_bytes{part}`): what each cache holds against its limit, what work in flight
/// holds, what the allocators keep free, and what the kernel counts resident. The parts that
/// Strata bounds (memory tier, encoded answers, renders in flight, pixel-buffer cache) plus a
/// fixed overhead should explain the anonymous RSS; a gap that grows is a leak.
/// Cost: a few locks and atomics, a read of `/proc/self/status` and a walk of `malloc`'s arenas.
package struct MemoryUse: Encodable, Sendable {
    /// Bytes of decoded images the memory tier pins, and its `memory.costLimit`.
    package var memoryTier, memoryTierLimit: Int
    /// Bytes of encoded answers kept, and `http.encodedCacheSize`.
    package var encoded, encodedLimit: Int
    /// Bytes reserved by renders and encodes in flight, the most at once, and `render.memoryLimit`
    /// (`null`: no limit); jobs waiting for room now; jobs that waited, and those refused as
    /// larger than the limit, since the start.
    package var inFlight, inFlightPeak: Int
    package var inFlightLimit: Int?
    package var inFlightWaiting, inFlightWaits, inFlightRefusals: Int
    /// Live pixel buffers Strata allocated (memory tier, in flight, held by answers being
    /// written): anonymous memory.
    package var pixelBuffers: Int
    /// Freed pixel buffers kept mapped for reuse (``PixelMemory``), and `render.bufferCacheSize`.
    package var bufferCache, bufferCacheLimit: Int
    /// The general allocator (`jemalloc` or `glibc`), the bytes it keeps resident but not handed
    /// out, and all it has from the kernel.
    package var allocator: String
    package var mallocFree, mallocTotal: Int
    /// Disk-tier files and table slots mapped by live images: file-backed, reclaimable.
    package var mappedFiles: Int
    /// Resident bytes from `/proc/self/status`: anonymous, file-backed, all.
    package var rssAnonymous, rssFile, rss: Int
    /// The cgroup's memory limit, `null` when none.
    package var cgroupLimit: Int?

    package init(cache: ImageCache, encoded: EncodedCache, cgroupLimit: Int? = MemoryPressureSensor().read().cgroupLimit) {
        let tier = cache.memory?.statistics
        memoryTier = tier?.totalCost ?? 0
        memoryTierLimit = tier?.costLimit ?? 0
        let e = encoded.statistics
        self.encoded = e?.totalCost ?? 0
        encodedLimit = e?.costLimit ?? 0
        let budget = cache.memoryBudget.statistics
        inFlight = budget.inUse
        inFlightPeak = budget.peak
        inFlightLimit = budget.limit == .max ? nil : budget.limit
        inFlightWaiting = budget.waiting
        inFlightWaits = budget.waits
        inFlightRefusals = budget.refusals
        pixelBuffers = PixelStorageCounters.liveBytes(.heap)
        let buffers = PixelMemory.shared.statistics
        bufferCache = buffers.cachedBytes
        bufferCacheLimit = buffers.cacheLimit
        let process = ProcessMemory.current()
        allocator = process.allocator
        mallocFree = process.mallocFree
        mallocTotal = process.mallocTotal
        mappedFiles = PixelStorageCounters.liveBytes(.fileMapping) + PixelStorageCounters.liveBytes(.tableSlot)
        rssAnonymous = process.anonymous
        rssFile = process.fileBacked
        rss = process.resident
        self.cgroupLimit = cgroupLimit
    }

    /// The `part` label values, in ``parts`` order.
    package static let partNames = [
        "memory_tier", "memory_tier_limit", "encoded", "encoded_limit", "in_flight", "in_flight_peak", "in_flight_limit",
        "pixel_buffers", "buffer_cache", "buffer_cache_limit", "malloc_free", "malloc_total", "mapped_files", "rss_anonymous",
        "rss_file", "rss", "cgroup_limit",
    ]

    /// The parts as `strata_memory_bytes{part}` gauge values.
    package var parts: [(String, Int)] {
        [
            ("memory_tier", memoryTier), ("memory_tier_limit", memoryTierLimit), ("encoded", encoded), ("encoded_limit", encodedLimit),
            ("in_flight", inFlight), ("in_flight_peak", inFlightPeak), ("in_flight_limit", inFlightLimit ?? 0),
            ("pixel_buffers", pixelBuffers), ("buffer_cache", bufferCache), ("buffer_cache_limit", bufferCacheLimit),
            ("malloc_free", mallocFree), ("malloc_total", mallocTotal), ("mapped_files", mappedFiles),
            ("rss_anonymous", rssAnonymous), ("rss_file", rssFile), ("rss", rss), ("cgroup_limit", cgroupLimit ?? 0),
        ]
    }
}
