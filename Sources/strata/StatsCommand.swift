import ArgumentParser
import Foundation
import Strata
import StrataConfiguration

/// `strata stats [--cache DIR] [--tables DIR] [--iiif-pyramid-path DIR] [--config FILE]
/// [--KEY VALUE …] [--json]`
struct StatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Print statistics of a cache directory (read-only; safe beside a running server).",
        discussion: """
            Reads the disk tier directory (--cache, default disk.path), when --tables or \
            tables.path names one, the image tables of the configured tables.formats, and when \
            iiif.pyramidPath names one, the tile pyramids there (iiif.tileSize tiles). Strictly \
            read-only: it lists names and stats files (DiskDirectoryInventory) and preads the \
            tables' headers and metadata (ImageTableInventory); it never creates, deletes, \
            renames, evicts or locks anything, so it can run while other processes use the \
            directory. The numbers are a snapshot. The byte limit shown is this configuration's \
            disk.byteLimit (a running server may have reloaded another).

            --json prints one JSON object:
              disk: null when no disk directory is configured, else
                path, files (published cache files), keys (distinct keys), chargedBytes (what \
            disk.byteLimit counts: pixels + 4 KiB per file), fileBytes (sum of file lengths), \
            allocatedBytes (blocks on disk), byteLimit, usedShare (chargedBytes / byteLimit), \
            temporaryFiles and temporaryBytes (stores in progress or left by a writer that \
            died), otherEntries (names the tier ignores), vanished (deleted during the scan),
                longestSide: [{upTo, files, chargedBytes}] (files by their longer side, in \
            powers of two; upTo null for the last bucket),
                variants: [{width, height, mode, style, files}] (the 20 most common shapes, \
            most files first), variantShapes (number of distinct shapes);
              tables: null when no tables directory is configured, else
                path, formats: [{name, family, width, height, mode, style, maximumCount, \
            state (absent, valid or needsRepair), problem (null unless needsRepair), entries, \
            damagedRecords, tableFileBytes, metadataFileBytes, pinsFileBytes, allocatedBytes}];
              pyramids: null when iiif.pyramidPath is not set, else
                path, tileSize, state, problem, pyramids (originals × colours with tiles), \
            tiles, maximumTiles, tilesPerLevel (level 0 = full resolution first), \
            tableFileBytes, allocatedBytes.

            Exit status 2, with a line naming the directory, when a directory does not exist or \
            cannot be read, or when neither directory is configured.
            """
    )

    @Option(help: "Disk tier directory (default: disk.path).")
    var cache: String?

    @Option(help: "Image tables directory (default: tables.path); its formats are tables.formats.")
    var tables: String?

    @Flag(help: "Print one JSON object (keys listed above) instead of the table.")
    var json = false

    @OptionGroup var configurationOptions: ConfigurationOptions

    /// Shapes listed by name (the rest are counted).
    static let variantsShown = 20

    func run() async throws {
        var overrides: [String: ConfigurationRawValue] = [:]
        if let cache { overrides["disk.path"] = .scalar(cache) }
        if let tables { overrides["tables.path"] = .scalar(tables) }
        let (_, configuration) = await configurationOptions.load(overrides: overrides)
        guard configuration.diskPath != nil || configuration.tablesPath != nil || configuration.iiif.pyramidPath != nil else {
            fail("stats: no cache directory: pass --cache DIR (or --tables DIR, or --iiif-pyramid-path DIR), or set disk.path", code: 2)
        }
        var report = StatsReport()
        if let path = configuration.diskPath {
            do {
                let inventory = try DiskDirectoryInventory(scanning: path)
                report.disk = StatsReport.Disk(inventory, byteLimit: configuration.disk.byteLimit, shown: Self.variantsShown)
            } catch {
                fail("stats: cannot read the disk tier directory \(path): \(Self.reason(error)); check --cache or disk.path", code: 2)
            }
        }
        if let path = configuration.tablesPath {
            do {
                let inventories = try ImageTableInventory.scan(directory: path, formats: configuration.tableFormats)
                report.tables = StatsReport.Tables(path: path, formats: inventories.map(StatsReport.Table.init))
            } catch {
                fail("stats: cannot read the image tables directory \(path): \(Self.reason(error)); check --tables or tables.path", code: 2)
            }
        }
        // The default beside the disk tier counts once a server has made it.
        if let path = configuration.iiif.pyramidPath,
            !configuration.iiif.pyramidPathIsDefault || FileManager.default.fileExists(atPath: path)
        {
            do {
                let settings = configuration.iiif.pyramidSettings
                report.pyramids = StatsReport.Pyramids(
                    path: path, settings: settings, inventory: try PyramidInventory(directory: path, settings: settings))
            } catch {
                fail("stats: cannot read the pyramids directory \(path): \(Self.reason(error)); check iiif.pyramidPath", code: 2)
            }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            let data = try encoder.encode(report)
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(report.text, terminator: "")
        }
    }

    static func reason(_ error: DiskTierError) -> String {
        if case .cannotUseDirectory(_, let underlying) = error { return underlying.reason }
        return "\(error)"
    }

    static func reason(_ error: ImageTableError) -> String {
        if case .system(let underlying) = error { return "\(underlying.path ?? ""): \(underlying.reason)" }
        return "\(error)"
    }
}

