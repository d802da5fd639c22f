import Logging
import Strata

/// A log handler that keeps every message (with its metadata) for the test to read.
package struct CapturingLogHandler: LogHandler {
    package final class Store: Sendable {
        package let messages = Lock<[(Logger.Level, String, Logger.Metadata)]>([])
        package init() {}
    }
    package let store: Store
    package var metadata: Logger.Metadata = [:]
    package var logLevel: Logger.Level = .trace

    package init(store: Store) { self.store = store }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        store.messages.withLock { $0.append((event.level, event.message.description, event.metadata ?? [:])) }
    }
}
