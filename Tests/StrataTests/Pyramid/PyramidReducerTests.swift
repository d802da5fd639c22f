import Testing
@testable import Strata
import StrataTestSupport

/// The streaming reduction against a plain one: every level of a pyramid made in one pass,
/// strip by strip, equals the level made from the whole level above by the same 2×2 mean, and
/// tiles come with the sizes and order the geometry says, for sides that are not multiples of
/// the tile size or of two.
@Suite struct PyramidReducerTests {
    @Test(arguments: [
        PixelSize(width: 300, height: 200), PixelSize(width: 257, height: 131), PixelSize(width: 33, height: 1001),
        PixelSize(width: 64, height: 64), PixelSize(width: 1, height: 3),
    ])
    func everyLevelEqualsTheWholeLevelsReduction(size: PixelSize) throws {
        let image = ColourFixtures.photo(size)
        let geometry = PyramidGeometry(size: size, tileSize: 32)
        var levels = geometry.levels.map { PixelImage(width: $0.width, height: $0.height) }
        var seen: [TileAddress] = []
        let reducer = PyramidReducer(geometry: geometry) { tile, view in
            let rect = geometry.rect(of: tile)
            #expect(view.size == rect.size, "tile \(tile)")
            seen.append(tile)
            paste(view, into: &levels[tile.level], x: rect.x, y: rect.y)
        }
        // Rows in uneven bands, as a decoder hands them over.
        try image.withUnsafeBytes { raw in
            var row = 0, band = 1
            while row < size.height {
                let n = min(band, size.height - row)
                try reducer.write(rows: n, from: raw.baseAddress! + row * image.bytesPerRow, stride: image.bytesPerRow)
                row += n
                band = band % 7 + 3
            }
        }
        #expect(reducer.isComplete)
        #expect(Set(seen).count == geometry.tileCount && seen.count == geometry.tileCount)
        var expected = image
        for level in geometry.levels.indices {
            #expect(levels[level].hasSamePixels(as: expected), "level \(level) of \(size)")
            if level + 1 < geometry.levels.count { expected = halve(expected) }
        }
    }

