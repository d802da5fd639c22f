/// Test seams: closures told of the service's costly steps, on the thread that runs them.
/// Production servers have none (each call site is one `nil` check).
struct ServiceProbes: Sendable {
    /// A scan of a variant's alpha bytes for format negotiation.
    var transparencyScanned: (@Sendable () -> Void)?

    init(transparencyScanned: (@Sendable () -> Void)? = nil) {
        self.transparencyScanned = transparencyScanned
    }
}
