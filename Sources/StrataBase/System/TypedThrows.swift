/// Runs `body`, which can only throw `E` but goes through an API that rethrows untyped errors
/// (`Array.withUnsafeBytes` and friends), and restores the typed error.
@inlinable
package func rethrowingTyped<R, E: Error>(_ type: E.Type, _ body: () throws -> R) throws(E) -> R {
    do {
        return try body()
    } catch let error as E {
        throw error
    } catch {
        preconditionFailure("unexpected error type: \(error)")
    }
}