/// What `strata stats` prints, as JSON (``StatsCommand``'s help lists the keys) or as text.
struct StatsReport: Encodable {
    struct Bucket: Encodable {
        var upTo: Int?
        var files: Int
        var chargedBytes: Int
    }

    struct Variant: Encodable {
        var width: Int
        var height: Int
        var mode: String
        var style: String
        var files: Int
    }

    struct Disk: Encodable {
        var path: String
        var files: Int
        var keys: Int
        var chargedBytes: Int
        var fileBytes: Int
        var allocatedBytes: Int
        var byteLimit: Int
        var usedShare: Double
        var temporaryFiles: Int
        var temporaryBytes: Int
        var otherEntries: Int
        var vanished: Int
        var longestSide: [Bucket]
        var variants: [Variant]
        var variantShapes: Int

        init(_ inventory: DiskDirectoryInventory, byteLimit: Int, shown: Int) {
            path = inventory.directory
            files = inventory.files
            keys = inventory.keys
            chargedBytes = inventory.chargedBytes
            fileBytes = inventory.fileBytes
            allocatedBytes = inventory.allocatedBytes
            self.byteLimit = byteLimit
            usedShare = Double(inventory.chargedBytes) / Double(byteLimit)
            temporaryFiles = inventory.temporaryFiles
            temporaryBytes = inventory.temporaryBytes
            otherEntries = inventory.otherEntries
            vanished = inventory.vanished
            variantShapes = inventory.variants.count
            // Powers of two from 64 to 4096, then everything larger.
            let limits: [Int?] = [64, 128, 256, 512, 1024, 2048, 4096, nil]
            var buckets = limits.map { Bucket(upTo: $0, files: 0, chargedBytes: 0) }
            for (variant, count) in inventory.variants {
                let side = max(variant.size.width, variant.size.height)
                let i = limits.firstIndex { $0.map { side <= $0 } ?? true }!
                buckets[i].files += count
                let perFile = PixelLayout.bytesPerRow(width: variant.size.width, style: variant.style) * variant.size.height + 4096
                buckets[i].chargedBytes += perFile * count
            }
            longestSide = buckets.filter { $0.files > 0 }
            variants = inventory.variants.sorted {
                ($0.value, $1.key.size.width, $1.key.size.height) > ($1.value, $0.key.size.width, $0.key.size.height)
            }
            .prefix(shown)
            .map {
                Variant(
                    width: $0.key.size.width, height: $0.key.size.height, mode: "\($0.key.mode)", style: "\($0.key.style)", files: $0.value)
            }
        }
    }

    struct Table: Encodable {
        var name: String
        var family: String
        var width: Int
        var height: Int
        var mode: String
        var style: String
        var maximumCount: Int
        var state: String
        var problem: String?
        var entries: Int
        var damagedRecords: Int
        var tableFileBytes: Int
        var metadataFileBytes: Int
        var pinsFileBytes: Int
        var allocatedBytes: Int

        init(_ inventory: ImageTableInventory) {
            let format = inventory.format
            name = format.name
            family = format.family
            width = format.size.width
            height = format.size.height
            mode = "\(format.mode)"
            style = "\(format.style)"
            maximumCount = format.maximumCount
            state = inventory.state.rawValue
            problem = inventory.problem
            entries = inventory.entries
            damagedRecords = inventory.damagedRecords
            tableFileBytes = inventory.tableFileBytes
            metadataFileBytes = inventory.metadataFileBytes
            pinsFileBytes = inventory.pinsFileBytes
            allocatedBytes = inventory.allocatedBytes
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(name, forKey: .name)
            try c.encode(family, forKey: .family)
            try c.encode(width, forKey: .width)
            try c.encode(height, forKey: .height)
            try c.encode(mode, forKey: .mode)
            try c.encode(style, forKey: .style)
            try c.encode(maximumCount, forKey: .maximumCount)
            try c.encode(state, forKey: .state)
            try c.encode(problem, forKey: .problem)  // null, not absent
            try c.encode(entries, forKey: .entries)
            try c.encode(damagedRecords, forKey: .damagedRecords)
            try c.encode(tableFileBytes, forKey: .tableFileBytes)
            try c.encode(metadataFileBytes, forKey: .metadataFileBytes)
            try c.encode(pinsFileBytes, forKey: .pinsFileBytes)
            try c.encode(allocatedBytes, forKey: .allocatedBytes)
        }

        enum CodingKeys: String, CodingKey {
            case name, family, width, height, mode, style, maximumCount, state, problem, entries, damagedRecords
            case tableFileBytes, metadataFileBytes, pinsFileBytes, allocatedBytes
        }
    }

    struct Tables: Encodable {
        var path: String
        var formats: [Table]
    }

