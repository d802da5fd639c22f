/// Test seams: closures told of the service's costly steps, on the thread that runs them.
/// Production servers have none (each call site is one `nil` check).
struct ServiceProbes: Sendable {
    /// An image target's parse (``ImageEndpoint/prepare(target:)``), with the target.
    var targetParsed: (@Sendable (Substring) -> Void)?
    /// A scan of a variant's alpha bytes for format negotiation.
    var transparencyScanned: (@Sendable () -> Void)?
    /// A deep health check (``DeepHealth``) starting.
    var deepHealthChecked: (@Sendable () -> Void)?

    init(
        targetParsed: (@Sendable (Substring) -> Void)? = nil, transparencyScanned: (@Sendable () -> Void)? = nil,
        deepHealthChecked: (@Sendable () -> Void)? = nil
    ) {
        self.targetParsed = targetParsed
        self.transparencyScanned = transparencyScanned
        self.deepHealthChecked = deepHealthChecked
    }
}
