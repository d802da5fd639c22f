import StrataBase
import StrataCodecs
import StrataTiers
/// The image tables' render: a request whose box is within tolerance of a configured table
/// format, and that no tier had, is drawn through the table cache, whose one source load fills
/// every format of the family (FastImageCache). (Table hits are the tier loop's, through
/// `ImageTableCache`'s ``CacheTier`` conformance.)
extension ImageCache {
    /// Draws `request` through the table cache: one source fetch and one decode, at the family's
    /// largest size, fill every format of the family; the requested format's entry comes back.
    package func tableFill(_ request: ImageRequest, format: ImageTableFormat, lane: FlightLane) async throws(ImageCacheError) -> CachedImage
    {
        guard let tables, source != nil else { throw .noSource(key: request.key.string) }
        let key = request.key.string
        let data = try await fetchOriginal(request.key, lane: lane)
        let version = SourceVersion(token: data.version)
        let bytes = data.bytes, mode = format.mode
        let entitySource = ImageTableSource(description: key) { [self] largest in
            try await onPool(request.key, lane: lane) { [self] () throws(ImageCacheError) -> PixelImage in
                try renderOriginal(bytes, key: request.key, request: RenderRequest(box: largest, mode: mode), lane: lane).image
            }
        }
        let entity = ImageTableEntity(
            id: request.key.entityID, sourceVersion: version.stamp, source: entitySource,
            process: { source, canvas in canvas.image = Self.fitted(source, into: canvas.format) })
        do {
            let image = try await tables.image(for: entity, formatName: format.name)
            let variant = ImageVariant(
                descriptor: VariantDescriptor(size: image.size, mode: format.mode, style: format.style), sourceVersion: version)
            writeBack(image, key: request.key, variant: variant)
            return CachedImage(image: image, variant: variant, tier: .source)
        } catch let error as ImageCacheError {
            throw error
        } catch is CancellationError {
            throw .cancelled(key: key)
        } catch let error as ImageTableError {
            // The tables cannot store it (full disk, read-only or replaced directory, every slot
            // held): the request is still served, rendered from the source without them.
            options.logger.warning(
                "image tables cannot store; rendering from the source without them",
                metadata: ["key": "\(key)", "format": "\(format.name)", "error": "\(error)"])
            return try await sourceRender(request, lane: lane)
        } catch {
            throw .tier(TierFailure(tier: .table, key: key, reason: "table \(format.name): \(error)"))
        }
    }

    /// `source` sized for a table format's canvas (its style; resampled to the format's box by
    /// its mode when the family's largest size differs).
    package static func fitted(_ source: PixelImage, into format: ImageTableFormat) -> PixelImage {
        var image = source
        if image.size != format.size {
            let plan = SizingPlan(source: image.size, box: format.size, mode: format.mode)
            if plan.output != image.size { image = Resampler().resize(image, box: format.size, mode: format.mode) }
        }
        return image.style == format.style ? image : PixelConversion.convert(image, to: format.style)
    }
}
