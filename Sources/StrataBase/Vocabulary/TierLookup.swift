/// The one answer of a lookup that must not wait for I/O, for every tier: a hit, a miss, or
/// "would wait" (the answer needs disk I/O or an O(n) scan: ask again with a blocking call, on
/// a thread that may block). `Hit` is what the asker gets: a `CachedImage` from
/// `CacheTier.lookup(_:_:)`, a `DiskTier.Hit` from the disk tier's own API.
public enum TierLookup<Hit: Sendable>: Sendable {
    case hit(Hit)
    case miss
    case wouldWait
}
