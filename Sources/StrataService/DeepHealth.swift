import Strata

/// `GET /healthz?deep=1`: proves that this node can do its work, not only answer — a small
/// built-in image decoded and resampled by the engine's renderers on its threads (the caches
/// bypassed), the result encoded as the service encodes, and a page written to and deleted from
/// the disk tier's directory, and the source asked whether it is usable (a bucket's
/// credentials: ``ImageCache/checkSourceHealth()``). The first part that fails is named.
///
/// Rate-limited: a check runs at most once per ``interval``; callers meanwhile share the
/// running check or get the last report, so probing it hard cannot become a load vector.
/// Cost of one check: a 64×40 decode and resample, a 16×10 encode, one small file write.
package final class DeepHealth: Sendable {
    /// What a check found: `nil` when every part works, else the failing part and why.
    package struct Report: Sendable {
        package var failure: (part: String, message: String)?
        package var at: ContinuousClock.Instant
        /// The parts checked, in order (`render`, `encode`, `disk`, `source`).
        package var parts: [String] = []
    }

    /// The shortest time between two checks.
    package static let interval: Duration = .seconds(1)

    private let cache: ImageCache
    private let probes: ServiceProbes
    /// The built-in image: a 64×40 gradient as JPEG, made once.
    private let sample: [UInt8]
    private let state = Lock<(last: Report?, running: Task<Report, Never>?)>((nil, nil))

    package init(cache: ImageCache, probes: ServiceProbes = ServiceProbes()) {
        self.cache = cache
        self.probes = probes
        self.sample = Self.makeSample()
    }

    /// The current report: the last one if it is younger than ``interval``, else a new check
    /// (one at a time: concurrent callers wait for the same one).
    package func report() async -> Report {
        let task = state.withLock { s -> Task<Report, Never>? in
            if let last = s.last, ContinuousClock.now - last.at < Self.interval { return nil }
            if let running = s.running { return running }
            let started = Task { await self.check() }
            s.running = started
            return started
        }
        guard let task else { return state.withLock { $0.last! } }
        let report = await task.value
        state.withLock { s in
            // Callers sharing a check all end here: only the first clears it, and a later
            // check's report is never replaced by this older one.
            if s.running == task { s.running = nil }
            if s.last.map({ $0.at < report.at }) ?? true { s.last = report }
        }
        return report
    }

    /// One check, part by part; stops at the first failure.
    private func check() async -> Report {
        probes.deepHealthChecked?()
        let request = RenderRequest(box: PixelSize(width: 16, height: 16))
        let rendered: PixelImage
        do {
            rendered = try await cache.renderUncached(sample, request: request)
        } catch {
            return Report(failure: ("render", "\(error)"), at: .now)
        }
        // A left-to-right gradient: the left edge dark, the right edge bright.
        let left = rendered.pixelBytes(x: 0, y: rendered.height / 2)
        let right = rendered.pixelBytes(x: rendered.width - 1, y: rendered.height / 2)
        guard rendered.size == PixelSize(width: 16, height: 10), left[2] < 64, right[2] > 192 else {
            return Report(failure: ("render", "the built-in image came out wrong: \(rendered.size), \(left) … \(right)"), at: .now)
        }
        do {
            let encoded = try await cache.runOnEngineThreads { () throws(ImageEncodingError) in
                try ImageEncoder.encode(rendered, as: .jpeg, quality: 80)
            }.get()
            guard encoded.starts(with: [0xFF, 0xD8, 0xFF]) else {
                return Report(failure: ("encode", "the encoder wrote no JPEG"), at: .now)
            }
        } catch {
            return Report(failure: ("encode", "\(error)"), at: .now)
        }
        var parts = ["render", "encode"]
        if let disk = cache.disk {
            do {
                try await cache.runOnEngineThreads { () throws(DiskTierError) in try disk.probeWrite() }.get()
            } catch {
                return Report(failure: ("disk", "\(error)"), at: .now)
            }
            parts.append("disk")
        }
        // A source that can prove its credentials (a bucket) does: a refused signature fails
        // the check, naming the origin.
        if cache.sourceCanCheckHealth {
            do {
                try await cache.checkSourceHealth()
            } catch {
                return Report(failure: ("source", "\(error)"), at: .now)
            }
            parts.append("source")
        }
        return Report(failure: nil, at: .now, parts: parts)
    }

    /// A 64×40 opaque gray gradient, dark to bright from left to right, as JPEG.
    package static func makeSample() -> [UInt8] {
        var image = PixelImage(width: 64, height: 40)
        let stride = image.bytesPerRow
        image.withUnsafeMutableBytes { bytes in
            for y in 0..<40 {
                for x in 0..<64 {
                    let value = UInt8(x * 255 / 63)
                    let at = y * stride + x * 4
                    (bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]) = (value, value, value, 255)
                }
            }
        }
        // A fixed image through the project's own encoder: it cannot fail.
        return (try? ImageEncoder.encode(image, as: .jpeg, quality: 90)) ?? []
    }
}
