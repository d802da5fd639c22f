import ArgumentParser
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
