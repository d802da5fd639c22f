import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
import StrataTestSupport

/// `store(_:sourceVersion:streaming:draw:)`: entries drawn into private rows (kept from one
/// store to the next) and written with `pwrite`, read back like any other.
@Suite struct ImageTableStreamingTests {
    /// The entry's rows as the table file holds them, outside the content included.
    static func fileRows(_ table: ImageTable, _ id: ImageEntityID) throws -> [UInt8] {
        let slot = try #require(table.state.withLock { $0.index[id] })
        let fd = try FileDescriptor(open: table.tablePath, flags: O_RDONLY)
        let bytes = try fd.readAll()
        let offset = table.layout.entryOffset(slot)
        return Array(bytes[offset..<offset + table.layout.rowsBytes])
    }

    /// The entry's file rows hold `value` in its `size` and zeros around it (row padding and
    /// the rows below included), and it reads back at `size`.
    static func expectRows(_ table: ImageTable, _ id: ImageEntityID, _ size: PixelSize, _ value: UInt8) throws {
        let rows = try fileRows(table, id)
        let stride = table.layout.bytesPerRow
        for y in 0..<table.format.size.height {
            for x in 0..<stride {
                let inside = y < size.height && x < size.width * 4
                if rows[y * stride + x] != (inside ? value : 0) {
                    Issue.record("entry \(id) byte (\(x), \(y)) is \(rows[y * stride + x])")
                    return
                }
            }
        }
        #expect(table.image(for: id, sourceVersion: 1)?.size == size)
    }

    @Test func streamedEntriesAreReadBackAndSmallerOnesLeaveNoEarlierBytes() throws {
        let dir = TempDirectory()
        let format = testFormat(size: PixelSize(width: 20, height: 12))
        let table = try ImageTable(directory: dir.path, format: format)
        // A full entry of 0xFF bytes, then smaller ones drawn in place and replaced by an image
        // of their own: the rows the first one filled must not reach the file again.
        let full = ImageEntityID(hashing: "full"), inPlace = ImageEntityID(hashing: "in place")
        let replaced = ImageEntityID(hashing: "replaced")
        try table.store(full, sourceVersion: 1, streaming: true) { canvas in
            canvas.image.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0xFF) }
        }
        try table.store(inPlace, sourceVersion: 1, streaming: true) { canvas in
            let stride = canvas.image.bytesPerRow
            canvas.image.withUnsafeMutableBytes { raw in
                for y in 0..<5 { (raw.baseAddress! + y * stride).initializeMemory(as: UInt8.self, repeating: 7, count: 8 * 4) }
            }
            canvas.contentSize = PixelSize(width: 8, height: 5)
        }
        var small = PixelImage(width: 3, height: 2)
        small.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 9) }
        try table.store(replaced, sourceVersion: 1, streaming: true) { canvas in canvas.image = small }

        try Self.expectRows(table, full, format.size, 0xFF)
        try Self.expectRows(table, inPlace, PixelSize(width: 8, height: 5), 7)
        try Self.expectRows(table, replaced, PixelSize(width: 3, height: 2), 9)
        // Reopened: the trailers vouch for what the pwrites put there.
        let reopened = try ImageTable(directory: dir.path, format: format)
        #expect(reopened.count == 3)
        #expect(reopened.image(for: full, sourceVersion: 1)?.size == format.size)
    }

    /// A draw that keeps its canvas (against the rule) does not see the next store's pixels:
    /// the kept rows are copied before they are drawn on again.
    @Test func aCanvasKeptByItsDrawIsNotOverwrittenByTheNextStore() throws {
        let dir = TempDirectory()
        let table = try ImageTable(directory: dir.path, format: testFormat())
        var kept: PixelImage?
        try table.store(ImageEntityID(hashing: "a"), sourceVersion: 1, streaming: true) { canvas in
            canvas.image.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 1) }
            kept = canvas.image
        }
        try table.store(ImageEntityID(hashing: "b"), sourceVersion: 1, streaming: true) { canvas in
            canvas.image.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 2) }
        }
        let first = try #require(kept)
        let stride = first.bytesPerRow, used = first.width * 4
        #expect(
            first.withUnsafeBytes { raw in (0..<first.height).allSatisfy { y in raw[y * stride..<y * stride + used].allSatisfy { $0 == 1 } }
            })
        try Self.expectRows(table, ImageEntityID(hashing: "b"), table.format.size, 2)
    }
}
