import Strata

extension IIIFRendering {
    /// How an IIIF request (or an `/images` request of an original over `source.maxPixels`) is
    /// cut from a tile pyramid (originals above `iiif.tiledAbove`): the
    /// level at the request's scale — the smallest still at least the output's size, so tiles
    /// are only reduced — and the block of that level's tiles the region covers. A viewer's
    /// tile request (aligned to the advertised grid and scale factors) covers exactly one tile,
    /// served as it is; any other region is pasted from its tiles and resampled (Lanczos-3).
    /// Pure; cost: at most a copy of the covered tiles and one resample of the output's size.
    package struct TileCut: Sendable {
        package let geometry: PyramidGeometry
        package let level: Int
        /// The region in the level's pixels.
        package let rect: SourceRect
        package let output: PixelSize
        /// The covered tiles, row by row.
        package let tiles: [TileAddress]
        package let columns: ClosedRange<Int>
        package let rows: ClosedRange<Int>

        package init(geometry: PyramidGeometry, region: IIIFRect, output: PixelSize) {
            self.init(
                geometry: geometry,
                region: SourceRect(x: Double(region.x), y: Double(region.y), width: Double(region.width), height: Double(region.height)),
                output: output)
        }

        /// The cut of `region` (the original's pixels, fractional: a `/images` fill crop) at
        /// `output`.
        package init(geometry: PyramidGeometry, region: SourceRect, output: PixelSize) {
            self.geometry = geometry
            self.output = output
            let reduction = min(region.width / Double(output.width), region.height / Double(output.height))
            level = geometry.level(forReduction: reduction)
            let f = Double(1 << level), size = geometry.levels[level], t = geometry.tileSize
            rect = SourceRect(x: region.x / f, y: region.y / f, width: region.width / f, height: region.height / f)
            let x0 = max(0, min(size.width - 1, Int(rect.x.rounded(.down))))
            let y0 = max(0, min(size.height - 1, Int(rect.y.rounded(.down))))
            let x1 = max(x0 + 1, min(size.width, Int((rect.x + rect.width).rounded(.up))))
            let y1 = max(y0 + 1, min(size.height, Int((rect.y + rect.height).rounded(.up))))
            let columns = (x0 / t)...((x1 - 1) / t), rows = (y0 / t)...((y1 - 1) / t), level = self.level
            self.columns = columns
            self.rows = rows
            tiles = rows.flatMap { row in columns.map { TileAddress(level: level, column: $0, row: row) } }
        }

        /// The covered tiles of `key`'s pyramid at `version`: table hits at once, the others
        /// waited for while the build writes them. `admit` (load shedding) is asked first unless
        /// every tile is a hit. Also whether every tile was a hit.
        package func images(
            from pyramids: TilePyramids, key: CacheKey, version: SourceVersion, admit: (_ allCached: Bool) throws(ServiceError) -> Void
        ) async throws(ServiceError) -> (images: [PixelImage], allCached: Bool) {
            let cached = tiles.map { pyramids.cachedTile($0, of: key, version: version) }
            let allCached = cached.allSatisfy { $0 != nil }
            try admit(allCached)
            var images: [PixelImage] = []
            for (address, hit) in zip(tiles, cached) {
                if let hit {
                    images.append(hit)
                    continue
                }
                do {
                    images.append(try await pyramids.tile(address, of: key, geometry: geometry, version: version))
                } catch {
                    throw ServiceError(error)
                }
            }
            return (images, allCached)
        }

        /// What a reply built from these tiles was served as: the level's size, the version,
        /// from the table when every tile was a hit.
        package func served(_ images: [PixelImage], version: SourceVersion, allCached: Bool) -> CachedImage {
            CachedImage(
                image: images[0], variant: ImageVariant(descriptor: descriptor, sourceVersion: version), tier: allCached ? .table : .source)
        }

        /// The variant a reply built from these tiles is cut from: the level's size.
        package var descriptor: VariantDescriptor {
            VariantDescriptor(size: geometry.levels[level], mode: .fit, style: .bgra32Premultiplied)
        }

        /// The output from `images` (the images of ``tiles``, in order), mirrored, turned and
        /// made gray as asked. Call on the engine's threads.
        package func compose(_ images: [PixelImage], rotation: IIIFRotation, quality: IIIFQuality) -> PixelImage {
            IIIFRendering.finish(compose(images), rotation: rotation, quality: quality)
        }

        /// The output from `images` (the images of ``tiles``, in order). Call on the engine's
        /// threads.
        package func compose(_ images: [PixelImage]) -> PixelImage {
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
            return image
        }
    }
}
