import Dispatch
import Synchronization

// MARK: - A resample that overlaps the writing of its source

extension Resampler {
    /// Whether ``resample(filling:sourceSize:sourceStride:style:region:into:fill:)`` would overlap
    /// the fill with the resample for this geometry: a 4-channel resample that ``threads``
    /// allows to split and that has at least ``overlapWork`` multiply-adds. When it would not,
    /// fill the source first and call ``resample(_:region:into:)``.
    package func overlapsFill(sourceSize: PixelSize, region: SourceRect, destinationSize: PixelSize, style: PixelStyle) -> Bool {
        guard threads > 1, style == .bgra32Premultiplied || style == .bgrx32, !destinationSize.isEmpty,
            region.width > 0, region.height > 0
        else { return false }
        let (h, v) = tables(sourceSize: sourceSize, region: region, destinationSize: destinationSize)
        if h.isShift && v.isShift { return false }
        return work(h, v, channels: style.bytesPerPixel) >= overlapWork
    }

    /// Resamples `region` of a source image that `fill` is still writing, top to bottom, into all
    /// of `destination` (same style as the source).
    ///
    /// `fill` runs on this thread and calls `publish(rows)` whenever the source's first `rows`
    /// rows are final. Meanwhile one helper (through ``forkJoin``, with its own scratch) resamples
    /// chunks of output rows in order, each as soon as the source rows it reads are published;
    /// when `fill` returns, this thread takes the chunks still left. A JPEG decode of a large
    /// photo and its Lanczos reduce then take about the time of the decode alone, as libvips'
    /// pipeline does. The bytes are those of `fill` followed by ``resample(_:region:into:)``.
    ///
    /// Only for a geometry where ``overlapsFill(sourceSize:region:destinationSize:style:)`` holds
    /// (checked). `source` must stay valid, and rows once published unchanged, until this
    /// returns. When `fill` throws, the helper is stopped and waited for before the error is
    /// rethrown; `destination`'s bytes are then unspecified.
    ///
    /// `finish`, when given, runs on each chunk's rows right after they are written, by the
    /// thread that wrote them (the helper does it while it waits for decoded rows).
    package func resample<E: Error>(
        filling source: UnsafePointer<UInt8>, sourceSize: PixelSize, sourceStride: Int, style: PixelStyle,
        region: SourceRect, into destination: inout PixelImage, finish: RowsFinish? = nil,
        fill: (_ publish: (Int) -> Void) throws(E) -> Void
    ) throws(E) {
        precondition(destination.style == style, "resample keeps the style")
        precondition(
            overlapsFill(sourceSize: sourceSize, region: region, destinationSize: destination.size, style: style),
            "resample(filling:) needs a geometry that overlapsFill accepts")
        let (h, v) = tables(sourceSize: sourceSize, region: region, destinationSize: destination.size)
        if helpers.isEmpty { helpers.append(Resampler(filter: filter)) }
        let helper = helpers[0]
        helper.usesAVX2 = usesAVX2
        lastBandCount = 2
        let outputRows = destination.height, width = destination.width
        let destinationStride = destination.bytesPerRow
        // About 32 chunks: the helper trails the fill by at most one chunk's source rows, and
        // whoever takes a chunk after another's re-filters only the rows the two share.
        let chunkRows = max(1, (outputRows + 31) / 32)
        let chunks = (outputRows + chunkRows - 1) / chunkRows
        let progress = FillProgress()
        let error: E? = destination.withUnsafeMutableBytes { dst in
            let work = FillWork(
                h: h, v: v, style: style, source: source, sourceStride: sourceStride,
                destination: dst.baseAddress!.assumingMemoryBound(to: UInt8.self),
                destinationStride: destinationStride, width: width, outputRows: outputRows, chunkRows: chunkRows,
                chunks: chunks, progress: progress, finish: finish)
            let helperBox = UncheckedResampler(helper)
            // Refused (a shut-down pool): this thread does all the chunks, and `joinHelper`
            // finds the helper never started.
            _ = forkJoin.spawn {
                // Nothing is touched when this thread finished without the helper.
                guard progress.helperStarts() else { return }
                work.runChunks(on: helperBox.resampler, waiting: true)
                progress.helperDone.signal()
            }
            do throws(E) {
                try fill { rows in progress.publish(rows) }
            } catch {
                progress.stop()
                progress.joinHelper()
                return error
            }
            progress.publish(Int.max)
            work.runChunks(on: self, waiting: false)
            progress.joinHelper()
            return nil
        }
        if let error { throw error }
    }

