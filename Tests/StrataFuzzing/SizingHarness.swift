import Strata

/// The size arithmetic on hostile sizes: ``SizingPlan`` (every positive size, as a request's
/// box can be anything a client sends), the renderer's decode plan and the decoder's
/// shrink-on-load sizes (for sizes a decoder can report, up to 2³¹), and ``VariantMatcher``
/// over hostile candidates and tolerances. Checks the documented results, never traps.
///
/// The `FuzzSizing` harness (`FuzzHarness.sizing`).
package enum SizingHarness {
    struct Reader {
        var bytes: UnsafeRawBufferPointer
        var position = 0

        mutating func byte() -> UInt8 {
            guard position < bytes.count else { return 0 }
            defer { position += 1 }
            return bytes[position]
        }

        mutating func uint64() -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(byte()) << (8 * $1) } }

        /// A positive side no larger than `limit`: often an edge (1, 2¹⁶, 2³¹, 2⁵³, the limit),
        /// otherwise any value.
        mutating func side(limit: Int) -> Int {
            let edges = [1, 2, 3, 7, 100, 65_535, 65_536, 100_000, 1 << 20, 1 << 31 - 1, 1 << 31, 1 << 32, 1 << 53, 1 << 53 + 1, 1 << 62]
            let pick = byte()
            if pick < 128 {
                let edge = edges[Int(pick) % edges.count]
                return min(limit, Int(pick) % 3 == 0 ? edge : edge - Int(pick % 2)).clamped(1, limit)
            }
            return Int(uint64() % UInt64(limit)) + 1
        }

        mutating func size(limit: Int) -> PixelSize { PixelSize(width: side(limit: limit), height: side(limit: limit)) }
    }

    /// `precondition` whose message survives a release build.
    static func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
        if !condition { fatalError(message()) }
    }

    nonisolated(unsafe) static let decoder = ImageDecoder()

    static func run(_ bytes: UnsafeRawBufferPointer) {
        var input = Reader(bytes: bytes)
        let mode: ContentMode = input.byte() % 2 == 0 ? .fit : .fill
        let allowUpscale = input.byte() % 2 == 0

        // SizingPlan over every positive size.
        let source = input.size(limit: Int.max), box = input.size(limit: Int.max)
        let plan = SizingPlan(source: source, box: box, mode: mode, allowUpscale: allowUpscale)
        require(plan.output.width >= 1 && plan.output.height >= 1, "an empty output")
        switch mode {
        case .fit:
            if allowUpscale || plan.output != source {
                require(plan.output.width <= box.width && plan.output.height <= box.height, "fit beyond the box")
            }
            if !allowUpscale { require(plan.output.width <= source.width && plan.output.height <= source.height, "fit upscaled") }
        case .fill:
            if allowUpscale { require(plan.output == box, "fill with upscaling is not the box") }
            require(plan.output.width <= box.width && plan.output.height <= box.height, "fill beyond the box")
        }
        let rect = plan.sourceRect
        require(
            rect.x >= 0 && rect.y >= 0 && rect.width > 0 && rect.height > 0,
            "an empty or negative source rectangle: \(rect) for \(source) into \(box) \(mode) upscale \(allowUpscale)")
        require(
            rect.x + rect.width <= Double(source.width) * (1 + 1e-12) && rect.y + rect.height <= Double(source.height) * (1 + 1e-12),
            "the source rectangle \(rect) leaves the source \(source)")

        // The renderer's decode plan and the decoder's sizes, for sizes a decoder reports.
        let formats: [ImageFormat] = [.jpeg, .webp, .png]
        let header = ImageHeader(
            format: formats[Int(input.byte()) % 3], codedSize: input.size(limit: 1 << 31), orientation: Int(input.byte() % 9),
            isAnimated: input.byte() % 8 == 0)
        let renderer = ImageRenderer(decodeHeadroom: [1.0, 2.0, 4.0][Int(input.byte()) % 3])
        let request = RenderRequest(box: box, mode: mode, allowUpscale: allowUpscale)
        let (sizing, minimum) = renderer.plan(for: header, request: request)
        require(sizing.output.width >= 1 && sizing.output.height >= 1)
        require(minimum.width >= 1 && minimum.height >= 1, "an empty decode")
        require(minimum.width <= header.size.width && minimum.height <= header.size.height, "decode above full size")
        let decoded = decoder.decodedSize(for: header, minimumSize: minimum)
        require(decoded.width <= header.size.width && decoded.height <= header.size.height, "decoded above full size")
        require(decoded.width >= 1 && decoded.height >= 1)
        if header.format == .jpeg {
            require(decoded.width >= minimum.width && decoded.height >= minimum.height, "shrink-on-load below the minimum")
        }

        // VariantMatcher: the best match matches, and no candidate beats it.
        let tolerance = [0, 0.05, 0.2, 1, 1e300, Double(input.byte()) / 64][Int(input.byte()) % 6]
        let query = SizeQuery(box: input.size(limit: Int.max), mode: mode, tolerance: tolerance)
        var candidates: [VariantDescriptor] = []
        for _ in 0..<(Int(input.byte()) % 8) {
            candidates.append(VariantDescriptor(size: input.size(limit: Int.max), mode: input.byte() % 4 == 0 ? .fill : mode))
        }
        if let best = VariantMatcher.bestMatch(in: candidates, for: query) {
            require(VariantMatcher.matches(best, query), "the best match does not match")
            let q = VariantMatcher.fillRatio(of: best, for: query)!
            require(q.isFinite && q > 0)
            for other in candidates where VariantMatcher.matches(other, query) {
                require(
                    !VariantMatcher.isBetter(VariantMatcher.fillRatio(of: other, for: query)!, than: q), "a better match was passed over")
            }
        } else {
            require(!candidates.contains { VariantMatcher.matches($0, query) }, "a match was missed")
        }
    }
}

extension Int {
    fileprivate func clamped(_ low: Int, _ high: Int) -> Int { Swift.max(low, Swift.min(high, self)) }
}
