/// The rotation parameter of an IIIF image request: degrees clockwise, `0…360`, optionally
/// prefixed with `!` (mirror left to right first). Level 2 needs multiples of 90 only: other
/// angles are valid syntax the service does not implement (501). Pure.
public struct IIIFRotation: Sendable, Hashable {
    /// Mirror before rotating (`!`).
    public var mirrored: Bool
    /// Clockwise quarter turns, 0…3.
    public var quarterTurns: Int

    public init(mirrored: Bool = false, quarterTurns: Int = 0) {
        self.mirrored = mirrored
        self.quarterTurns = quarterTurns
    }

    /// Parses the rotation segment: malformed or out of 0…360 is a 400; a valid angle that is
    /// not a multiple of 90 is a 501.
    public init(parsing text: Substring) throws(ServiceError) {
        mirrored = text.hasPrefix("!")
        let number = mirrored ? text.dropFirst() : text
        guard let degrees = IIIFNumbers.decimal(number), degrees <= 360 else {
            throw ServiceError(
                .badRequest, "bad_rotation", "rotation \(String(text).debugDescription): expected degrees 0…360, optionally prefixed with !"
            )
        }
        guard degrees.truncatingRemainder(dividingBy: 90) == 0 else {
            throw ServiceError(
                .notImplemented, "rotation_not_supported", "rotation \(String(text).debugDescription): only multiples of 90° are supported")
        }
        quarterTurns = Int(degrees / 90) % 4
    }

    /// The canonical form: `!` when mirrored, then the angle as a whole number.
    public var canonical: String { (mirrored ? "!" : "") + String(quarterTurns * 90) }

    /// Whether the output's sides are swapped relative to the resampled region.
    public var swapsSides: Bool { quarterTurns % 2 == 1 }
}
