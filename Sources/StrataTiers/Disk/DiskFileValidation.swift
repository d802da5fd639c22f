import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The checks a hit makes on a file's bytes once it has read or mapped exactly the length its
/// name implies: the header (``DiskFileHeader/init(validating:)``), the variant against the
/// name, the full key, and (when asked) the pixel checksum. Pure, so that the fuzz harness in
/// `Fuzz/` runs the very code a hit runs.
package enum DiskFileValidation {
    package enum Outcome {
        case valid(DiskFileHeader)
        case invalid(DiskFileHeader.Problem)
        /// A valid file of another key with the same name digest.
        case otherKey
    }

    /// Checks `bytes`, the whole file named for `variant` of the stored key `key`.
    package static func validate(
        _ bytes: UnsafeRawBufferPointer, variant: VariantDescriptor, isWholeOriginal: Bool = false,
        key: UnsafeRawBufferPointer, verifyPixels: Bool
    ) -> Outcome {
        let header: DiskFileHeader
        do {
            header = try DiskFileHeader(validating: bytes)
        } catch {
            return .invalid(error)
        }
        guard header.variant == variant, header.isWholeOriginal == isWholeOriginal else {
            return .invalid(.badField("size, mode, style or whole-original flag differ from the name"))
        }
        guard header.keyLength == key.count,
            key.isEmpty || memcmp(DiskFileHeader.keyBytes(in: bytes, keyLength: key.count).baseAddress!, key.baseAddress!, key.count) == 0
        else { return .otherKey }
        // Always true for a hit (it read exactly the length the name and key imply).
        guard header.fileLength == bytes.count else {
            return .invalid(.lengthMismatch(expected: header.fileLength, actual: bytes.count))
        }
        if verifyPixels {
            let pixels = UnsafeRawBufferPointer(rebasing: bytes[header.pixelOffset...])
            guard XXHash.xxh3(pixels) == header.pixelChecksum else { return .invalid(.badPixelChecksum) }
        }
        return .valid(header)
    }
}