    /// The horizontal and vertical tables for a resample of `region` of a `sourceSize` image to
    /// `destinationSize` (cached while the geometry repeats).
    package func tables(sourceSize: PixelSize, region: SourceRect, destinationSize: PixelSize) -> (ResamplerTable, ResamplerTable) {
        let h = table(
            &horizontal,
            ResamplerTable.Key(
                sourceLength: sourceSize.width, regionStart: region.x, regionLength: region.width,
                destinationLength: destinationSize.width, filter: filter))
        let v = table(
            &vertical,
            ResamplerTable.Key(
                sourceLength: sourceSize.height, regionStart: region.y, regionLength: region.height,
                destinationLength: destinationSize.height, filter: filter))
        return (h, v)
    }
}

/// How far a fill has got, shared by the filling thread and the helper. The helper sleeps on
/// `published` only when the rows it needs are not there yet; a fill's `publish` is one atomic
/// store and one semaphore signal (no system call unless the helper sleeps).
private final class FillProgress: Sendable {
    private let rows = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let published = DispatchSemaphore(value: 0)
    let helperDone = DispatchSemaphore(value: 0)
    /// 0: the helper has not started; 1: it runs (and signals `helperDone`); 2: it must not
    /// start (the filling thread did all the work and went on).
    private let helperState = Atomic<Int>(0)

    /// Called by the helper when it starts: false when it is too late to help.
    func helperStarts() -> Bool {
        helperState.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged
    }

    /// Called by the filling thread at the end: returns once the helper has finished, or at
    /// once when it never started (a busy pool must not hold this thread up).
    func joinHelper() {
        if helperState.compareExchange(expected: 0, desired: 2, ordering: .acquiringAndReleasing).exchanged { return }
        helperDone.wait()
    }

    func publish(_ count: Int) {
        rows.store(count, ordering: .releasing)
        published.signal()
    }

    /// The fill failed: the helper takes no more chunks.
    func stop() {
        stopped.store(true, ordering: .releasing)
        published.signal()
    }

    var isStopped: Bool { stopped.load(ordering: .acquiring) }

    /// Waits until `count` source rows are published; false when the fill stopped first.
    func wait(forRows count: Int) -> Bool {
        while rows.load(ordering: .acquiring) < count {
            if isStopped { return false }
            published.wait()
        }
        return !isStopped
    }

    private let nextChunk = Atomic<Int>(0)

    /// The next chunk nobody has taken.
    func takeChunk() -> Int { nextChunk.wrappingAdd(1, ordering: .relaxed).oldValue }
}

/// What the filling thread and the helper share. Unchecked: the helper is waited for (or barred
/// from starting) before the buffers go away, each chunk of output rows is written by whoever
/// took it alone, and source rows are read only once published (the fill writes no published
/// row again).
private struct FillWork: @unchecked Sendable {
    let h: ResamplerTable
    let v: ResamplerTable
    let style: PixelStyle
    let source: UnsafePointer<UInt8>
    let sourceStride: Int
    let destination: UnsafeMutablePointer<UInt8>
    let destinationStride: Int
    let width: Int
    let outputRows: Int
    let chunkRows: Int
    let chunks: Int
    let progress: FillProgress
    let finish: Resampler.RowsFinish?

    /// Takes chunks until none is left: with `waiting`, each once the source rows it reads are
    /// published: up to the furthest window end of its rows (not always the last row's: an
    /// output row centred on a source row has one tap), and one more, since the two-row
    /// horizontal pass also filters the row after the one it needs.
    func runChunks(on resampler: Resampler, waiting: Bool) {
        var first = true
        while true {
            let chunk = progress.takeChunk()
            guard chunk < chunks, !progress.isStopped else { return }
            let rows = chunk * chunkRows..<min(outputRows, (chunk + 1) * chunkRows)
            if waiting {
                var end = 0
                for y in rows { end = max(end, v.starts[y] + v.counts[y]) }
                let needed = min(v.spanEnd, end + 1)
                guard progress.wait(forRows: needed) else { return }
            }
            resampler.run(
                h, v, style: style, rows: rows, source: source, sourceStride: sourceStride, into: destination,
                destinationStride: destinationStride, width: width, keepingRing: !first)
            finish?(
                destination + rows.lowerBound * destinationStride, PixelSize(width: width, height: rows.count), destinationStride)
            first = false
        }
    }
}

/// A resampler handed to the helper. Unchecked: only the helper uses it until it signals that
/// it is done.
private struct UncheckedResampler: @unchecked Sendable {
    let resampler: Resampler
    init(_ resampler: Resampler) { self.resampler = resampler }
}
