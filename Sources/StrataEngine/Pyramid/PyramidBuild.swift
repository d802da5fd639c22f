import StrataBase
/// One running build of a pyramid and the requests waiting on it: each waits for its own tile,
/// is resumed the moment the pass has written it (or found it written), and may cancel alone.
///
/// Cost: one lock per tile written and per waiter; the set of tiles handed over grows to the
/// pyramid's tile count (a 1-gigapixel image in 512-pixel tiles: about 5 000).
package final class PyramidBuild: Sendable {
    package let geometry: PyramidGeometry
    private let state = Lock(State())

    private struct State {
        var produced: Set<TileAddress> = []
        var waiters: [TileAddress: [UInt64: CheckedContinuation<PixelImage?, any Error>]] = [:]
        var ends: [UInt64: CheckedContinuation<Void, any Error>] = [:]
        var nextWaiter: UInt64 = 0
        var outcome: Result<Void, ImageCacheError>?
    }

    package init(geometry: PyramidGeometry) { self.geometry = geometry }

    /// The pass wrote (or found) `tile`: its waiters get `image`.
    package func produced(_ tile: TileAddress, _ image: PixelImage) {
        let waiting = state.withLock { s in
            s.produced.insert(tile)
            return s.waiters.removeValue(forKey: tile)
        }
        for continuation in waiting?.values ?? [:].values { continuation.resume(returning: image) }
    }

    /// The tiles someone waits for now.
    package func waitingTiles() -> [TileAddress] { state.withLock { Array($0.waiters.keys) } }

    /// The pass ended: everyone still waiting learns it (a success hands them `nil`: their
    /// tile was not written by this build, so they read the table again).
    package func finish(_ outcome: Result<Void, ImageCacheError>) {
        let (waiting, ends) = state.withLock { s in
            s.outcome = outcome
            defer {
                s.waiters = [:]
                s.ends = [:]
            }
            return (s.waiters.values.flatMap(\.values), Array(s.ends.values))
        }
        for continuation in waiting {
            switch outcome {
            case .success: continuation.resume(returning: nil)
            case .failure(let error): continuation.resume(throwing: error)
            }
        }
        for continuation in ends { continuation.resume(with: outcome.mapError { $0 as any Error }) }
    }

    /// Waits for `tile`: its image when the pass writes it, `nil` when the pass already handed
    /// it over or ended without it (read the table), the build's error when it failed.
    package func wait(for tile: TileAddress) async throws(ImageCacheError) -> PixelImage? {
        let id = state.withLock { s -> UInt64 in
            s.nextWaiter += 1
            return s.nextWaiter
        }
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<PixelImage?, any Error>) in
                    let now = state.withLock { s -> Result<PixelImage?, any Error>? in
                        if Task.isCancelled { return .failure(CancellationError()) }
                        if s.produced.contains(tile) { return .success(nil) }
                        switch s.outcome {
                        case .success: return .success(nil)
                        case .failure(let error): return .failure(error)
                        case nil:
                            s.waiters[tile, default: [:]][id] = continuation
                            return nil
                        }
                    }
                    if let now { continuation.resume(with: now) }
                }
            } onCancel: {
                let continuation = state.withLock { s in s.waiters[tile]?.removeValue(forKey: id) }
                continuation?.resume(throwing: CancellationError())
            }
        } catch let error as ImageCacheError {
            throw error
        } catch {
            throw .cancelled(key: "tile \(tile)")
        }
    }

    /// Waits for the whole build; throws its error (or ``ImageCacheError/cancelled(key:)`` when
    /// the caller is cancelled: the build goes on).
    package func finished() async throws(ImageCacheError) {
        let id = state.withLock { s -> UInt64 in
            s.nextWaiter += 1
            return s.nextWaiter
        }
        do {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let now = state.withLock { s -> Result<Void, any Error>? in
                        if Task.isCancelled { return .failure(CancellationError()) }
                        if let outcome = s.outcome { return outcome.mapError { $0 as any Error } }
                        s.ends[id] = continuation
                        return nil
                    }
                    if let now { continuation.resume(with: now) }
                }
            } onCancel: {
                let continuation = state.withLock { s in s.ends.removeValue(forKey: id) }
                continuation?.resume(throwing: CancellationError())
            }
        } catch let error as ImageCacheError {
            throw error
        } catch {
            throw .cancelled(key: "pyramid build")
        }
    }
}
