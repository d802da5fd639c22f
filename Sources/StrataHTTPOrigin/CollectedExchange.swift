import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import Strata

/// A whole answer to one request: its head and its body, bounded.
package struct CollectedResponse: Sendable {
    package var status: HTTPResponseStatus
    package var headers: HTTPHeaders
    /// The body: a 2xx's whole (or its first ``BodyBound/stopAt`` bytes); another status's first
    /// ``BodyBound/otherStatusBytes`` bytes, the rest dropped.
    package var body: [UInt8]
}

/// How much of a body ``HTTPClient/collect(_:bound:deadline:)`` keeps.
package struct BodyBound: Sendable {
    /// The most bytes a 2xx body may have: past it (declared or sent) the exchange fails with
    /// ``CollectFailure/bodyTooLarge(limit:declared:)`` and the transfer is aborted.
    package var limit: Int
    /// Keeps only a 2xx body's first `stopAt` bytes; the transfer stops when more arrive (the
    /// connection is then closed).
    package var stopAt: Int?

    /// What is kept of a body of any other status (an error page, a redirect's): enough for an
    /// S3 error's code and message.
    package static let otherStatusBytes = 64 << 10

    package init(limit: Int, stopAt: Int? = nil) {
        self.limit = limit
        self.stopAt = stopAt
    }
}

/// Why ``HTTPClient/collect(_:bound:deadline:)`` refused an answer.
package enum CollectFailure: Error, Equatable {
    case bodyTooLarge(limit: Int, declared: Int?)
}

extension HTTPClient {
    /// Sends `request` and collects its answer on the client's event loop, each body part
    /// appended where it arrives: one hop back to the caller per exchange, where the async
    /// body sequence makes one per part (about a tenth of a 257 KB fetch's CPU, measured with
    /// `strata-bench s3-fetch`). `deadline` bounds the whole exchange, the body included; the
    /// client's read timeout bounds each wait for bytes. Cancelling the task cancels the request.
    package func collect(_ request: HTTPClient.Request, bound: BodyBound, deadline: NIODeadline) async throws -> CollectedResponse {
        let collector = ResponseCollector(bound: bound)
        let task = execute(request: request, delegate: collector, deadline: deadline)
        do {
            return try await withTaskCancellationHandler {
                try await task.futureResult.get()
            } onCancel: {
                task.cancel()
            }
        } catch is ResponseCollector.Stopped {
            // The kept prefix is complete: the rest was not wanted.
            return try collector.stoppedResponse()
        }
    }
}

/// The delegate behind ``HTTPClient/collect(_:bound:deadline:)``. AsyncHTTPClient calls it on
/// the request's event loop, one call at a time; its state is behind a lock only because the
/// caller reads a stopped answer from another thread once the task has ended.
private final class ResponseCollector: HTTPClientResponseDelegate {
    typealias Response = CollectedResponse

    /// Thrown from a body part to end the transfer once the wanted prefix is kept.
    struct Stopped: Error {}

    private struct State {
        var head: HTTPResponseHead?
        var body: [UInt8] = []
        /// What this answer's body may hold: the bound for a 2xx, else the kept start.
        var keep = 0
        var isSuccess = false
        var stopped = false
    }

    private let bound: BodyBound
    private let state = Lock(State())

    init(bound: BodyBound) {
        self.bound = bound
    }

    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let eventLoop = task.eventLoop
        let declared = head.headers.first(name: "content-length").flatMap { Int($0) }
        let isSuccess = (200...299).contains(head.status.code)
        if isSuccess, bound.stopAt == nil, let declared, declared > bound.limit {
            return eventLoop.makeFailedFuture(CollectFailure.bodyTooLarge(limit: bound.limit, declared: declared))
        }
        state.withLock { state in
            state.head = head
            state.isSuccess = isSuccess
            state.keep = isSuccess ? (bound.stopAt ?? bound.limit) : BodyBound.otherStatusBytes
            // The declared length at once (within the bound), so that a large original is never
            // copied by the array's growth. A lying Content-Length reserves address space only:
            // pages not written are not resident.
            state.body.reserveCapacity(min(declared ?? (64 << 10), state.keep))
        }
        return eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let failure: (any Error)? = state.withLock { state in
            let room = state.keep - state.body.count
            let overflows = buffer.readableBytes > room
            if overflows && state.isSuccess && bound.stopAt == nil {
                return CollectFailure.bodyTooLarge(limit: bound.limit, declared: nil)
            }
            // One memcpy (appending the buffer's view would go byte by byte).
            let taken = min(buffer.readableBytes, room)
            buffer.withUnsafeReadableBytes { state.body.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0.prefix(taken))) }
            // Past a wanted prefix, or past another status's kept start: the rest is not read
            // (a body that ends exactly there leaves the connection open).
            guard overflows else { return nil }
            state.stopped = true
            return Stopped()
        }
        guard let failure else { return task.eventLoop.makeSucceededVoidFuture() }
        return task.eventLoop.makeFailedFuture(failure)
    }

    func didFinishRequest(task: HTTPClient.Task<Response>) throws -> CollectedResponse {
        try state.withLock { try Self.response(of: &$0) }
    }

    /// The answer kept when the transfer was stopped on purpose.
    func stoppedResponse() throws -> CollectedResponse {
        try state.withLock { state in
            guard state.stopped else { throw Stopped() }
            return try Self.response(of: &state)
        }
    }

    private static func response(of state: inout State) throws -> CollectedResponse {
        guard let head = state.head else { throw HTTPClientError.remoteConnectionClosed }
        let body = state.body
        state.body = []
        return CollectedResponse(status: head.status, headers: head.headers, body: body)
    }
}
