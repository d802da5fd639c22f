import Logging
#if OTLPExporter
import OTel
#endif
import ServiceLifecycle
import Strata
import StrataConfiguration
import Tracing

#if !OTLPExporter
/// `strata serve` built without the `OTLPExporter` trait (`make run`): no span exporter.
/// `tracing.enabled` is refused naming the key; the rest of the service is the same.
enum ServiceTracing {
    static func bootstrap(_ settings: TracingSettings, logger: Logger) throws(ConfigurationError) -> (any Service)? {
        guard settings.enabled else { return nil }
        throw ConfigurationError(
            key: "tracing.enabled", value: "true",
            reason: "this strata was built without its OTLP exporter (the OTLPExporter trait, left out by `make run`); "
                + "build it with `make release` or `swift build -c release --product strata` to export spans")
    }

    /// No bridge: no span ids to add to log lines.
    static var loggingMetadataProvider: Logger.MetadataProvider? { nil }
}
#else
/// `strata serve`'s tracing backend: swift-otel's tracer, exporting spans over OTLP/HTTP (no
/// gRPC) as the `tracing.*` keys say (`TracingSettings`), and its logging bridge (the current
/// trace and span ids in every log line's metadata).
///
/// Use ``bootstrap(_:logger:)`` once per process, before the server starts, and run the service
/// it returns in the same `ServiceGroup`, listed before the server: the group stops it after the
/// server, so the spans of the last requests are flushed. Cost when tracing is off: nothing is
/// bootstrapped (the tracer stays swift-distributed-tracing's no-op), and the service's and the
/// engine's span sites test one flag; when on, each span costs what swift-otel makes of it
/// (an unsampled span: no export).
enum ServiceTracing {
    /// swift-otel's configuration for `settings`: traces only (metrics and logs stay with
    /// Prometheus and swift-log), OTLP/HTTP to the endpoint, a parent-based trace-id ratio
    /// sampler, W3C Trace Context propagation. swift-otel's `OTEL_*` environment variables,
    /// when set, override these values.
    static func configuration(_ settings: TracingSettings, logger: Logger) throws(ConfigurationError) -> OTel.Configuration {
        var configuration = OTel.Configuration.default
        configuration.serviceName = settings.serviceName
        configuration.diagnosticLogger = .custom(logger)
        configuration.diagnosticLogLevel = .warning
        configuration.propagators = [.traceContext]
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        configuration.traces.enabled = true
        guard
            let sampler = OTel.Configuration.TracesConfiguration.SamplerConfiguration.parentBasedTraceIDRatio(ratio: settings.samplingRatio)
        else {
            throw ConfigurationError(key: "tracing.samplingRatio", value: "\(settings.samplingRatio)", reason: "must be within 0...1")
        }
        configuration.traces.sampler = sampler
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.endpoint = settings.endpoint
        configuration.traces.otlpExporter.protocol = settings.wireProtocol == .json ? .httpJSON : .httpProtobuf
        return configuration
    }

    /// Bootstraps swift-otel's tracer as the process's (`InstrumentationSystem`) when
    /// `settings.enabled`, and returns the service that exports its spans; `nil` (nothing done)
    /// when tracing is off. Call it once per process.
    static func bootstrap(_ settings: TracingSettings, logger: Logger) throws(ConfigurationError) -> (any Service)? {
        guard settings.enabled else { return nil }
        let configuration = try configuration(settings, logger: logger)
        do {
            let backend = try OTel.makeTracingBackend(configuration: configuration)
            InstrumentationSystem.bootstrap(backend.factory)
            logger.info(
                "tracing: spans exported over OTLP/HTTP",
                metadata: [
                    "endpoint": "\(settings.endpoint)", "protocol": "\(settings.wireProtocol.rawValue)",
                    "samplingRatio": "\(settings.samplingRatio)", "serviceName": "\(settings.serviceName)",
                ])
            return backend.service
        } catch {
            throw ConfigurationError(
                key: "tracing.endpoint", value: settings.endpoint, reason: "cannot start the OTLP/HTTP exporter: \(error)")
        }
    }

    /// swift-otel's logging bridge: adds `trace_id` and `span_id` of the task's current span to
    /// a log line's metadata (nothing without one). Give it to `LoggingSystem.bootstrap`.
    static var loggingMetadataProvider: Logger.MetadataProvider { OTel.makeLoggingMetadataProvider() }
}
#endif
