import StrataBase
import StrataCodecs
import Tracing

/// A render from the source's bytes on the engine's threads, within the engine's
/// `render.memoryLimit` (``ImageCache/memoryBudget``).
extension ImageCache {
    /// Decodes and resamples `bytes` for `request` with one of the engine's renderers (blocking:
    /// call it on the engine's threads), counted and timed.
    /// `parent`: the context of its spans (decode, resample, colour), `nil` when tracing is off.
    package func renderOriginal(
        _ bytes: [UInt8], key: CacheKey, request: RenderRequest, lane: FlightLane, parent: ServiceContext? = nil
    ) throws(ImageCacheError) -> (image: PixelImage, originalSize: PixelSize, isAnimated: Bool) {
        counters.sourceDecodes.add(1, ordering: .relaxed)
        var request = request
        request.colour = key.colourOutput  // the key says which colours and crop its variants hold
        request.gravity = key.gravity
        request.operations = key.operations
        if request.gravity == .smart, request.mode == .fill { request.smartFocus = heldSmartFocus(key, request: request) }
        let renderStart = ContinuousClock.now
        defer { metrics.render.recordInterval(since: renderStart) }
        let budget = memoryBudget, jobLane = lane.lane
        let outcome = renderers.withRenderer(pool: pool, lane: jobLane) { renderer in
            renderer.traceParent = parent
            defer { renderer.traceParent = nil }
            return bytes.withUnsafeBytes { Self.render($0, request: request, with: renderer, budget: budget, lane: jobLane) }
        }
        switch outcome {
        case .success(let rendered): return rendered
        case .failure(.decoding(let decoding)): throw .decoding(key: key.string, decoding)
        case .failure(.overLimit(let refusal)): throw .overMemoryLimit(key: key.string, refusal)
        }
    }

    /// One render of `bytes` with `renderer`: its header read and its decode planned, then, once
    /// its estimate fits in `budget` (waiting in `lane` before any pixel is allocated), the decode
    /// and the resample.
    private static func render(
        _ bytes: UnsafeRawBufferPointer, request: RenderRequest, with renderer: ImageRenderer, budget: MemoryBudget, lane: Lane
    ) -> Result<(image: PixelImage, originalSize: PixelSize, isAnimated: Bool), RenderFailure> {
        let prepared: PreparedRender
        do {
            prepared = try renderer.prepare(bytes, request: request)
        } catch {
            return .failure(.decoding(error))
        }
        do {
            let (image, originalSize) = try budget.withReservation(prepared.peakBytes, lane: lane) { () throws(ImageDecodingError) in
                try renderer.render(bytes, prepared: prepared)
            }
            return .success((image, originalSize, prepared.header.isAnimated))
        } catch {
            switch error {
            case .refused(let refusal): return .failure(.overLimit(refusal))
            case .failed(let decoding): return .failure(.decoding(decoding))
            }
        }
    }
}

/// Why a render in ``ImageCache/renderOriginal(_:key:request:lane:parent:)`` produced nothing.
package enum RenderFailure: Error {
    case decoding(ImageDecodingError)
    case overLimit(MemoryBudgetError)
}
