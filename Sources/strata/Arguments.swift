import ArgumentParser
import Foundation
import Strata

extension PixelSize {
    /// Parses a `--size WxH` option (positive integers), with a message that says what it takes.
    static func parseOption(_ text: String) throws -> PixelSize {
        guard let size = PixelSize(parsing: text) else {
            throw ValidationError("--size takes WxH with positive integers, e.g. 256x256")
        }
        return size
    }
}

/// Writes `bytes` to a temporary sibling of `path`, then renames it over `path`: a failed run
/// leaves no partial output.
func writeAtomically(_ bytes: [UInt8], to path: String) throws {
    let temporary = path + ".strata-tmp-\(getpid())"
    do {
        let file = try FileDescriptor(open: temporary, flags: O_WRONLY | O_CREAT | O_EXCL | O_TRUNC, mode: 0o644)
        try bytes.withUnsafeBytes { try file.write($0, at: 0) }
        try FileDescriptor.rename(path: temporary, to: path)
    } catch {
        try? FileDescriptor.unlink(path: temporary)
        throw error
    }
}

/// Prints `strata: message` on standard error and exits with `code`.
func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data(("strata: " + message + "\n").utf8))
    exit(code)
}
