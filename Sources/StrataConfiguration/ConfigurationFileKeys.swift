import Foundation
import Strata
import Yams

/// The dotted leaf keys of a YAML (or JSON) configuration file, for refusing unknown keys:
/// swift-configuration's providers answer the keys asked for and never list the rest. A key of
/// named entries (``ConfigurationKey/isNamed``) is one leaf, whatever its form.
package enum ConfigurationFileKeys {
    /// `memory: {costLimit: 1}` → `["memory.costLimit"]`. A flat dotted key (`memory.costLimit: 1`)
    /// counts as the same key. Sequences are leaves.
    package static func leaves(ofFileAt path: String) throws -> [String] {
        try leaves(of: try String(contentsOfFile: path, encoding: .utf8), path: path)
    }

    /// The leaves of the file `path` whose text is `text`.
    package static func leaves(of text: String, path: String) throws -> [String] {
        guard let node = try Yams.compose(yaml: text) else { return [] }
        guard case .mapping = node else {
            throw ConfigurationError(key: "config", value: path, reason: "the file's top level must be a mapping of keys")
        }
        var leaves: [String] = []
        try collect(node, prefix: "", into: &leaves)
        return leaves
    }

    private static func collect(_ node: Node, prefix: String, into leaves: inout [String]) throws(ConfigurationError) {
        if NamedEntries.keys.contains(prefix) {
            // Named entries: a mapping of names to strings, a list of `name: value` strings, or a
            // list of one-entry mappings (`- thumb: w=256`), as people write them.
            guard NamedEntries.entries(of: node) != nil else {
                throw ConfigurationError(
                    key: prefix,
                    reason:
                        "expected entries `name: value`: a mapping of names to strings (thumb: \"w=256 h=256\") or a list of them (- \"thumb: w=256 h=256\")"
                )
            }
            leaves.append(prefix)
            return
        }
        if case .sequence(let items) = node, items.contains(where: { $0.scalar == nil }) {
            // `- thumb: w=256` is a mapping in YAML, not the string `thumb: w=256`.
            throw ConfigurationError(
                key: prefix.isEmpty ? "\"\"" : prefix,
                reason: "expected a list of strings; quote an entry that holds `: ` (- \"thumb: w=256 h=256\")")
        }
        guard case .mapping(let mapping) = node else {
            leaves.append(prefix)
            return
        }
        for (key, value) in mapping {
            let name = key.string ?? "\(key)"
            try collect(value, prefix: prefix.isEmpty ? name : "\(prefix).\(name)", into: &leaves)
        }
    }
}
