import Strata

extension Fuzzing {
    /// Disk-tier file names and files, as a directory scan and a hit see them. The first byte
    /// picks the case:
    /// - names: ``DiskFileName`` and temporary names parse only canonical names, which print
    ///   back to the same bytes;
    /// - raw files: arbitrary bytes of exactly the length a name implies go through the hit's
    ///   checks (``DiskFileValidation``); what passes agrees with the name and the key;
    /// - encoded files: a file the tier's encoder wrote validates with the image's pixels, and
    ///   after one to four bytes are changed it no longer does.
    package static func diskFile(_ data: UnsafeRawBufferPointer) {
        var input = FuzzInput(data)
        switch input.byte() % 3 {
        case 0: diskNames(input.take(data.count))
        case 1: rawDiskFile(&input)
        default: encodedDiskFile(&input)
        }
    }

    private static func diskNames(_ bytes: UnsafeRawBufferPointer) {
        let typed = bytes.assumingMemoryBound(to: UInt8.self)
        if let name = DiskFileName(bytes: typed) {
            Fuzzing.require(name.string.utf8.elementsEqual(typed), "a parsed name prints back to the same bytes")
            Fuzzing.require(DiskFileName(name.string) == name)
            name.withCString { Fuzzing.require(String(cString: $0) == name.string, "the C-string form matches") }
            let charge = DiskIndexEntry(name).chargedBytes
            Fuzzing.require(charge > 0 && charge <= DiskFileName.maximumPixelCount * 4 + DiskIndex.headerAllowance)
        }
        let text = String(decoding: bytes, as: UTF8.self)
        if let temporary = DiskTemporaryName(text) {
            Fuzzing.require(DiskTemporaryName(temporary.string) == temporary, "a parsed temporary name prints back")
        }
    }

    private static func variant(_ input: inout FuzzInput, maximumSide: Int) -> VariantDescriptor {
        VariantDescriptor(
            size: PixelSize(width: 1 + input.below(maximumSide), height: 1 + input.below(maximumSide)),
            mode: ContentMode(rawValue: UInt8(input.below(2)))!, style: PixelStyle(rawValue: UInt8(input.below(4)))!)
    }

    private static func rawDiskFile(_ input: inout FuzzInput) {
        let variant = variant(&input, maximumSide: 48)
        let whole = variant.mode == .fit && input.below(2) == 1
        let key = Array(input.take(input.below(40)))
        // A hit reads exactly the length that the name and the key imply.
        let length = DiskFileHeader.fileLength(of: variant, keyLength: key.count)
        var file = Array(input.take(length))
        file += [UInt8](repeating: 0, count: length - file.count)
        let outcome = file.withUnsafeBytes { bytes in
            key.withUnsafeBytes {
                DiskFileValidation.validate(bytes, variant: variant, isWholeOriginal: whole, key: $0, verifyPixels: true)
            }
        }
        if case .valid(let header) = outcome {
            Fuzzing.require(header.variant == variant && header.keyLength == key.count && header.fileLength == file.count)
            Fuzzing.require(header.isWholeOriginal == whole, "a valid file agrees with its name's whole-original flag")
        }
    }

    private static func encodedDiskFile(_ input: inout FuzzInput) {
        let variant = variant(&input, maximumSide: 24)
        let whole = variant.mode == .fit && input.below(2) == 1
        let key = String(decoding: input.take(input.below(80)), as: UTF8.self)
        let sourceVersion = input.uint64()
        var image = PixelImage(width: variant.size.width, height: variant.size.height, style: variant.style)
        let seed = input.byte()
        image.withUnsafeMutableBytes { raw in
            for i in raw.indices { raw[i] = UInt8(truncatingIfNeeded: i &* 31 &+ Int(seed)) }
        }
        var file = DiskFileEncoder.encode(image, key: key, mode: variant.mode, isWholeOriginal: whole, sourceVersion: sourceVersion)
        let keyBytes = Array(key.utf8)
        func validate(_ file: [UInt8]) -> DiskFileValidation.Outcome {
            file.withUnsafeBytes { bytes in
                keyBytes.withUnsafeBytes {
                    DiskFileValidation.validate(bytes, variant: variant, isWholeOriginal: whole, key: $0, verifyPixels: true)
                }
            }
        }
        guard case .valid(let header) = validate(file) else { Fuzzing.fail("a freshly encoded file does not validate") }
        Fuzzing.require(header.sourceVersion == sourceVersion && header.variant == variant && header.isWholeOriginal == whole)
        let pixelsMatch = file.withUnsafeBytes { bytes in
            image.withUnsafeBytes { rows in
                (0..<image.height).allSatisfy { y in
                    let width = image.width * image.style.bytesPerPixel
                    return bytes[(header.pixelOffset + y * header.bytesPerRow)...].prefix(width)
                        .elementsEqual(rows[(y * image.bytesPerRow)...].prefix(width))
                }
            }
        }
        Fuzzing.require(pixelsMatch, "the encoded pixels are the image's")
        let original = file
        for _ in 0..<(1 + input.below(4)) {
            file[input.below(file.count)] = input.byte()
        }
        if file != original, case .valid = validate(file) {
            Fuzzing.fail("a changed file still validates")
        }
    }
}
