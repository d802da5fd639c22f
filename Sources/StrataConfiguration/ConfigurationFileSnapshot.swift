import Configuration
import Foundation
import Yams

/// The configuration file as the keys read it: YAML (or JSON) through swift-configuration's
/// `YAMLSnapshot`, after the named entries of ``ConfigurationKey/isNamed`` keys are written
/// the way people write them — a mapping (`presets: {thumb: "w=256 h=256"}`) or a list of
/// one-entry mappings (`- thumb: w=256`) — turned into the list of `name: value` strings those
/// keys read. `ConfigurationFileKeys` checks their shape first, naming the entry.
///
/// What ``ConfigurationLayers`` reloads the file with. Cost: the file parsed twice (once by
/// Yams here, once by the snapshot), at load and at each reload only.
public final class ConfigurationFileSnapshot: FileConfigSnapshot {
    public typealias ParsingOptions = YAMLSnapshot.ParsingOptions

    private let file: YAMLSnapshot

    public init(data: RawSpan, providerName: String, parsingOptions: ParsingOptions) throws {
        var bytes = [UInt8]()
        bytes.reserveCapacity(data.byteCount)
        data.withUnsafeBytes { bytes.append(contentsOf: $0) }
        // A file Yams cannot compose goes to the snapshot as it is, which reports the error.
        if let node = try? Yams.compose(yaml: String(decoding: bytes, as: UTF8.self)), let rewritten = NamedEntries.listed(node) {
            bytes = Array(try Yams.serialize(node: rewritten).utf8)
        }
        file = try YAMLSnapshot(data: bytes.span.bytes, providerName: providerName, parsingOptions: parsingOptions)
    }

    public var providerName: String { file.providerName }

    public func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        try file.value(forKey: key, type: type)
    }

    public var description: String { file.description }
    public var debugDescription: String { file.debugDescription }
}

/// The keys whose values are named entries (`name: value`), and their YAML forms.
package enum NamedEntries {
    /// The names of the keys with ``ConfigurationKey/isNamed``.
    package static let keys: Set<String> = Set(StrataConfiguration.keys.filter(\.isNamed).map(\.name))

    /// The entries of a named key's `node` as `name:value` strings: a mapping of scalars, or a
    /// sequence whose items are scalars (already `name: value`) or one-entry mappings of a
    /// scalar. `nil` when the node has another shape (`ConfigurationFileKeys` names it).
    package static func entries(of node: Node) -> [String]? {
        func entry(_ name: Node, _ value: Node) -> String? {
            guard let name = name.string, let value = value.scalar?.string else { return nil }
            return "\(name):\(value)"
        }
        switch node {
        case .scalar(let scalar): return [scalar.string]
        case .mapping(let mapping):
            var entries: [String] = []
            for (name, value) in mapping {
                guard let text = entry(name, value) else { return nil }
                entries.append(text)
            }
            return entries
        case .sequence(let items):
            var entries: [String] = []
            for item in items {
                if let scalar = item.scalar {
                    entries.append(scalar.string)
                } else if let mapping = item.mapping, mapping.count == 1, let pair = mapping.first, let text = entry(pair.key, pair.value) {
                    entries.append(text)
                } else {
                    return nil
                }
            }
            return entries
        case .alias: return nil
        }
    }

    /// `node` with every named key's mapping (or list of mappings) written as a list of
    /// strings; `nil` when there is nothing to rewrite.
    package static func listed(_ node: Node) -> Node? {
        var changed = false
        let result = rewrite(node, prefix: "", changed: &changed)
        return changed ? result : nil
    }

    private static func rewrite(_ node: Node, prefix: String, changed: inout Bool) -> Node {
        guard case .mapping(let mapping) = node else { return node }
        var pairs: [(Node, Node)] = []
        for (key, value) in mapping {
            let name = key.string ?? "\(key)"
            let path = prefix.isEmpty ? name : "\(prefix).\(name)"
            if keys.contains(path), value.scalar == nil, let entries = entries(of: value) {
                let strings = entries.map { Node.scalar(Node.Scalar($0, Tag(.str), .doubleQuoted)) }
                let list = Node.sequence(Node.Sequence(strings))
                if list != value { changed = true }
                pairs.append((key, list))
            } else {
                pairs.append((key, rewrite(value, prefix: path, changed: &changed)))
            }
        }
        return .mapping(Node.Mapping(pairs))
    }
}
