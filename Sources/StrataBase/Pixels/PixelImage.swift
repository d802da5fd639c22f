/// A decoded image: `height` rows of `bytesPerRow` bytes (a multiple of 64) in a ``PixelStyle``.
///
/// A value type with copy-on-write storage: copying an image is O(1) and shares the bytes;
/// the first mutation through ``withUnsafeMutableBytes(_:)`` of a shared or read-only image
/// copies them. The storage is heap memory or a mapped region (a disk-tier file or a table
/// slot); mapped storage is released when the last copy goes away.
public struct PixelImage: Sendable {
    public let width: Int
    public let height: Int
    /// Distance in bytes between the starts of two rows (≥ `width × bytesPerPixel`).
    public let bytesPerRow: Int
    public let style: PixelStyle
    @usableFromInline package var storage: PixelStorage
    /// Offset of row 0 inside `storage` (a disk file keeps its header before the rows); 0 once
    /// a mutation has copied the rows into a fresh heap block.
    @usableFromInline package private(set) var offset: Int

    /// A zero-filled heap image with rows padded to ``PixelLayout/rowAlignment``.
    ///
    /// Cost: one aligned allocation of `bytesPerRow × height` bytes; the zero fill touches
    /// every page. Decoders that overwrite every pixel use
    /// ``init(uninitializedWidth:height:style:)`` instead.
    public init(width: Int, height: Int, style: PixelStyle = .default) {
        precondition(width > 0 && height > 0, "image sides must be positive")
        let stride = PixelLayout.bytesPerRow(width: width, style: style)
        self.init(
            width: width, height: height, bytesPerRow: stride, style: style,
            storage: PixelStorage(zeroedByteCount: stride * height), offset: 0)
    }

    /// A heap image whose bytes are not cleared: every row must be written before it is read.
    public init(uninitializedWidth width: Int, height: Int, style: PixelStyle = .default) {
        precondition(width > 0 && height > 0, "image sides must be positive")
        let stride = PixelLayout.bytesPerRow(width: width, style: style)
        self.init(
            width: width, height: height, bytesPerRow: stride, style: style,
            storage: PixelStorage(uninitializedByteCount: stride * height), offset: 0)
    }

    /// An image over existing storage. The rows must fit: `offset + bytesPerRow × (height − 1)
    /// + width × bytesPerPixel ≤ storage.count`.
    package init(
        width: Int, height: Int, bytesPerRow: Int, style: PixelStyle,
        storage: PixelStorage, offset: Int
    ) {
        precondition(width > 0 && height > 0 && bytesPerRow >= width * style.bytesPerPixel)
        precondition(
            offset >= 0 && offset + bytesPerRow * (height - 1) + width * style.bytesPerPixel <= storage.count,
            "pixel rows exceed their storage")
        self.width = width
        self.height = height
        self.bytesPerRow = bytesPerRow
        self.style = style
        self.storage = storage
        self.offset = offset
    }

    /// Width and height.
    @inlinable public var size: PixelSize { PixelSize(width: width, height: height) }

    /// Bytes the pixel rows span (`bytesPerRow × height`).
    @inlinable public var byteCount: Int { bytesPerRow * height }

    /// Where the bytes live (heap, file mapping, table slot).
    public var storageKind: PixelStorage.Kind { storage.kind }

    /// Whether the rows are 64-byte aligned in memory and in stride.
    public var isRowAligned: Bool {
        withUnsafeBytes { raw in
            (Int(bitPattern: raw.baseAddress) | bytesPerRow) & (PixelLayout.rowAlignment - 1) == 0
        }
    }

    /// Calls `body` with the pixel rows (`byteCount` bytes from row 0; the padding of the last
    /// row may be shorter when the storage ends early, so only `bytesPerRow × (height − 1) +
    /// width × bytesPerPixel` bytes are guaranteed). The pointer must not escape `body`.
    @inlinable
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let length = Swift.min(byteCount, storage.count - offset)
        return try body(UnsafeRawBufferPointer(start: storage.base + offset, count: length))
    }

    /// Calls `body` with writable pixel rows, first copying them if the storage is shared with
    /// another image or is read-only (copy-on-write). The pointer must not escape `body`.
    public mutating func withUnsafeMutableBytes<R, E: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
    ) throws(E) -> R {
        if !isKnownUniquelyReferenced(&storage) || !storage.isWritable {
            let copy = copiedRows()
            storage = copy
            offset = 0
            return try body(UnsafeMutableRawBufferPointer(start: copy.base, count: byteCount))
        }
        let length = Swift.min(byteCount, storage.count - offset)
        return try body(UnsafeMutableRawBufferPointer(start: storage.base + offset, count: length))
    }

    /// The same pixels in a fresh heap block of their own: for keeping an image that maps a
    /// file or pins a table slot without keeping the mapping or the pin. Cost: one copy.
    public func heapCopy() -> PixelImage {
        PixelImage(width: width, height: height, bytesPerRow: bytesPerRow, style: style, storage: copiedRows(), offset: 0)
    }

    /// Only the image's rows (not a file header before them, nor whatever follows them), at the
    /// start of a new heap block: the copy's row 0 is at offset 0, its padding zeroed.
    private func copiedRows() -> PixelStorage {
        let copy = PixelStorage(uninitializedByteCount: byteCount)
        let rowBytes = width * style.bytesPerPixel
        for y in 0..<height {
            let src = storage.base + offset + y * bytesPerRow
            let dst = copy.base + y * bytesPerRow
            dst.copyMemory(from: src, byteCount: rowBytes)
            if bytesPerRow > rowBytes { (dst + rowBytes).initializeMemory(as: UInt8.self, repeating: 0, count: bytesPerRow - rowBytes) }
        }
        return copy
    }

    /// The bytes of pixel (x, y) in the image's style, for tests and diagnostics (not a hot path).
    public func pixelBytes(x: Int, y: Int) -> [UInt8] {
        precondition(x >= 0 && x < width && y >= 0 && y < height)
        return withUnsafeBytes { raw in
            let start = y * bytesPerRow + x * style.bytesPerPixel
            return Array(raw[start..<start + style.bytesPerPixel])
        }
    }

    /// Whether two images have the same size, style and visible pixels (row padding ignored).
    public func hasSamePixels(as other: PixelImage) -> Bool {
        guard width == other.width, height == other.height, style == other.style else { return false }
        let rowBytes = width * style.bytesPerPixel
        return withUnsafeBytes { a in
            other.withUnsafeBytes { b in
                for y in 0..<height
                where memcmp(
                    a.baseAddress! + y * bytesPerRow,
                    b.baseAddress! + y * other.bytesPerRow, rowBytes) != 0
                {
                    return false
                }
                return true
            }
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
