import StrataBase
import StrataTiers
/// What a pyramids' table holds, read from its files without opening it for writing (`strata
/// stats`): the pyramids (originals × colours), their tiles per level, and the bytes on disk.
///
/// Cost: one read of the table's metadata (64 bytes per slot) and 16 bytes per tile.
public struct PyramidInventory: Sendable, Hashable {
    /// The table's own inventory (state, problem, file sizes).
    public var table: ImageTableInventory
    /// Distinct pyramids with at least one tile.
    public var pyramids = 0
    /// Tiles per level (index 0: full resolution), over every pyramid.
    public var tilesPerLevel: [Int] = []

    /// Takes the inventory of the pyramids with `settings` in `directory`. Throws like
    /// ``/StrataTiers/ImageTableInventory/init(directory:format:collectingEntityIDs:)``.
    public init(directory: String, settings: TilePyramids.Settings) throws(ImageTableError) {
        table = try ImageTableInventory(
            directory: directory, format: TilePyramids.tableFormat(settings), collectingEntityIDs: true)
        var names = Set<UInt64>()
        for id in table.entityIDs {
            names.insert(id.high)
            let tile = Self.unpack(id.low ^ Self.mix(id.high))
            if tilesPerLevel.count <= tile.level { tilesPerLevel += Array(repeating: 0, count: tile.level + 1 - tilesPerLevel.count) }
            tilesPerLevel[tile.level] += 1
        }
        pyramids = names.count
        table.entityIDs = []
    }

    /// Tiles in the table.
    public var tiles: Int { table.entries }

    /// Level (6 bits), column and row (29 bits each) in one word.
    package static func pack(_ tile: TileAddress) -> UInt64 {
        UInt64(tile.level & 0x3F) << 58 | UInt64(tile.column & 0x1FFF_FFFF) << 29 | UInt64(tile.row & 0x1FFF_FFFF)
    }

    package static func unpack(_ word: UInt64) -> TileAddress {
        TileAddress(level: Int(word >> 58), column: Int(word >> 29 & 0x1FFF_FFFF), row: Int(word & 0x1FFF_FFFF))
    }

    /// SplitMix64's finaliser: spreads a pyramid's tiles over the table's hash of the low half.
    package static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
