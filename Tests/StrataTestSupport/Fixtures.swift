import Foundation

/// Locates the files under `Fixtures/` at the package root, for tests.
///
/// The package root is found by walking up from this source file (`#filePath`) to the first
/// directory that holds `Package.swift`, so tests work from any working directory and on a
/// fresh clone without bundling resources.
package enum Fixtures {
    /// The `Fixtures/` directory.
    package static let directory: URL = {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while dir.path != "/" {
            if FileManager.default.fileExists(atPath: dir.appendingPathComponent("Package.swift").path) {
                return dir.appendingPathComponent("Fixtures", isDirectory: true)
            }
            dir.deleteLastPathComponent()
        }
        fatalError("Fixtures: no Package.swift above \(#filePath)")
    }()

    /// The URL of a fixture, e.g. `Fixtures.url("jpeg/path-2560x1600.jpg")`.
    package static func url(_ relativePath: String) -> URL {
        directory.appendingPathComponent(relativePath)
    }

    /// The bytes of a fixture; traps with the path when the file is missing (a test setup bug).
    package static func bytes(_ relativePath: String) -> [UInt8] {
        let url = url(relativePath)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            fatalError("Fixtures: cannot read \(url.path)")
        }
        return [UInt8](data)
    }
}
