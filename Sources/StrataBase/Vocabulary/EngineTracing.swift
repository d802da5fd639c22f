import Tracing

/// Whether an engine makes spans of its work below the memory tier (swift-distributed-tracing),
/// and whether they name keys.
///
/// When ``isEnabled`` is set, a request that leaves memory gets, under the task's current
/// `ServiceContext` (the caller's span), a span for each tier lookup below memory
/// (`strata.tier.lookup`), for its flight (`strata.flight`), each queue wait for the engine's
/// threads (`strata.lane.wait`), the source fetch (`strata.source.fetch`), the decode
/// (`strata.decode`), the resample (`strata.resample`) and a whole-image colour conversion
/// (`strata.colour`), through `InstrumentationSystem.tracer`. Their attributes identify the
/// image by its key's digest (`strata.key.digest`, the key's ``ImageEntityID``); the key itself
/// (`strata.key`) only when ``includesKeys`` is set, as keys may carry what should not leave the
/// service.
///
/// Use it with a tracer bootstrapped by the process (`strata serve`'s `tracing.*` keys bootstrap
/// swift-otel's). Cost when off (the default): one `Bool` test on the paths below memory and
/// none on a memory hit; when on, a span costs what the tracer makes of it.
public struct EngineTracing: Sendable, Equatable {
    /// Makes spans (default false).
    public var isEnabled: Bool
    /// Adds the raw key (`strata.key`) to spans beside its digest (default false).
    public var includesKeys: Bool

    public init(isEnabled: Bool = false, includesKeys: Bool = false) {
        self.isEnabled = isEnabled
        self.includesKeys = includesKeys
    }

    /// No spans.
    public static let off = EngineTracing()
}

/// Starting spans only when tracing is on: every helper takes the parent context, `nil` when
/// tracing is off, and then does nothing.
package enum Spans {
    /// A span under `parent`, or `nil` when `parent` is (tracing off).
    @inline(__always)
    package static func start(_ name: String, parent: ServiceContext?, kind: SpanKind = .internal) -> (any Span)? {
        guard let parent else { return nil }
        return InstrumentationSystem.tracer.startAnySpan(name, context: parent, ofKind: kind)
    }

    /// Runs `body` with `span`'s context as the task's current one (its children's parent);
    /// without a span, runs it as it is. An error ends the span as an error.
    package static func around<T: Sendable, E: Error>(
        _ span: (any Span)?, _ body: () async throws(E) -> T
    ) async throws(E) -> T {
        guard let span else { return try await body() }
        defer { span.end() }
        let result: Result<T, E> = await ServiceContext.$current.withValue(span.context) {
            do throws(E) {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        }
        if case .failure(let error) = result { span.recordError(error) }
        return try result.get()
    }
}

extension Spans {
    /// Runs `body` with `context` as the task's current one; without one (tracing off), runs it
    /// as it is.
    package static func within<T: Sendable, E: Error>(
        _ context: ServiceContext?, _ body: () async throws(E) -> T
    ) async throws(E) -> T {
        guard let context else { return try await body() }
        let result: Result<T, E> = await ServiceContext.$current.withValue(context) {
            do throws(E) {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}
