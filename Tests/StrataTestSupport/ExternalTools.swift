import Foundation

/// Runs the Debian image tools the codec tests make their files with (`avifenc`, `avifdec`
/// from libavif-bin, `heif-enc`, `heif-convert` from libheif-examples, `gifsicle`, `tiffcp`,
/// `vips` for pyramidal TIFFs, `opj_compress`, `opj_decompress` from libopenjp2-tools, `cjxl`,
/// `djxl` from libjxl-tools;
/// `Scripts/install-deps.sh` installs them). A missing tool is a failure naming the package,
/// never a skipped test.
package enum ExternalTools {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
        package init(description: String) { self.description = description }
    }

    /// The Debian package that ships `tool`.
    static func package(of tool: String) -> String {
        switch tool {
        case "avifenc", "avifdec": return "libavif-bin"
        case "heif-enc", "heif-convert", "heif-info": return "libheif-examples"
        case "vips": return "libvips-tools"
        case "tiffcp", "tiffset", "tiffinfo": return "libtiff-tools"
        case "opj_compress", "opj_decompress", "opj_dump": return "libopenjp2-tools"
        case "cjxl", "djxl": return "libjxl-tools"
        default: return tool
        }
    }

    /// The path of `tool` on PATH (or /usr/bin), or a failure naming its package.
    package static func path(_ tool: String) throws -> String {
        let directories = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init) + ["/usr/bin"]
        for directory in directories where FileManager.default.isExecutableFile(atPath: directory + "/" + tool) {
            return directory + "/" + tool
        }
        throw Failure(description: "\(tool) is not installed: install \(package(of: tool)) (Scripts/install-deps.sh does)")
    }

    /// Runs `tool` with `arguments`; returns its standard output, or throws with its
    /// standard error when it exits non-zero.
    @discardableResult
    package static func run(_ tool: String, _ arguments: [String], stdin: [UInt8]? = nil) throws -> [UInt8] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try path(tool))
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let input = Pipe()
        process.standardInput = stdin == nil ? FileHandle.nullDevice : input
        try process.run()
        if let stdin {
            input.fileHandleForWriting.write(Data(stdin))
            try input.fileHandleForWriting.close()
        }
        // Read both pipes before waiting (a full pipe would block the child).
        let errorData = ReadInBackground(errors.fileHandleForReading)
        let out = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let err = errorData.wait()
        guard process.terminationStatus == 0 else {
            throw Failure(
                description:
                    "\(tool) \(arguments.joined(separator: " ")) exited \(process.terminationStatus): \(String(decoding: err, as: UTF8.self))"
            )
        }
        return [UInt8](out)
    }

    /// Reads a file handle to its end on another thread.
    private final class ReadInBackground: @unchecked Sendable {
        private var data = Data()
        private let done = DispatchSemaphore(value: 0)

        init(_ handle: FileHandle) {
            Thread.detachNewThread { [self] in
                data = handle.readDataToEndOfFile()
                done.signal()
            }
        }

        func wait() -> Data {
            done.wait()
            return data
        }
    }
}