    struct Pyramids: Encodable {
        var path: String
        var tileSize: Int
        var state: String
        var problem: String?
        var pyramids: Int
        var tiles: Int
        var maximumTiles: Int
        var tilesPerLevel: [Int]
        var tableFileBytes: Int
        var allocatedBytes: Int

        init(path: String, settings: TilePyramids.Settings, inventory: PyramidInventory) {
            self.path = path
            tileSize = settings.tileSize
            state = inventory.table.state.rawValue
            problem = inventory.table.problem
            pyramids = inventory.pyramids
            tiles = inventory.tiles
            maximumTiles = settings.maximumTiles
            tilesPerLevel = inventory.tilesPerLevel
            tableFileBytes = inventory.table.tableFileBytes
            allocatedBytes = inventory.table.allocatedBytes
        }
    }

    var disk: Disk?
    var tables: Tables?
    var pyramids: Pyramids?

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(disk, forKey: .disk)  // null when not configured
        try c.encode(tables, forKey: .tables)
        try c.encode(pyramids, forKey: .pyramids)
    }

    enum CodingKeys: String, CodingKey { case disk, tables, pyramids }

    /// The human-readable report.
    var text: String {
        var lines: [String] = []
        if let d = disk {
            lines.append("disk tier \(d.path)")
            lines.append("  files            \(d.files)")
            lines.append("  keys             \(d.keys)")
            lines.append(
                "  charged bytes    \(Self.bytes(d.chargedBytes)) of \(Self.bytes(d.byteLimit)) (disk.byteLimit, \(String(format: "%.1f", d.usedShare * 100)) %)"
            )
            lines.append("  file bytes       \(Self.bytes(d.fileBytes)) (\(Self.bytes(d.allocatedBytes)) allocated)")
            lines.append("  temporary files  \(d.temporaryFiles) (\(Self.bytes(d.temporaryBytes)))")
            if d.otherEntries > 0 { lines.append("  other entries    \(d.otherEntries) (ignored by the tier)") }
            if d.vanished > 0 { lines.append("  vanished         \(d.vanished) (deleted during the scan)") }
            if !d.longestSide.isEmpty {
                lines.append("  longest side     files      charged")
                for bucket in d.longestSide {
                    let label = bucket.upTo.map { "≤ \($0)" } ?? "> 4096"
                    lines.append(
                        "    \(Self.pad(label, 14)) \(Self.pad(String(bucket.files), 10, right: true)) \(Self.pad(Self.bytes(bucket.chargedBytes), 12, right: true))"
                    )
                }
            }
            if !d.variants.isEmpty {
                let shapes = d.variants.map { "\($0.width)x\($0.height) \($0.mode) \($0.style)" }
                let width = max(14, shapes.map(\.count).max() ?? 0)
                let more = d.variantShapes > d.variants.count ? ", the \(d.variants.count) most common" : ""
                lines.append("  variants (\(d.variantShapes) shapes\(more))")
                for (shape, v) in zip(shapes, d.variants) {
                    lines.append("    \(Self.pad(shape, width)) \(Self.pad(String(v.files), 10, right: true)) files")
                }
            }
        }
        if let t = tables {
            lines.append("image tables \(t.path)")
            if t.formats.isEmpty { lines.append("  (no tables.formats configured)") }
            for f in t.formats {
                var line =
                    "  \(Self.pad(f.name, 12)) \(f.width)x\(f.height) \(f.mode) \(f.style)  \(f.state)  entries \(f.entries)/\(f.maximumCount)"
                line += "  table \(Self.bytes(f.tableFileBytes)) (\(Self.bytes(f.allocatedBytes)) allocated with meta and pins)"
                if f.damagedRecords > 0 { line += "  damaged records \(f.damagedRecords)" }
                lines.append(line)
                if let problem = f.problem { lines.append("    \(problem)") }
            }
        }
        if let p = pyramids {
            lines.append("tile pyramids \(p.path) (\(p.tileSize) px tiles)  \(p.state)")
            if let problem = p.problem { lines.append("  \(problem)") }
            lines.append("  pyramids         \(p.pyramids)")
            lines.append("  tiles            \(p.tiles) of \(p.maximumTiles) (iiif.pyramidBytes)")
            if !p.tilesPerLevel.isEmpty {
                lines.append(
                    "  tiles per level  " + p.tilesPerLevel.enumerated().map { "\($0.offset): \($0.element)" }.joined(separator: ", "))
            }
            lines.append(
                "  table bytes      \(Self.bytes(p.tableFileBytes)) (\(Self.bytes(p.allocatedBytes)) allocated with meta and pins)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
        let fill = String(repeating: " ", count: max(0, width - text.count))
        return right ? fill + text : text + fill
    }

    /// `bytes` with a binary unit (`12.3 MiB`), plain below 1 KiB.
    static func bytes(_ bytes: Int) -> String {
        let units = ["KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        guard value >= 1024 else { return "\(bytes) B" }
        var unit = -1
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return String(format: "%.1f ", value) + units[unit]
    }
}
