import Logging
import Testing
import StrataTestSupport

@testable import Strata

/// Reading embedded profiles (multi-chunk JPEG, PNG colour chunks), the transform cache, and
/// profiles that must be ignored without failing a render.
@Suite("Colour: profiles")
struct ColourProfileTests {
    static let size = PixelSize(width: 320, height: 200)
    static let box = PixelSize(width: 100, height: 100)

    static func jpeg(tagged profile: [UInt8]?) throws -> [UInt8] {
        let plain = try ImageEncoder.encode(ColourFixtures.photo(size), as: .jpeg, quality: 95)
        guard let profile else { return plain }
        return EmbeddedProfiles.embed(try ColourProfile(bytes: profile), inJPEG: plain)
    }

    /// `profile` grown to `count` bytes (zeros after its tags, its size field updated).
    static func padded(_ profile: [UInt8], to count: Int) -> [UInt8] {
        var bytes = profile + [UInt8](repeating: 0, count: count - profile.count)
        let size = ColourFixtures.be32(UInt32(count))
        bytes.replaceSubrange(0..<4, with: size)
        return bytes
    }

    @Test("a profile over several APP2 chunks is read whole, in order, and applied")
    func multiChunkJPEG() throws {
        let small = ColourFixtures.profile(.swappedMatrix)
        let large = Self.padded(small, to: 200_000)  // four chunks
        let bytes = try Self.jpeg(tagged: large)
        var markers = 0
        for i in 0..<(bytes.count - 1) where bytes[i] == 0xFF && bytes[i + 1] == 0xE2 { markers += 1 }
        #expect(markers >= 4)
        #expect(try ImageDecoder().readHeader(bytes).colour.profile?.bytes == large)
        let rendered = try ImageRenderer().render(bytes, request: RenderRequest(box: Self.box))
        let reference = try ImageRenderer().render(try Self.jpeg(tagged: small), request: RenderRequest(box: Self.box))
        #expect(ColourFixtures.packedBytes(rendered) == ColourFixtures.packedBytes(reference))
    }

    /// Bad profiles: each renders as the untagged image and counts as ignored.
    static let badProfiles: [(String, [UInt8])] = {
        let good = ColourFixtures.profile(.swappedMatrix)
        var garbage = [UInt8](repeating: 0x5A, count: 600)
        garbage.replaceSubrange(0..<4, with: ColourFixtures.be32(600))
        return [
            ("truncated", Array(good[0..<(good.count / 2)])),
            ("shorter than a header", Array(good[0..<100])),
            ("not a profile", garbage),
            ("CMYK on RGB pixels", ColourFixtures.profile(.cmykLUT)),
            ("gray on RGB pixels", ColourFixtures.profile(.linearGray)),
            ("oversized", Self.padded(good, to: ColourProfile.maximumByteCount + 1)),
        ]
    }()

    @Test("bad profiles are ignored: the image renders as untagged, counted, never an error", arguments: 0..<6)
    func badProfile(index: Int) throws {
        let (name, profile) = Self.badProfiles[index]
        let chunks = (profile.count + EmbeddedProfiles.jpegChunkCapacity - 1) / EmbeddedProfiles.jpegChunkCapacity
        // Embedded as chunks directly: ColourProfile would refuse some of these.
        var bytes = try Self.jpeg(tagged: nil)
        var segments: [UInt8] = []
        for index in 0..<chunks {
            let slice = profile[
                (index * EmbeddedProfiles.jpegChunkCapacity)..<min(profile.count, (index + 1) * EmbeddedProfiles.jpegChunkCapacity)]
            let length = slice.count + 16
            segments += [0xFF, 0xE2, UInt8(length >> 8), UInt8(length & 0xFF)] + EmbeddedProfiles.jpegChunkName
            segments += [UInt8(index + 1), UInt8(chunks)] + slice
        }
        bytes.insert(contentsOf: segments, at: 2)
        let before = ColourStatistics.current.profilesIgnored
        let rendered = try ImageRenderer().render(bytes, request: RenderRequest(box: Self.box))
        let plain = try ImageRenderer().render(try Self.jpeg(tagged: nil), request: RenderRequest(box: Self.box))
        #expect(ColourFixtures.packedBytes(rendered) == ColourFixtures.packedBytes(plain), "\(name)")
        #expect(ColourStatistics.current.profilesIgnored > before, "\(name)")
        let header = try ImageDecoder().readHeader(bytes)
        #expect(ColourConversion.profileToEmbed(for: header.colour, grayscale: false, output: .original) == nil, "\(name)")
    }

    @Test("JPEG chunks with one missing are malformed, and ignored")
    func missingChunk() throws {
        let large = Self.padded(ColourFixtures.profile(.swappedMatrix), to: 150_000)
        var bytes = try Self.jpeg(tagged: large)
        // Drop the second APP2 segment.
        var seen = 0
        var i = 2
        while i + 4 < bytes.count {
            let length = Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
            if bytes[i + 1] == 0xE2 {
                seen += 1
                if seen == 2 {
                    bytes.removeSubrange(i..<(i + 2 + length))
                    break
                }
            }
            i += 2 + length
        }
        guard case .unusable(.malformedContainer) = try ImageDecoder().readHeader(bytes).colour else {
            Issue.record("a missing chunk was not reported as malformed")
            return
        }
        _ = try ImageRenderer().render(bytes, request: RenderRequest(box: Self.box))
    }

