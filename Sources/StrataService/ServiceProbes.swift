/// Test seams: closures told of the service's costly steps, on the thread that runs them.
/// Production servers have none (each call site is one `nil` check).
package struct ServiceProbes: Sendable {
    /// An image target's parse (``ImageEndpoint/prepare(target:)``), with the target.
    package var targetParsed: (@Sendable (Substring) -> Void)?
    /// A scan of a variant's alpha bytes for format negotiation.
    package var transparencyScanned: (@Sendable () -> Void)?
    /// A deep health check (``DeepHealth``) starting.
    package var deepHealthChecked: (@Sendable () -> Void)?
    /// An encode about to be handed to the engine's threads, awaited in the task that every
    /// request for the encoding waits on (tests count encodes and hold one back).
    package var encodeStarting: (@Sendable () async -> Void)?
    /// An encode running, on the thread that runs it.
    package var encodeRunning: (@Sendable () -> Void)?

    package init(
        targetParsed: (@Sendable (Substring) -> Void)? = nil, transparencyScanned: (@Sendable () -> Void)? = nil,
        deepHealthChecked: (@Sendable () -> Void)? = nil, encodeStarting: (@Sendable () async -> Void)? = nil,
        encodeRunning: (@Sendable () -> Void)? = nil
    ) {
        self.targetParsed = targetParsed
        self.transparencyScanned = transparencyScanned
        self.deepHealthChecked = deepHealthChecked
        self.encodeStarting = encodeStarting
        self.encodeRunning = encodeRunning
    }
}
