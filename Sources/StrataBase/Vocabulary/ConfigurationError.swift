/// A setting that is out of range or cannot be read: which key, the value given, what is
/// allowed, and where the value came from.
///
/// Every tier's `Configuration.validate()` throws it with the tier's own field name as `key`
/// (`costLimit`); `StrataConfiguration` (in the StrataConfiguration library) re-throws it with
/// the dotted key an operator writes (`memory.costLimit`) and the value's origin (a file, an
/// environment variable, the command line). Nothing is changed when it is thrown: fix the value
/// and try again. It stays in Strata because the tiers and the engine throw it.
public struct ConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The setting, e.g. `memory.costLimit` (or a tier's field name, `costLimit`).
    public var key: String
    /// The value as given, when there was one.
    public var value: String?
    /// What is wrong and what is allowed, e.g. "must be ≥ 0".
    public var reason: String
    /// Where the value came from (`StrataConfiguration.Origin`'s description), when known.
    public var origin: String?

    public init(key: String, value: String? = nil, reason: String, origin: String? = nil) {
        self.key = key
        self.value = value
        self.reason = reason
        self.origin = origin
    }

    public var description: String {
        var text = "configuration key \(key)"
        if let value { text += " = \(value.debugDescription)" }
        if let origin { text += " (from \(origin))" }
        return text + ": \(reason)"
    }

    /// The same error with `prefix` put before the key (`memory.` + `costLimit`).
    public func prefixed(_ prefix: String) -> ConfigurationError {
        var copy = self
        copy.key = prefix + key
        return copy
    }
}
