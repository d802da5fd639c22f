import StrataBase
/// The shape of one image table: every entry of a table has this exact pixel size, style and
/// content mode (FastImageCache's `FICImageFormat`).
///
/// A format is stored in one file `<name>.table` (plus `<name>.meta` and `<name>.lock`) in the
/// cache directory. Formats that share a ``family`` are filled together: one source load draws
/// every format of the family (see ``ImageTableCache``).
public struct ImageTableFormat: Sendable, Hashable, CustomStringConvertible {
    /// Unique name; also the file name stem, so it is limited to `[A-Za-z0-9._-]`, 1–100 chars,
    /// not starting with a dot.
    public var name: String
    /// Formats with the same family are drawn from one source load.
    public var family: String
    /// The size of every entry. A drawing may use less (``ImageTableCanvas/contentSize``), e.g.
    /// a `fit` image narrower than the box.
    public var size: PixelSize
    public var style: PixelStyle
    public var mode: ContentMode
    /// The hard maximum number of entries; the table file never holds more slots than this.
    public var maximumCount: Int
    /// Permission bits of the files the table creates (the Linux stand-in for
    /// FastImageCache's data-protection mode), applied regardless of the umask.
    public var filePermissions: UInt32

    public init(
        name: String, family: String, size: PixelSize, style: PixelStyle = .default,
        mode: ContentMode = .fill, maximumCount: Int, filePermissions: UInt32 = 0o600
    ) {
        self.name = name
        self.family = family
        self.size = size
        self.style = style
        self.mode = mode
        self.maximumCount = maximumCount
        self.filePermissions = filePermissions
    }

    /// The variant this table's entries are, for ``/StrataBase/VariantMatcher``.
    public var descriptor: VariantDescriptor { VariantDescriptor(size: size, mode: mode, style: style) }

    public var description: String { "\(name)[\(family) \(descriptor) max \(maximumCount)]" }

    /// Checks the format can be stored; throws ``ImageTableError/invalidFormat(name:reason:)``.
    public func validate() throws(ImageTableError) {
        func fail(_ reason: String) -> ImageTableError { .invalidFormat(name: name, reason: reason) }
        guard !name.isEmpty, name.utf8.count <= 100, name.first != ".",
            name.utf8.allSatisfy({
                ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A)
                    || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D
            })
        else { throw fail("the name must be 1–100 characters of A–Z, a–z, 0–9, '.', '_', '-' and not start with '.'") }
        guard size.width > 0, size.height > 0, size.width <= 16384, size.height <= 16384 else {
            throw fail("the size must be between 1x1 and 16384x16384, not \(size)")
        }
        guard maximumCount > 0, maximumCount <= 10_000_000 else {
            throw fail("maximumCount must be between 1 and 10 000 000, not \(maximumCount)")
        }
        guard filePermissions & ~0o777 == 0, filePermissions & 0o600 == 0o600 else {
            throw fail(
                "filePermissions must be permission bits that include owner read/write (0o600), not 0o\(String(filePermissions, radix: 8))")
        }
    }
}

/// Where an entity's source image comes from: loaded once per family fill, then handed to the
/// entity's processing for every format of the family.
public struct ImageTableSource: Sendable {
    /// For error messages and logs (a path, a URL, …).
    public var description: String
    /// Produces the source pixels. `largestSize` is the biggest format size being filled, so a
    /// decoder can shrink on load.
    public var load: @Sendable (_ largestSize: PixelSize) async throws -> PixelImage

    public init(description: String, load: @escaping @Sendable (_ largestSize: PixelSize) async throws -> PixelImage) {
        self.description = description
        self.load = load
    }
}

/// A thing with an image (FastImageCache's `FICEntity`): a stable id, a source version (an entry
/// drawn from an older version is stale and never served), where the source comes from, and
/// the processing that draws the source into a table entry.
public struct ImageTableEntity: Sendable {
    public var id: ImageEntityID
    /// Bump when the source changes; entries with another version are misses.
    public var sourceVersion: UInt64
    public var source: ImageTableSource
    /// Draws `source` into `canvas` (whose image has the format's size and style and lives in
    /// the table slot, so drawing there is zero-copy). Called once per format being filled.
    public var process: @Sendable (_ source: PixelImage, _ canvas: inout ImageTableCanvas) throws -> Void

    public init(
        id: ImageEntityID, sourceVersion: UInt64 = 0, source: ImageTableSource,
        process: @escaping @Sendable (_ source: PixelImage, _ canvas: inout ImageTableCanvas) throws -> Void
    ) {
        self.id = id
        self.sourceVersion = sourceVersion
        self.source = source
        self.process = process
    }
}

/// The drawing surface handed to an entity's processing: a mutable image over the table slot.
///
/// Draw into ``image`` (through `withUnsafeMutableBytes`; it is the slot's memory, no copy). Set
/// ``contentSize`` when the drawing covers only the top-left part (a `fit` image narrower than
/// the box); retrievals then return that part. Assigning a different image to ``image`` also
/// works (it is copied into the slot and its size becomes the content size); it must have the
/// format's style and fit inside the format's size.
public struct ImageTableCanvas: Sendable {
    public let format: ImageTableFormat
    public var image: PixelImage
    public var contentSize: PixelSize

    package init(format: ImageTableFormat, image: PixelImage) {
        self.format = format
        self.image = image
        self.contentSize = format.size
    }
}

/// Why an image-table operation failed, with what to do about it.
public enum ImageTableError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The format cannot be stored (bad name, size, count or permissions).
    case invalidFormat(name: String, reason: String)
    /// No format with this name was registered with the cache.
    case unknownFormat(String)
    /// Two formats share a name.
    case duplicateFormat(String)
    /// Every slot is referenced by a live image (the hard maximum holds): release images or
    /// raise `maximumCount`.
    case tableFull(format: String, maximumCount: Int)
    /// The drawn or supplied image does not match the format.
    case imageDoesNotFit(format: String, size: PixelSize, style: PixelStyle)
    /// More instances than the pin file has segments have this table open at once (across
    /// all processes): close some, or share one instance per process.
    case tooManyInstances(format: String, limit: Int)
    /// A file operation failed.
    case system(SystemCallError)
    /// The cache's drawing pool was shut down before the work could run.
    case shutDown

    public var description: String {
        switch self {
        case .invalidFormat(let name, let reason):
            return "image table format '\(name)' is invalid: \(reason)"
        case .unknownFormat(let name):
            return "no image table format named '\(name)' is registered; pass it to ImageTableCache(directory:formats:)"
        case .duplicateFormat(let name):
            return "two image table formats are named '\(name)'; format names must be unique"
        case .tableFull(let format, let max):
            return "image table '\(format)' is full: all \(max) slots are held by live images; release images or raise maximumCount"
        case .imageDoesNotFit(let format, let size, let style):
            return "a \(size) \(style) image does not fit image table '\(format)' (it needs the format's style and at most its size)"
        case .tooManyInstances(let format, let limit):
            return "image table '\(format)' is open in \(limit) instances already (the limit); share one ImageTable per process"
        case .shutDown:
            return "the image table cache's drawing pool is shut down"
        case .system(let error):
            return "image table I/O failed: \(error)"
        }
    }
}
