import Foundation
import Strata

/// The tests' reference reader of the AVIF files Strata writes: Debian's `avifdec` (package
/// `libavif-bin`, which `Scripts/install-deps.sh` installs). Independent of Strata's own AVIF
/// decoder, so an encode is checked against another program's reading of it. A missing
/// `avifdec` is an error that says what to install — the tests fail, they do not skip.
package enum AVIFReference {
    /// What `avifdec` needs, when it cannot be run.
    package struct Missing: Error, CustomStringConvertible {
        package var description: String
    }

    /// `bytes` decoded by `avifdec` to an 8-bit PNG, read back with ``ImageDecoder``.
    package static func decode(_ bytes: [UInt8]) throws -> PixelImage {
        let directory = TempDirectory()
        let input = directory.path + "/in.avif", output = directory.path + "/out.png"
        try Data(bytes).write(to: URL(fileURLWithPath: input))
        _ = try run(["--depth", "8", input, output])
        guard let png = FileManager.default.contents(atPath: output) else {
            throw Missing(description: "avifdec wrote no \(output)")
        }
        return try ImageDecoder().decode([UInt8](png))
    }

    /// `avifdec --info`'s report of `bytes`: lines such as ` * Format         : YUV420`,
    /// ` * Alpha          : Present`, ` * ICC Profile    : Present (3144 bytes)`.
    package static func info(_ bytes: [UInt8]) throws -> [String: String] {
        let directory = TempDirectory()
        let input = directory.path + "/in.avif"
        try Data(bytes).write(to: URL(fileURLWithPath: input))
        var fields: [String: String] = [:]
        for line in try run(["--info", input]).split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, line.hasPrefix(" * ") else { continue }
            fields[parts[0].dropFirst(3).trimmingCharacters(in: .whitespaces)] = parts[1].trimmingCharacters(in: .whitespaces)
        }
        return fields
    }

    /// Runs `avifdec` with `arguments`; returns its standard output.
    static func run(_ arguments: [String]) throws -> String {
        guard let path = ["/usr/bin/avifdec", "/usr/local/bin/avifdec"].first(where: { FileManager.default.isExecutableFile(atPath: $0) })
        else {
            throw Missing(description: "avifdec is not installed: run Scripts/install-deps.sh (Debian package libavif-bin)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Missing(description: "avifdec \(arguments.joined(separator: " ")) failed (\(process.terminationStatus)): \(text)")
        }
        return text
    }
}
