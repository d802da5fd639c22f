/// One variant of one image: the image's identity and the variant's size, mode and style —
/// what the memory tier holds an image under (its index compares the key string too).
///
/// Cost: four words to hash and compare; no string.
public struct VariantKey: Hashable, Sendable {
    /// The image (``CacheKey/entityID``).
    public var entity: ImageEntityID
    /// The variant.
    public var variant: VariantDescriptor

    public init(entity: ImageEntityID, variant: VariantDescriptor) {
        self.entity = entity
        self.variant = variant
    }
}