    @Test("an ignored profile is logged as a warning once per profile, and counted each time")
    func warning() throws {
        let store = CapturingLogHandler.Store()
        let transforms = ColourTransforms(logger: Logger(label: "test") { _ in CapturingLogHandler(store: store) })
        var garbage = [UInt8](repeating: 0x5A, count: 600)
        garbage.replaceSubrange(0..<4, with: ColourFixtures.be32(600))
        let colour = EmbeddedColour.profile(try ColourProfile(bytes: garbage))
        var image = ColourFixtures.photo(Self.size)
        let before = ColourStatistics.current.profilesIgnored
        for _ in 0..<2 {
            ColourConversion.convert(&image, from: colour, gray: false, output: .srgb, opaque: true, transforms: transforms)
        }
        #expect(ColourFixtures.packedBytes(image) == ColourFixtures.packedBytes(ColourFixtures.photo(Self.size)))
        #expect(ColourStatistics.current.profilesIgnored >= before + 2)
        let warnings = store.messages.withLock { $0.filter { $0.0 == .warning } }
        #expect(warnings.count == 1)
        #expect(warnings.first?.2["problem"] != nil)
    }

    @Test("transforms are built once per profile and layout, and at most `capacity` are kept")
    func transformCache() throws {
        let transforms = ColourTransforms(capacity: 2)
        let profiles = try [
            ColourFixtures.matrix(red: (0.64, 0.33), green: (0.21, 0.71), blue: (0.15, 0.06), gamma: 2.2),
            ColourFixtures.profile(.swappedMatrix), ColourFixtures.profile(.tintedLUT),
        ].map { try ColourProfile(bytes: $0) }
        guard case .transform(let first) = transforms.prepared(for: profiles[0], layout: .bgra),
            case .transform(let again) = transforms.prepared(for: profiles[0], layout: .bgra)
        else {
            Issue.record("no transform")
            return
        }
        #expect(first === again)
        _ = transforms.prepared(for: profiles[1], layout: .bgra)
        _ = transforms.prepared(for: profiles[2], layout: .bgra)
        #expect(transforms.count == 2)
        guard case .transform(let rebuilt) = transforms.prepared(for: profiles[0], layout: .bgra) else {
            Issue.record("no transform")
            return
        }
        #expect(rebuilt !== first)  // the oldest was dropped
    }

    @Test("one transform converts from many threads at once, each as one thread does")
    func concurrentUse() async throws {
        let profile = try ColourProfile(bytes: ColourFixtures.profile(.tintedLUT))
        var expected = ColourFixtures.photo(Self.size)
        ColourConversion.convert(&expected, from: .profile(profile), gray: false, output: .srgb, opaque: true)
        let reference = ColourFixtures.packedBytes(expected)
        let results = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var image = ColourFixtures.photo(Self.size)
                    ColourConversion.convert(&image, from: .profile(profile), gray: false, output: .srgb, opaque: true)
                    return ColourFixtures.packedBytes(image) == reference
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0 })
    }

    @Test("PNG: sRGB chunk → none; cHRM → a profile Little CMS made from its primaries; iCCP wins")
    func pngChunks() throws {
        let photo = ColourFixtures.photo(Self.size)
        func chrm(_ values: [Double]) -> (String, [UInt8]) {
            ("cHRM", values.flatMap { ColourFixtures.be32(UInt32($0 * 100_000)) })
        }
        let srgbPrimaries = [0.3127, 0.3290, 0.64, 0.33, 0.30, 0.60, 0.15, 0.06]
        let swapped = [0.3127, 0.3290, 0.30, 0.60, 0.64, 0.33, 0.15, 0.06]
        let decoder = ImageDecoder()
        #expect(try decoder.readHeader(ColourFixtures.png(photo, profile: nil, chunks: [("sRGB", [0])])).colour == .none)
        let plain = try ImageRenderer().render(ColourFixtures.png(photo, profile: nil), request: RenderRequest(box: Self.box))
        // sRGB's own primaries with no gAMA: sRGB in all but name.
        let same = try ImageRenderer().render(
            ColourFixtures.png(photo, profile: nil, chunks: [chrm(srgbPrimaries)]), request: RenderRequest(box: Self.box))
        #expect(ColourFixtures.psnr(same, plain) >= 45)
        let swappedPNG = ColourFixtures.png(photo, profile: nil, chunks: [chrm(swapped)])
        let made = try decoder.readHeader(swappedPNG).colour.profile
        #expect(made?.space == .rgb)
        let converted = try ImageRenderer().render(swappedPNG, request: RenderRequest(box: Self.box))
        #expect(ColourFixtures.psnr(converted, plain) < 30)
        let tagged = ColourFixtures.png(photo, profile: ColourFixtures.profile(.tintedLUT), chunks: [chrm(swapped)])
        #expect(try decoder.readHeader(tagged).colour.profile?.bytes == ColourFixtures.profile(.tintedLUT))
    }
}
