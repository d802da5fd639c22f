/// Human units in configuration values: byte sizes (`512MiB`, `1.5 GB`, `4096`) and durations
/// (`30s`, `250ms`, `2m`, `1h`). Pure parsing, no allocation beyond the input's scalars.
public enum ConfigurationUnits {
    /// Bytes in `text`: a number with an optional unit, case-insensitive, spaces allowed between
    /// them: `B`; `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024; also `K`, `M`, `G`, `T`); `KB`,
    /// `MB`, `GB`, `TB` (powers of 1000). A fraction is allowed with a unit (`1.5GiB`). `nil`
    /// when `text` is not such a size, is negative or does not fit an `Int`.
    public static func bytes(_ text: String) -> Int? {
        let (number, unit) = split(text)
        guard let value = Double(number), value >= 0, value.isFinite else { return nil }
        let multipliers: [String: Double] = [
            "": 1, "b": 1,
            "k": 0x1p10, "kib": 0x1p10, "m": 0x1p20, "mib": 0x1p20, "g": 0x1p30, "gib": 0x1p30,
            "t": 0x1p40, "tib": 0x1p40,
            "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
        ]
        guard let multiplier = multipliers[unit.lowercased()] else { return nil }
        if unit.isEmpty && number.contains(".") { return nil }  // "1.5" bytes means nothing
        let bytes = (value * multiplier).rounded()
        guard bytes < 9.2e18 else { return nil }
        return Int(bytes)
    }

    /// The duration in `text`: a number with a unit `ns`, `us`/`µs`, `ms`, `s`, `m`/`min`, `h`,
    /// `d`; a plain number is seconds. `nil` when `text` is not such a duration or is negative.
    public static func duration(_ text: String) -> Duration? {
        let (number, unit) = split(text)
        guard let value = Double(number), value >= 0, value.isFinite else { return nil }
        let nanosecondsPerUnit: [String: Double] = [
            "": 1e9, "s": 1e9, "sec": 1e9, "ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "m": 60e9, "min": 60e9,
            "h": 3600e9, "d": 86_400e9,
        ]
        guard let scale = nanosecondsPerUnit[unit.lowercased()] else { return nil }
        let nanoseconds = value * scale
        guard nanoseconds < 9.2e18 else { return nil }
        return .nanoseconds(Int64(nanoseconds.rounded()))
    }

    /// `bytes` in the largest binary unit that divides it (`512MiB`), else in bytes.
    public static func format(bytes: Int) -> String {
        for (unit, size) in [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
        where bytes >= size && bytes % size == 0 {
            return "\(bytes / size)\(unit)"
        }
        return "\(bytes)"
    }

    /// `duration` in the largest unit that divides it (`30s`, `250ms`).
    public static func format(_ duration: Duration) -> String {
        let ns = duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
        for (unit, size) in [("h", Int64(3600e9)), ("m", Int64(60e9)), ("s", Int64(1e9)), ("ms", Int64(1e6)), ("us", Int64(1e3))]
        where ns >= size && ns % size == 0 {
            return "\(ns / size)\(unit)"
        }
        return "\(ns)ns"
    }

    /// The number and the unit of `text`, trimmed.
    private static func split(_ text: String) -> (number: Substring, unit: String) {
        let trimmed = String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        let end = trimmed.firstIndex { !($0.isASCII && ($0.isNumber || $0 == "." || $0 == "+" || $0 == "-")) } ?? trimmed.endIndex
        return (trimmed[..<end], String(trimmed[end...].drop(while: \.isWhitespace)))
    }
}
