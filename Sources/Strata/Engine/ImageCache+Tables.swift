/// The image tables in the chain: a request whose box is within tolerance of a configured
/// table format is answered from that format's table, and — on a miss — drawn through the table
/// cache, whose one source load fills every format of the family (FastImageCache).
extension ImageCache {
    /// The best configured table format for `query` (``VariantMatcher``'s rule), if any.
    func tableFormat(for query: SizeQuery) -> ImageTableFormat? {
        guard let tables, options.useTablesForMatchingRequests else { return nil }
        return VariantMatcher.bestMatch(in: tables.formats, for: query, descriptor: \.descriptor)
    }

    /// A hit in `format`'s table (``tableFormat(for:)``), whatever source version it was drawn from (freshness is the engine's
    /// business: ``Options/revalidateAfter``), promoted to memory as a heap copy — the memory
    /// tier never pins table slots, so holding images there cannot fill a table.
    func tableHit(_ request: ImageRequest, format: ImageTableFormat, lane: FlightLane) async throws(ImageCacheError) -> CachedImage? {
        guard let tables, let table = try? tables.table(named: format.name) else { return nil }
        let id = request.key.entityID
        let found: (image: PixelImage, sourceVersion: UInt64)?
        switch table.read(id, sourceVersion: nil, maintain: false) {
        case .hit(let image, let version): found = (image, version)
        case .miss: found = nil
        case .needsMaintenance:
            // Another process changed the table: re-reading its metadata is O(slots), off the
            // cooperative pool.
            found = try await onPool(request.key, lane: lane) { _ in table.entry(for: id) }
        }
        guard let found else {
            metrics.misses[.table]?.increment()
            return nil
        }
        let variant = ImageVariant(
            descriptor: VariantDescriptor(size: found.image.size, mode: format.mode, style: format.style),
            sourceVersion: SourceVersion(stamp: found.sourceVersion))
        if request.exactSize, variant.descriptor.size != request.box, !Self.canResample(variant, to: request) { return nil }
        memory?.insert(found.image.heapCopy(), forKey: request.key, variant: variant)
        return CachedImage(image: found.image, variant: variant, tier: .table)
    }

    /// Draws `request` through the table cache: one source fetch and one decode, at the family's
    /// largest size, fill every format of the family; the requested format's entry comes back.
    func tableFill(_ request: ImageRequest, format: ImageTableFormat, lane: FlightLane) async throws(ImageCacheError) -> CachedImage {
        guard let tables, let source else { throw .noSource(key: request.key.string) }
        let key = request.key.string
        let data = try await fetchOriginal(request.key, from: source)
        let version = SourceVersion(token: data.version)
        let bytes = data.bytes, mode = format.mode
        let entitySource = ImageTableSource(description: key) { [self] largest in
            counters.sourceDecodes.add(1, ordering: .relaxed)
            let ticket = lane.ticket()
            let renderStart = ContinuousClock.now
            defer { metrics.render.recordInterval(since: renderStart) }
            return try await pool.run(lane: ticket.lane, ticket: ticket) { (renderer) throws(ImageDecodingError) -> PixelImage in
                try renderer.render(bytes, request: RenderRequest(box: largest, mode: mode))
            }
        }
        let entity = ImageTableEntity(
            id: request.key.entityID, sourceVersion: version.stamp, source: entitySource,
            process: { source, canvas in canvas.image = Self.fitted(source, into: canvas.format) })
        do {
            let image = try await tables.image(for: entity, formatName: format.name)
            let variant = ImageVariant(
                descriptor: VariantDescriptor(size: image.size, mode: format.mode, style: format.style), sourceVersion: version)
            memory?.insert(image.heapCopy(), forKey: request.key, variant: variant)
            disk?.store(image, key: request.key, variant: variant)
            return CachedImage(image: image, variant: variant, tier: .source)
        } catch let error as BlockingPoolError<ImageDecodingError> {
            switch error {
            case .failed(let decoding): throw .decoding(key: key, decoding)
            case .cancelled: throw .cancelled(key: key)
            case .shutDown: throw .shutDown
            }
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
            throw .source(SourceError(key: key, reason: .failed("image tables: \(error)")))
        }
    }

    /// `source` sized for a table format's canvas (its style; resampled to the format's box by
    /// its mode when the family's largest size differs).
    static func fitted(_ source: PixelImage, into format: ImageTableFormat) -> PixelImage {
        var image = source
        if image.size != format.size {
            let plan = SizingPlan(source: image.size, box: format.size, mode: format.mode)
            if plan.output != image.size { image = Resampler().resize(image, box: format.size, mode: format.mode) }
        }
        return image.style == format.style ? image : PixelConversion.convert(image, to: format.style)
    }
}
