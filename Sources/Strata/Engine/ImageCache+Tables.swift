extension ImageCache {
    func tableHit(_ request: ImageRequest, lane: FlightLane) async throws(ImageCacheError) -> CachedImage? {
        nil
    }
}
