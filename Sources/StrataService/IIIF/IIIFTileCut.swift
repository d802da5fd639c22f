import Strata

extension IIIFRendering {
    /// How an IIIF request is cut from a tile pyramid (originals above `iiif.tiledAbove`): the
    /// level at the request's scale — the smallest still at least the output's size, so tiles
    /// are only reduced — and the block of that level's tiles the region covers. A viewer's
    /// tile request (aligned to the advertised grid and scale factors) covers exactly one tile,
    /// served as it is; any other region is pasted from its tiles and resampled (Lanczos-3).
    /// Pure; cost: at most a copy of the covered tiles and one resample of the output's size.
    struct TileCut: Sendable {
        let geometry: PyramidGeometry
        let level: Int
        /// The region in the level's pixels.
        let rect: SourceRect
        let output: PixelSize
        /// The covered tiles, row by row.
        let tiles: [TileAddress]
        let columns: ClosedRange<Int>
        let rows: ClosedRange<Int>

        init(geometry: PyramidGeometry, region: IIIFRect, output: PixelSize) {
            self.geometry = geometry
            self.output = output
            let reduction = min(Double(region.width) / Double(output.width), Double(region.height) / Double(output.height))
            level = geometry.level(forReduction: reduction)
            let f = Double(1 << level), size = geometry.levels[level], t = geometry.tileSize
            rect = SourceRect(
                x: Double(region.x) / f, y: Double(region.y) / f, width: Double(region.width) / f, height: Double(region.height) / f)
            let x0 = max(0, min(size.width - 1, Int(rect.x.rounded(.down))))
            let y0 = max(0, min(size.height - 1, Int(rect.y.rounded(.down))))
            let x1 = max(x0 + 1, min(size.width, Int((rect.x + rect.width).rounded(.up))))
            let y1 = max(y0 + 1, min(size.height, Int((rect.y + rect.height).rounded(.up))))
            let columns = (x0 / t)...((x1 - 1) / t), rows = (y0 / t)...((y1 - 1) / t), level = self.level
            self.columns = columns
            self.rows = rows
            tiles = rows.flatMap { row in columns.map { TileAddress(level: level, column: $0, row: row) } }
        }

        /// The output from `images` (the images of ``tiles``, in order), mirrored, turned and
        /// made gray as asked. Call on the engine's threads.
        func compose(_ images: [PixelImage], rotation: IIIFRotation, quality: IIIFQuality) -> PixelImage {
            let t = geometry.tileSize
            let originX = columns.lowerBound * t, originY = rows.lowerBound * t
            var canvas: PixelImage
            if images.count == 1 {
                canvas = images[0]
            } else {
                let last = geometry.rect(of: tiles[tiles.count - 1])
                canvas = PixelImage(
                    uninitializedWidth: last.x + last.size.width - originX, height: last.y + last.size.height - originY,
                    style: .bgra32Premultiplied)
                let stride = canvas.bytesPerRow
                canvas.withUnsafeMutableBytes { destination in
                    for (address, image) in zip(tiles, images) {
                        let at = geometry.rect(of: address)
                        image.withUnsafeBytes { source in
                            for y in 0..<image.height {
                                (destination.baseAddress! + (at.y - originY + y) * stride + (at.x - originX) * 4).copyMemory(
                                    from: source.baseAddress! + y * image.bytesPerRow, byteCount: image.width * 4)
                            }
                        }
                    }
                }
            }
            let local = SourceRect(x: rect.x - Double(originX), y: rect.y - Double(originY), width: rect.width, height: rect.height)
            var image: PixelImage
            if local == SourceRect(x: 0, y: 0, width: Double(canvas.width), height: Double(canvas.height)), canvas.size == output {
                image = canvas
            } else {
                image = Resampler().resample(canvas, region: local, to: output)
            }
            return IIIFRendering.finish(image, rotation: rotation, quality: quality)
        }
    }
}
