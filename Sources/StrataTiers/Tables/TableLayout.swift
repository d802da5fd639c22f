import StrataBase
/// Byte layout of one table file, derived from its format.
///
/// ```
/// [header page][entry 0][entry 1]…[entry maximumCount-1]
/// entry = rows (height × bytesPerRow, 64-byte aligned) + 64-byte trailer, rounded up to the page size
/// ```
///
/// Entries are mapped in chunks of about ``chunkBytes`` (whole entries), on first use.
package struct TableLayout: Sendable, Hashable {
    package let width: Int
    package let height: Int
    package let style: PixelStyle
    package let mode: ContentMode
    package let bytesPerRow: Int
    package let rowsBytes: Int
    /// Offset of the ``EntryTrailerView`` in an entry.
    package let trailerOffset: Int
    package let entryLength: Int
    package let maximumCount: Int
    package let pageSize: Int
    package let entriesOffset: Int
    package let entriesPerChunk: Int

    package static let chunkBytes = 4 << 20

    package init(format: ImageTableFormat) {
        let page = MappedRegion.pageSize
        width = format.size.width
        height = format.size.height
        style = format.style
        mode = format.mode
        bytesPerRow = PixelLayout.bytesPerRow(width: width, style: style)
        rowsBytes = bytesPerRow * height
        trailerOffset = rowsBytes  // rowsBytes is a multiple of 64
        entryLength = (rowsBytes + EntryTrailerView.length + page - 1) / page * page
        maximumCount = format.maximumCount
        pageSize = page
        entriesOffset = page
        entriesPerChunk = max(1, Self.chunkBytes / entryLength)
    }

    package var chunkCount: Int { (maximumCount + entriesPerChunk - 1) / entriesPerChunk }
    package func entryOffset(_ slot: Int) -> Int { entriesOffset + slot * entryLength }
    /// File offset just past `slot`'s entry.
    package func entryEnd(_ slot: Int) -> Int { entryOffset(slot) + entryLength }
    /// File range of chunk `c`.
    package func chunkRange(_ c: Int) -> (offset: Int, length: Int) {
        let first = c * entriesPerChunk
        let count = min(entriesPerChunk, maximumCount - first)
        return (entryOffset(first), count * entryLength)
    }
    /// The chunk holding `slot`, and the entry's offset inside the chunk's mapping.
    package func chunkPosition(_ slot: Int) -> (chunk: Int, offset: Int) {
        (slot / entriesPerChunk, (slot % entriesPerChunk) * entryLength)
    }
    /// The trailer of the entry starting at `entry`.
    package func trailer(_ entry: UnsafeMutableRawPointer) -> EntryTrailerView { EntryTrailerView(base: entry + trailerOffset) }
}
