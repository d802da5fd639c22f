/// Byte layout of one table file, derived from its format.
///
/// ```
/// [header page][entry 0][entry 1]…[entry maximumCount-1]
/// entry = rows (height × bytesPerRow, 64-byte aligned) + 64-byte trailer, rounded up to the page size
/// ```
///
/// Entries are mapped in chunks of about ``chunkBytes`` (whole entries), on first use.
struct TableLayout: Sendable, Hashable {
    let width: Int
    let height: Int
    let style: PixelStyle
    let mode: ContentMode
    let bytesPerRow: Int
    let rowsBytes: Int
    /// Offset of the ``EntryTrailerView`` in an entry.
    let trailerOffset: Int
    let entryLength: Int
    let maximumCount: Int
    let pageSize: Int
    let entriesOffset: Int
    let entriesPerChunk: Int

    static let chunkBytes = 4 << 20

    init(format: ImageTableFormat) {
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

    var chunkCount: Int { (maximumCount + entriesPerChunk - 1) / entriesPerChunk }
    func entryOffset(_ slot: Int) -> Int { entriesOffset + slot * entryLength }
    /// File offset just past `slot`'s entry.
    func entryEnd(_ slot: Int) -> Int { entryOffset(slot) + entryLength }
    /// File range of chunk `c`.
    func chunkRange(_ c: Int) -> (offset: Int, length: Int) {
        let first = c * entriesPerChunk
        let count = min(entriesPerChunk, maximumCount - first)
        return (entryOffset(first), count * entryLength)
    }
    /// The chunk holding `slot`, and the entry's offset inside the chunk's mapping.
    func chunkPosition(_ slot: Int) -> (chunk: Int, offset: Int) {
        (slot / entriesPerChunk, (slot % entriesPerChunk) * entryLength)
    }
    /// The trailer of the entry starting at `entry`.
    func trailer(_ entry: UnsafeMutableRawPointer) -> EntryTrailerView { EntryTrailerView(base: entry + trailerOffset) }
}
