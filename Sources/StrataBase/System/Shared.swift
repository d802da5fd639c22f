/// One owned, non-copyable resource (a ``FileDescriptor``, a ``MappedRegion``) behind a
/// reference, for the places that must share it: a directory that hits keep using while the
/// watcher swaps in a new one, a table file that images handed out keep mapped. The resource is
/// released (closed, unmapped) when the last reference goes away. Cost: one allocation.
public final class Shared<Resource: ~Copyable>: @unchecked Sendable {
    /// The resource; borrow it (`shared.resource.rawValue`), never move it out.
    public let resource: Resource

    public init(_ resource: consuming Resource) { self.resource = resource }
}
