extension ImageCache {
    func tableHit(_ request: ImageRequest, operation: CoalescedOperation<Lane>) async throws(ImageCacheError) -> CachedImage? {
        nil
    }
}
