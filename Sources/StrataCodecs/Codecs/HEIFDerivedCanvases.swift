import StrataBase
/// The canvases that a HEIF's derived images — grids (`grid`) and overlays (`iovl`) — claim in
/// their own descriptors, read from the container before libheif decodes anything.
///
/// libheif allocates a derived image's canvas from its descriptor and holds it only to its
/// per-side limit (libheif 1.15 has neither a call that reads the descriptor nor a limit on
/// pixels), so a file whose `ispe` passes ``DecodingLimits/maxPixels`` can still make it
/// allocate a square of the longer side: a 1×65536 grid that claims 65536×65536. The check
/// refuses to decode an item when it, or a derived item that decoding it decodes (an overlay's
/// grids, an alpha grid), claims a canvas above the pixel limit, as if that canvas were the
/// image; and when what it decodes leads back to itself (libheif would follow it for ever).
///
/// Reads the top-level `meta` box only: `iinf` for the item types, `iref` for what each item
/// decodes (`dimg`, `auxl`), `iloc` for where each derived item's descriptor lies (in the file,
/// or in `idat`), and the descriptor's first 18 bytes. Cost: one pass over the box headers and
/// one walk of the references, no allocation beyond the item lists. A malformed container is
/// left to libheif, which refuses it with its own message.
package enum HEIFDerivedCanvases {
    /// A derived item's claimed canvas, and for any item (a coded one too) what decoding it
    /// decodes besides.
    package struct Canvas: Equatable {
        package init(size: PixelSize, nesting: Int? = 1, reaches: Int = 0) {
            self.size = size
            self.nesting = nesting
            self.reaches = reaches
        }

        /// 0×0 for a coded image.
        package var size: PixelSize
        /// Derived items nested from this one down what it decodes (`iref` `dimg` inputs, one
        /// level deeper, and `auxl` auxiliary images, at its level), itself included: 1 for a
        /// grid of coded images or one whose alpha is a grid, 2 for an overlay of grids, 1 for a
        /// coded image whose alpha is a grid; `nil` when they lead back to itself.
        package var nesting: Int? = 1
        /// The largest canvas, in pixels, among the derived items that decoding this one decodes
        /// (itself apart): an overlay's grids, a grid's alpha grid.
        package var reaches = 0
    }

    /// The deepest nesting of derived items decoded: an overlay of grids. libheif 1.15 decodes a
    /// derived item's inputs on up to four threads of its own, each input's inputs likewise,
    /// and follows references back to the item itself without end: a grid naming itself as its
    /// tile (a FuzzHEIF input) started threads until none could start, and libheif's uncaught
    /// `std::system_error` aborted the process; a grid whose alpha image was a grid of the
    /// grid itself (another) decoded until the process ran out of memory.
    package static let maximumNesting = 2

    /// The canvases the grid and overlay items of `bytes` claim, by item id; empty when there
    /// are none, or when the boxes cannot be read far enough to tell.
    package static func canvases(in bytes: UnsafeRawBufferPointer) -> [UInt32: Canvas] {
        var reader = BoxReader(bytes: bytes, range: 0..<bytes.count)
        while let box = reader.next() {
            guard box.type == "meta" else { continue }
            return canvases(meta: box, in: bytes)
        }
        return [:]
    }

    /// Throws `tooLarge` when decoding `item` would allocate a canvas of more than `maxPixels`:
    /// its own, or that of any derived item it decodes (an overlay's grids, an alpha grid).
    /// Throws `corrupt` when what it decodes leads back to itself or nests derived items deeper
    /// than ``maximumNesting``.
    package static func check(item: UInt32, of canvases: [UInt32: Canvas], maxPixels: Int) throws(ImageDecodingError) {
        guard let own = canvases[item] else { return }
        guard let nesting = own.nesting else {
            throw ImageDecodingError(
                .corrupt("an image is among its own inputs (a grid's or overlay's, or its alpha's)"), format: .heic)
        }
        if nesting > maximumNesting {
            throw ImageDecodingError(
                .corrupt("derived images (grids, overlays) nested \(nesting) deep; at most \(maximumNesting) are decoded"),
                format: .heic)
        }
        let largest = max(pixels(own.size), own.reaches)
        if largest > maxPixels { throw ImageDecodingError(.tooLarge(pixels: largest, limit: maxPixels), format: .heic) }
    }

    /// Width × height, `Int.max` when that overflows (two 32-bit sides can).
    package static func pixels(_ size: PixelSize) -> Int {
        let product = size.width.multipliedReportingOverflow(by: size.height)
        return product.overflow ? Int.max : product.partialValue
    }

    private struct Location {
        var constructionMethod: Int
        var extents: [(offset: Int, length: Int)]
    }

    private static func canvases(meta: Box, in bytes: UnsafeRawBufferPointer) -> [UInt32: Canvas] {
        // `meta` is a full box: its children start after version and flags.
        guard meta.payload.count >= 4 else { return [:] }
        var children = BoxReader(bytes: bytes, range: meta.payload.lowerBound + 4..<meta.payload.upperBound)
        var derived: [UInt32: String] = [:]
        var locations: [UInt32: Location] = [:]
        var idat: Range<Int>?
        var decodes: [UInt32: [Decode]] = [:]
        while let box = children.next() {
            switch box.type {
            case "iinf": derived = derivedItems(box, in: bytes)
            case "iloc": locations = self.locations(box, in: bytes) ?? [:]
            case "idat": idat = box.payload
            case "iref": decodes = decodeReferences(box, in: bytes)
            default: break
            }
        }
        // An unreadable descriptor: no canvas to hold to the limit (libheif refuses it), but
        // the references are still checked.
        var sizes: [UInt32: PixelSize] = [:]
        for (id, type) in derived {
            sizes[id] = locations[id].flatMap { descriptorBytes($0, idat: idat, in: bytes) }.flatMap {
                canvas(of: type, descriptor: $0)
            }
        }
        let walked = walk(derived: derived, decodes: decodes, pixels: sizes.mapValues(pixels))
        var canvases: [UInt32: Canvas] = [:]
        for (id, result) in walked {
            let size = sizes[id]
            // Nothing to check: a grid of coded images with no readable descriptor, or a coded
            // image that decodes no derived one.
            if size == nil, let result, result.nesting == (derived[id] != nil ? 1 : 0), result.reaches == 0 { continue }
            canvases[id] = Canvas(size: size ?? PixelSize(width: 0, height: 0), nesting: result?.nesting, reaches: result?.reaches ?? 0)
        }
        return canvases
    }

    /// What decoding each item decodes besides, from `iref` (versions 0 and 1): a derived
    /// item's inputs (`dimg`, from the derived item to its inputs), and any item's auxiliary
    /// images (`auxl`, from the auxiliary image to the item it belongs to: libheif decodes an
    /// image's alpha with it).
    ///
    /// Read as libheif 1.15 reads them: one reference after another, each a box header whose
    /// size is not used (a 64-bit size and a `uuid` type are skipped), the from-id, the count
    /// and the to-ids, to the end of `iref`. A reference box whose size disagrees with what it
    /// holds (a FuzzHEIF input) would otherwise hide the references after it from the check,
    /// not from libheif.
    private static func decodeReferences(_ iref: Box, in bytes: UnsafeRawBufferPointer) -> [UInt32: [Decode]] {
        var cursor = Cursor(bytes: bytes, range: iref.payload)
        guard let version = cursor.u8(), version <= 1, cursor.skip(3) else { return [:] }
        func id() -> UInt32? { version == 0 ? cursor.u16().map(UInt32.init) : cursor.u32() }
        var decodes: [UInt32: [Decode]] = [:]
        while cursor.position < cursor.end {
            guard let size = cursor.u32(), let type = cursor.fourCC() else { break }
            if size == 1 { guard cursor.skip(8) else { break } }
            if type == "uuid" { guard cursor.skip(16) else { break } }
            guard let from = id(), let count = cursor.u16() else { break }
            var to: [UInt32] = []
            for _ in 0..<count {
                guard let input = id() else { break }
                to.append(input)
            }
            if type == "dimg" {
                decodes[from, default: []] += to.map { Decode(id: $0, isInput: true) }
            } else if type == "auxl" {
                for master in to { decodes[master, default: []].append(Decode(id: from, isInput: false)) }
            }
        }
        return decodes
    }

    /// One item that decoding another decodes besides: an input of a derived item (`dimg`,
    /// decoded inside it, so one level deeper) or an auxiliary image (`auxl`: decoded after it,
    /// at its level).
    private struct Decode {
        var id: UInt32
        var isInput: Bool
    }

    private struct Reach {
        var nesting: Int
        var reaches: Int
    }

    /// For each item on the decode graph, the deepest nesting of derived items down what it
    /// decodes (itself included; a coded image counts 0) and the largest canvas among the
    /// derived items it decodes (itself apart), or `nil` when they lead back to an item already
    /// on the way (a cycle). Depth-first with its own stack (a file can chain thousands of
    /// items), each item finished once: O(items + references).
    private static func walk(
        derived: [UInt32: String], decodes: [UInt32: [Decode]], pixels: [UInt32: Int]
    ) -> [UInt32: Reach?] {
        var done: [UInt32: Reach?] = [:]
        var onPath: Set<UInt32> = []
        // An item being visited, whether its parent decodes it as an input, the next of its
        // decodes to look at, and what they gave so far (`nil` once one leads back).
        var stack: [(id: UInt32, isInput: Bool, next: Int, below: Reach?)] = []
        // What `child`'s result adds to the item that decodes it.
        func seen(_ child: Reach?, id: UInt32, isInput: Bool, by parent: UInt32) -> Reach? {
            child.map {
                Reach(
                    nesting: $0.nesting + (isInput && derived[parent] != nil ? 1 : 0),
                    reaches: max($0.reaches, pixels[id] ?? 0))
            }
        }
        func merge(_ a: Reach?, _ b: Reach?) -> Reach? {
            guard let a, let b else { return nil }
            return Reach(nesting: max(a.nesting, b.nesting), reaches: max(a.reaches, b.reaches))
        }
        let start = Reach(nesting: 0, reaches: 0)
        for root in Set(derived.keys).union(decodes.keys) where done[root] == nil {
            stack.append((root, false, 0, start))
            onPath.insert(root)
            while let top = stack.last {
                let edges = decodes[top.id] ?? []
                if top.next < edges.count, top.below != nil {
                    stack[stack.count - 1].next += 1
                    let edge = edges[top.next]
                    if let known = done[edge.id] {
                        let child = seen(known, id: edge.id, isInput: edge.isInput, by: top.id)
                        stack[stack.count - 1].below = merge(top.below, child)
                    } else if onPath.contains(edge.id) {
                        stack[stack.count - 1].below = nil
                    } else if decodes[edge.id] == nil, derived[edge.id] == nil {
                        continue  // a coded image that decodes nothing more
                    } else {
                        stack.append((edge.id, edge.isInput, 0, start))
                        onPath.insert(edge.id)
                    }
                    continue
                }
                // Finished: hand the result to the item below.
                stack.removeLast()
                onPath.remove(top.id)
                let result = top.below.map { Reach(nesting: max($0.nesting, derived[top.id] != nil ? 1 : 0), reaches: $0.reaches) }
                done[top.id] = .some(result)
                if let parent = stack.last {
                    let child = seen(result, id: top.id, isInput: top.isInput, by: parent.id)
                    stack[stack.count - 1].below = merge(parent.below, child)
                }
            }
        }
        return done
    }

    /// The ids of `grid` and `iovl` items, with their types (`infe` versions 2 and 3).
    private static func derivedItems(_ iinf: Box, in bytes: UnsafeRawBufferPointer) -> [UInt32: String] {
        var cursor = Cursor(bytes: bytes, range: iinf.payload)
        guard let version = cursor.u8(), cursor.skip(3), cursor.skip(version == 0 ? 2 : 4) else { return [:] }
        var items: [UInt32: String] = [:]
        var entries = BoxReader(bytes: bytes, range: cursor.position..<iinf.payload.upperBound)
        while let infe = entries.next() {
            guard infe.type == "infe" else { continue }
            var entry = Cursor(bytes: bytes, range: infe.payload)
            guard let infeVersion = entry.u8(), infeVersion >= 2, entry.skip(3),
                let id = infeVersion == 2 ? entry.u16().map(UInt32.init) : entry.u32(),
                entry.skip(2), let type = entry.fourCC()
            else { continue }
            if type == "grid" || type == "iovl" { items[id] = type }
        }
        return items
    }

    /// Every item's location (`iloc` versions 0–2); `nil` when the box cannot be read.
    private static func locations(_ iloc: Box, in bytes: UnsafeRawBufferPointer) -> [UInt32: Location]? {
        var cursor = Cursor(bytes: bytes, range: iloc.payload)
        guard let version = cursor.u8(), version <= 2, cursor.skip(3), let sizes = cursor.u16() else { return nil }
        let offsetSize = Int(sizes >> 12), lengthSize = Int(sizes >> 8 & 0xF)
        let baseOffsetSize = Int(sizes >> 4 & 0xF), indexSize = version >= 1 ? Int(sizes & 0xF) : 0
        guard let count = version < 2 ? cursor.u16().map(Int.init) : cursor.u32().map(Int.init) else { return nil }
        var locations: [UInt32: Location] = [:]
        for _ in 0..<count {
            guard let id = version < 2 ? cursor.u16().map(UInt32.init) : cursor.u32() else { return nil }
            var method = 0
            if version >= 1 {
                guard let field = cursor.u16() else { return nil }
                method = Int(field & 0xF)
            }
            guard cursor.skip(2), let base = cursor.sized(baseOffsetSize), let extentCount = cursor.u16() else { return nil }
            var extents: [(offset: Int, length: Int)] = []
            if indexSize + offsetSize + lengthSize == 0 {
                // Extents of no bytes are all the same one (offset 0, to the end).
                if extentCount > 0 { extents.append((base, 0)) }
            } else {
                // Each extent reads at least 4 bytes: the loop ends with the box.
                for _ in 0..<extentCount {
                    guard cursor.sized(indexSize) != nil, let offset = cursor.sized(offsetSize),
                        let length = cursor.sized(lengthSize)
                    else { return nil }
                    let start = base.addingReportingOverflow(offset)
                    guard !start.overflow else { return nil }
                    if extents.count < 4 { extents.append((start.partialValue, length)) }
                }
            }
            locations[id] = Location(constructionMethod: method, extents: extents)
        }
        return locations
    }

    /// The first 18 bytes (or fewer, at the end) of an item's data: from the file
    /// (construction method 0) or from `idat` (method 1).
    private static func descriptorBytes(_ location: Location, idat: Range<Int>?, in bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        let space: Range<Int>
        switch location.constructionMethod {
        case 0: space = 0..<bytes.count
        case 1:
            guard let idat else { return nil }
            space = idat
        default: return nil
        }
        var descriptor: [UInt8] = []
        for extent in location.extents where descriptor.count < 18 {
            // A length of 0 means "to the end of the space".
            let start = space.lowerBound.addingReportingOverflow(extent.offset)
            guard !start.overflow, start.partialValue < space.upperBound, start.partialValue >= space.lowerBound else {
                return nil
            }
            let available = space.upperBound - start.partialValue
            let length = extent.length == 0 ? available : min(extent.length, available)
            let take = min(length, 18 - descriptor.count)
            descriptor += UnsafeRawBufferPointer(rebasing: bytes[start.partialValue..<start.partialValue + take])
        }
        return descriptor
    }

    /// A grid's or overlay's canvas from its descriptor (ISO/IEC 23008-12, 6.6.2.3 and 6.6.2.2).
    private static func canvas(of type: String, descriptor: [UInt8]) -> PixelSize? {
        var cursor = Cursor(array: descriptor)
        guard cursor.u8() == 0, let flags = cursor.u8() else { return nil }
        // A grid has its rows and columns next; an overlay, four 16-bit fill values.
        guard cursor.skip(type == "grid" ? 2 : 8) else { return nil }
        let wide = flags & 1 != 0
        guard let width = wide ? cursor.u32().map(Int.init) : cursor.u16().map(Int.init),
            let height = wide ? cursor.u32().map(Int.init) : cursor.u16().map(Int.init)
        else { return nil }
        return PixelSize(width: width, height: height)
    }

    // MARK: Reading boxes

    private struct Box {
        var type: String
        var payload: Range<Int>
    }

    /// The boxes in `range`, one after another; stops at the first that does not fit.
    private struct BoxReader {
        var cursor: Cursor

        init(bytes: UnsafeRawBufferPointer, range: Range<Int>) { cursor = Cursor(bytes: bytes, range: range) }

        mutating func next() -> Box? {
            let start = cursor.position
            guard let size32 = cursor.u32(), let type = cursor.fourCC() else { return nil }
            var size = Int(size32)
            if size32 == 1 {
                guard let size64 = cursor.u64(), size64 <= UInt64(Int.max) else { return nil }
                size = Int(size64)
            } else if size32 == 0 {
                size = cursor.end - start
            }
            let header = cursor.position - start
            guard size >= header, size <= cursor.end - start else { return nil }
            let payload = cursor.position..<start + size
            cursor.position = start + size
            return Box(type: type, payload: payload)
        }
    }

    /// Big-endian reads within a range, each `nil` past its end.
    private struct Cursor {
        private let storage: [UInt8]?
        private let bytes: UnsafeRawBufferPointer?
        var position: Int
        let end: Int

        init(bytes: UnsafeRawBufferPointer, range: Range<Int>) {
            self.bytes = bytes
            storage = nil
            position = max(0, range.lowerBound)
            end = min(bytes.count, range.upperBound)
        }

        init(array: [UInt8]) {
            storage = array
            bytes = nil
            position = 0
            end = array.count
        }

        private func byte(_ at: Int) -> UInt8 { storage?[at] ?? bytes![at] }

        mutating func skip(_ count: Int) -> Bool {
            guard count >= 0, end - position >= count else { return false }
            position += count
            return true
        }

        /// An unsigned integer of `size` bytes (0, 4 or 8; 0 reads as 0).
        mutating func sized(_ size: Int) -> Int? {
            switch size {
            case 0: return 0
            case 4: return u32().map(Int.init)
            case 8: return u64().flatMap { $0 <= UInt64(Int.max) ? Int($0) : nil }
            default: return nil
            }
        }

        mutating func u8() -> UInt8? {
            guard position < end else { return nil }
            defer { position += 1 }
            return byte(position)
        }

        mutating func u16() -> UInt16? {
            guard end - position >= 2 else { return nil }
            defer { position += 2 }
            return UInt16(byte(position)) << 8 | UInt16(byte(position + 1))
        }

        mutating func u32() -> UInt32? {
            guard let high = u16(), let low = u16() else { return nil }
            return UInt32(high) << 16 | UInt32(low)
        }

        mutating func u64() -> UInt64? {
            guard let high = u32(), let low = u32() else { return nil }
            return UInt64(high) << 32 | UInt64(low)
        }

        mutating func fourCC() -> String? {
            guard end - position >= 4 else { return nil }
            defer { position += 4 }
            return String(decoding: (position..<position + 4).map { byte($0) }, as: UTF8.self)
        }
    }
}
