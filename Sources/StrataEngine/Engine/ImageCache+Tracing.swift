import ServiceContextModule
import Tracing
import StrataBase

extension ImageCache {
    /// The parent of the engine's next span: the task's current context (a top-level one when
    /// none), or `nil` when tracing is off — one `Bool` test.
    @inline(__always)
    package var traceParent: ServiceContext? {
        options.tracing.isEnabled ? (ServiceContext.current ?? .topLevel) : nil
    }

    /// A span under `parent` naming `key` (its digest; the key too when configured).
    package func keySpan(_ name: String, key: CacheKey, parent: ServiceContext?) -> (any Span)? {
        guard let span = Spans.start(name, parent: parent) else { return nil }
        span.attributes["strata.key.digest"] = key.entityID.description
        if options.tracing.includesKeys { span.attributes["strata.key"] = key.string }
        return span
    }
}
