import ArgumentParser
import Glibc
import Strata
import StrataTestSupport

/// `strata-test-helper table-writer`: a child process for the image-table crash and sharing tests.
/// Writes (and now and then deletes) deterministic test-pattern entries into one table, either
/// for ever (until killed) or for `--iterations` writes.
struct TableWriterCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "table-writer",
        abstract: "Test helper: write test-pattern entries into an image table."
    )

    @Option var directory: String
    @Option var name = "t"
    @Option var width = 32
    @Option var height = 32
    @Option var maxCount = 16
    @Option var entities = 24
    @Option var iterations = 0
    @Option var seed: UInt64 = 1
    /// Also read and verify entries between writes (exits with status 3 on a wrong image).
    @Flag var verify = false
    /// Sleep this long after each drawn row, so that a kill most likely lands mid-draw.
    @Option var rowDelayMicroseconds: UInt32 = 0
    /// Record progress in this file (see ``TableWriterProgress``) once the table is open, when a
    /// draw starts, after each drawn row and after each store, so that a test that kills this process knows whether it
    /// died inside a draw.
    @Option var progressFile: String?

    func run() throws {
        let format = ImageTableFormat(
            name: name, family: "test", size: PixelSize(width: width, height: height),
            maximumCount: maxCount)
        let table = try ImageTable(directory: directory, format: format)
        let progress = try progressFile.map { Shared(try FileDescriptor(open: $0, flags: O_RDWR | O_CREAT | O_TRUNC)) }
        func report(_ record: TableWriterProgress) throws {
            guard let progress else { return }
            try record.encoded.withUnsafeBytes { try progress.resource.write($0, at: 0) }
        }
        try report(TableWriterProgress(phase: .ready, entity: 0, version: 0, rows: 0))
        var rng = SplitMix64(state: seed)
        var done = 0
        while iterations == 0 || done < iterations {
            let n = Int(rng.next() % UInt64(entities))
            let version = 1 + rng.next() % 3
            if rng.next() % 16 == 0 {
                try table.delete(TableTestPattern.entityID(n))
            } else {
                try table.store(TableTestPattern.entityID(n), sourceVersion: version) { canvas in
                    try report(TableWriterProgress(phase: .drawing, entity: n, version: version, rows: 0))
                    var rows = 0
                    var failure: (any Error)?
                    TableTestPattern.draw(&canvas.image, n: n, version: version) {
                        if rowDelayMicroseconds > 0 { usleep(rowDelayMicroseconds) }
                        rows += 1
                        do { try report(TableWriterProgress(phase: .drawing, entity: n, version: version, rows: rows)) } catch {
                            failure = error
                        }
                    }
                    if let failure { throw failure }
                }
                try report(TableWriterProgress(phase: .stored, entity: n, version: version, rows: height))
            }
            if verify {
                let m = Int(rng.next() % UInt64(entities))
                for v in UInt64(1)...3 {
                    if let image = table.image(for: TableTestPattern.entityID(m), sourceVersion: v),
                        !TableTestPattern.matches(image, n: m, version: v)
                    {
                        print("wrong image for entity \(m) version \(v)")
                        throw ExitCode(3)
                    }
                }
            }
            done += 1
        }
    }
}

/// Runs are reproducible from `--seed`.
