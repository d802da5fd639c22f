import StrataBase
/// The shape of an image's tile pyramid: level 0 is the image, level n+1 halves level n
/// (rounding up, as IIIF viewers size a scale factor's level: `⌈width / 2ⁿ⌉`), down to the first
/// level that fits one tile; each level is cut into `tileSize` squares from its top-left, the
/// last column and row smaller where the level's sides are not multiples of the tile size.
///
/// Pure arithmetic; use it to map a request's region and scale to tiles.
public struct PyramidGeometry: Sendable, Hashable {
    /// The image (level 0).
    public let size: PixelSize
    /// Side of the square tiles (even, so that a tile row of one level reduces into whole rows
    /// of the next).
    public let tileSize: Int
    /// The size of each level, level 0 first.
    public let levels: [PixelSize]

    public init(size: PixelSize, tileSize: Int) {
        precondition(size.width > 0 && size.height > 0 && tileSize >= 2 && tileSize % 2 == 0, "PyramidGeometry: bad size or tile")
        self.size = size
        self.tileSize = tileSize
        var levels = [size]
        while let last = levels.last, last.width > tileSize || last.height > tileSize {
            levels.append(PixelSize(width: (last.width + 1) / 2, height: (last.height + 1) / 2))
        }
        self.levels = levels
    }

    /// Columns and rows of tiles at `level`.
    public func grid(_ level: Int) -> (columns: Int, rows: Int) {
        let s = levels[level]
        return ((s.width + tileSize - 1) / tileSize, (s.height + tileSize - 1) / tileSize)
    }

    /// Whether `tile` is one of this pyramid's tiles.
    public func contains(_ tile: TileAddress) -> Bool {
        guard tile.level >= 0, tile.level < levels.count, tile.column >= 0, tile.row >= 0 else { return false }
        let g = grid(tile.level)
        return tile.column < g.columns && tile.row < g.rows
    }

    /// The pixels of `tile` in its level: origin and size (edge tiles are smaller).
    public func rect(of tile: TileAddress) -> (x: Int, y: Int, size: PixelSize) {
        let s = levels[tile.level]
        let x = tile.column * tileSize, y = tile.row * tileSize
        return (x, y, PixelSize(width: min(tileSize, s.width - x), height: min(tileSize, s.height - y)))
    }

    /// Every tile of the pyramid.
    public var tileCount: Int {
        levels.indices.reduce(0) { n, l in
            let g = grid(l)
            return n + g.columns * g.rows
        }
    }

    /// The level to cut an output from when it shows `reduction` source pixels per output
    /// pixel (on its less reduced side): the smallest level still at least as large as the
    /// output (2ⁿ ≤ reduction), so tiles are only ever reduced, never enlarged.
    public func level(forReduction reduction: Double) -> Int {
        var level = 0
        while level + 1 < levels.count, Double(1 << (level + 1)) <= reduction * (1 + 1e-9) { level += 1 }
        return level
    }
}

/// One tile of a pyramid: its level (0 = full resolution) and its column and row there.
public struct TileAddress: Sendable, Hashable, CustomStringConvertible {
    public var level: Int
    public var column: Int
    public var row: Int

    public init(level: Int, column: Int, row: Int) {
        self.level = level
        self.column = column
        self.row = row
    }

    public var description: String { "\(level)/\(column)/\(row)" }
}
