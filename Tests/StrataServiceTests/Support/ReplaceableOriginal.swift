import Foundation

/// A scratch source directory holding `big.jpg` (the 2048 × 1280 fixture), which ``replace()``
/// overwrites in place with the 2560 × 1600 one: a new version of another size (a later
/// modification time), for tests of originals that change under the service.
struct ReplaceableOriginal {
    let root = makeScratchDirectory("replaceable")
    /// The bytes ``replace()`` writes.
    let replacement: Data

    init() throws {
        let fixtures = URL(fileURLWithPath: fixturesDirectory + "/jpeg")
        replacement = try Data(contentsOf: fixtures.appendingPathComponent("path-2560x1600.jpg"))
        try Data(contentsOf: fixtures.appendingPathComponent("fallenleaf-2048x1280-420.jpg")).write(to: url)
    }

    var url: URL { URL(fileURLWithPath: root + "/big.jpg") }

    func replace() throws {
        try replacement.write(to: url)
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(10)], ofItemAtPath: url.path)
    }
}
