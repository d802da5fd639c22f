import Logging
import Strata

/// A log handler that keeps every message (with its metadata) for the test to read.
struct CapturingLogHandler: LogHandler {
    final class Store: Sendable {
        let messages = Lock<[(Logger.Level, String, Logger.Metadata)]>([])
    }
    let store: Store
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        store.messages.withLock { $0.append((event.level, event.message.description, event.metadata ?? [:])) }
    }
}
