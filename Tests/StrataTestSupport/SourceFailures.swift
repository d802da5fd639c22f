import Strata

/// The ``SourceError`` `body` throws, or `nil` when it succeeds.
package func sourceFailure<T>(_ body: () async throws(SourceError) -> T) async -> SourceError? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}

extension SourceError {
    /// The origin failure, when that is the reason.
    package var origin: HTTPOriginError? {
        if case .origin(let error) = reason { return error }
        return nil
    }

    package var isNotFound: Bool {
        if case .notFound = reason { return true }
        return false
    }

    package var isInvalidKey: Bool {
        if case .invalidKey = reason { return true }
        return false
    }
}