    /// The pipelined pass (a strip decoded beside the reduction of the last) gives the same
    /// tiles, in the same order, as rows written one band at a time.
    @Test(arguments: [PixelSize(width: 300, height: 200), PixelSize(width: 77, height: 31), PixelSize(width: 129, height: 64)])
    func aPipelinedPassEqualsASerialOne(size: PixelSize) throws {
        let image = ColourFixtures.photo(size)
        let geometry = PyramidGeometry(size: size, tileSize: 32)
        func collect(_ feed: (PyramidReducer) throws -> Void) rethrows -> [(TileAddress, PixelImage)] {
            var tiles: [(TileAddress, PixelImage)] = []
            let reducer = PyramidReducer(geometry: geometry) { tile, view in tiles.append((tile, view.heapCopy())) }
            try feed(reducer)
            #expect(reducer.isComplete)
            return tiles
        }
        let serial = try collect { reducer in
            try image.withUnsafeBytes { raw in try reducer.write(rows: size.height, from: raw.baseAddress!, stride: image.bytesPerRow) }
        }
        let rows = Lock(0)
        let shared = image
        let pipelined = try collect { reducer in
            try reducer.pipelined(forkJoin: .dispatch) { destination, stride, count in
                let first = rows.withLock { r in
                    defer { r += count }
                    return r
                }
                shared.withUnsafeBytes { raw in
                    for y in 0..<count {
                        (destination + y * stride).copyMemory(
                            from: raw.baseAddress! + (first + y) * shared.bytesPerRow, byteCount: size.width * 4)
                    }
                }
            }
        }
        #expect(rows.withLock { $0 } == size.height)
        #expect(serial.map(\.0) == pipelined.map(\.0))
        for ((tile, a), (_, b)) in zip(serial, pipelined) { #expect(a.hasSamePixels(as: b), "tile \(tile)") }
    }

    /// A reducer of the coarser levels, fed a coarser level's rows (as a JPEG decoded at 1/8
    /// is), makes those levels' tiles with their own addresses; one of the finer levels stops
    /// at its last level.
    @Test func aReducerOfSomeLevels() throws {
        let size = PixelSize(width: 300, height: 200)
        let geometry = PyramidGeometry(size: size, tileSize: 32)
        var full: [TileAddress: PixelImage] = [:]
        let whole = PyramidReducer(geometry: geometry) { tile, view in full[tile] = view.heapCopy() }
        let image = ColourFixtures.photo(size)
        try image.withUnsafeBytes { try whole.write(rows: size.height, from: $0.baseAddress!, stride: image.bytesPerRow) }
        var level2 = image
        for _ in 0..<2 { level2 = halve(level2) }
        var coarse: [TileAddress: PixelImage] = [:]
        let reducer = PyramidReducer(geometry: geometry, levels: 2..<geometry.levels.count) { tile, view in coarse[tile] = view.heapCopy() }
        #expect(reducer.inputSize == level2.size)
        try level2.withUnsafeBytes { try reducer.write(rows: level2.height, from: $0.baseAddress!, stride: level2.bytesPerRow) }
        #expect(Set(coarse.keys) == Set(full.keys.filter { $0.level >= 2 }))
        for (tile, pixels) in coarse { #expect(pixels.hasSamePixels(as: full[tile]!), "tile \(tile)") }
        var fine: [TileAddress] = []
        let top = PyramidReducer(geometry: geometry, levels: 0..<2) { tile, _ in fine.append(tile) }
        try image.withUnsafeBytes { try top.write(rows: size.height, from: $0.baseAddress!, stride: image.bytesPerRow) }
        #expect(Set(fine) == Set(full.keys.filter { $0.level < 2 }))
    }

    /// A decode error ends a pipelined pass with that error.
    @Test func aDecodeErrorEndsAPipelinedPass() throws {
        let geometry = PyramidGeometry(size: PixelSize(width: 64, height: 200), tileSize: 32)
        let reducer = PyramidReducer(geometry: geometry) { _, _ in }
        let calls = Lock(0)
        #expect(throws: ImageDecodingError.self) {
            try reducer.pipelined(forkJoin: .dispatch) { _, _, _ in
                if calls.withLock({ c in
                    c += 1
                    return c
                }) == 3 {
                    throw ImageDecodingError(.truncated, format: .jpeg)
                }
            }
        }
        #expect(!reducer.isComplete)
    }

    @Test func geometryHalvesRoundingUpToOneTile() {
        let g = PyramidGeometry(size: PixelSize(width: 10240, height: 8000), tileSize: 512)
        #expect(g.levels.map(\.width) == [10240, 5120, 2560, 1280, 640, 320])
        #expect(g.levels.map(\.height) == [8000, 4000, 2000, 1000, 500, 250])
        #expect(g.grid(0) == (20, 16) && g.grid(5) == (1, 1))
        #expect(g.rect(of: TileAddress(level: 0, column: 19, row: 15)).size == PixelSize(width: 512, height: 320))
        let odd = PyramidGeometry(size: PixelSize(width: 1999, height: 1301), tileSize: 256)
        #expect(
            odd.levels == [
                PixelSize(width: 1999, height: 1301), PixelSize(width: 1000, height: 651), PixelSize(width: 500, height: 326),
                PixelSize(width: 250, height: 163),
            ])
        #expect(odd.tileCount == 8 * 6 + 4 * 3 + 2 * 2 + 1)
        #expect(!odd.contains(TileAddress(level: 1, column: 4, row: 0)) && odd.contains(TileAddress(level: 1, column: 3, row: 2)))
        // The level to cut from: never smaller than the output.
        #expect(g.level(forReduction: 1) == 0 && g.level(forReduction: 1.9) == 0 && g.level(forReduction: 2) == 1)
        #expect(g.level(forReduction: 7.99) == 2 && g.level(forReduction: 1000) == 5)
    }

    /// The plain reference: the whole image halved by 2×2 means (a lone last column or row
    /// averaged with itself), rounded as the kernel rounds.
    func halve(_ image: PixelImage) -> PixelImage {
        let w = (image.width + 1) / 2, h = (image.height + 1) / 2
        var out = PixelImage(width: w, height: h)
        let stride = out.bytesPerRow
        image.withUnsafeBytes { src in
            out.withUnsafeMutableBytes { dst in
                for y in 0..<h {
                    let y0 = 2 * y, y1 = min(2 * y + 1, image.height - 1)
                    for x in 0..<w {
                        let x0 = 2 * x, x1 = min(2 * x + 1, image.width - 1)
                        for c in 0..<4 {
                            func p(_ xx: Int, _ yy: Int) -> Int { Int(src[yy * image.bytesPerRow + xx * 4 + c]) }
                            let value: Int
                            if x0 == x1 {
                                // The kernel's odd edge: the two rows' pixels, (a + b + 1) / 2.
                                value = (p(x0, y0) + p(x0, y1) + 1) >> 1
                            } else {
                                value = (p(x0, y0) + p(x1, y0) + p(x0, y1) + p(x1, y1) + 2) >> 2
                            }
                            dst[y * stride + x * 4 + c] = UInt8(value)
                        }
                    }
                }
            }
        }
        return out
    }
}

/// Copies `tile` into `image` at (`x`, `y`).
func paste(_ tile: PixelImage, into image: inout PixelImage, x: Int, y: Int) {
    let stride = image.bytesPerRow
    tile.withUnsafeBytes { src in
        image.withUnsafeMutableBytes { dst in
            for row in 0..<tile.height {
                (dst.baseAddress! + (y + row) * stride + x * 4).copyMemory(
                    from: src.baseAddress! + row * tile.bytesPerRow, byteCount: tile.width * 4)
            }
        }
    }
}
