import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import Strata
import Synchronization
import Tracing

/// One request to the origin and what became of it: the retry, the timeouts, the redirects
/// and the bounded body.
extension HTTPSource {
    /// What the origin answered (after redirects).
    struct OriginResponse: Sendable {
        enum Outcome: Sendable {
            /// A 2xx to a GET, with its whole body.
            case body([UInt8])
            /// A 2xx to a HEAD.
            case headOnly
            /// A 304 to a conditional request.
            case notModified
            /// 405 or 501 to a HEAD: the origin has no cheap version check.
            case headNotSupported
        }

        var outcome: Outcome
        /// The response's `ETag` or `Last-Modified`.
        var validator: HTTPValidator?
    }

    /// Why one attempt failed.
    enum AttemptFailure: Error {
        case notFound
        case origin(HTTPOriginError.Kind, url: OriginURL, said: ServerRefusal? = nil)
    }

    /// When the last byte arrived (the read timeout counts from here), lock-free.
    final class Progress: Sendable {
        private let start = ContinuousClock.now
        private let nanoseconds = Atomic<Int64>(0)

        func touch() {
            let elapsed = (ContinuousClock.now - start).components
            nanoseconds.store(elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000, ordering: .relaxed)
        }

        var last: ContinuousClock.Instant { start + .nanoseconds(nanoseconds.load(ordering: .relaxed)) }
    }

    /// Sends `method` for `url` (following redirects), retrying up to
    /// ``Configuration/maxRetries`` times after a jittered, doubling backoff when the failure may
    /// be transient and time is left; maps every failure to a ``SourceError``. With `prefix`, a
    /// GET asks for the first `prefix` bytes only.
    func perform(
        key: String, url: OriginURL, method: HTTPMethod, conditional: HTTPValidator?, prefix: Int? = nil
    ) async throws(SourceError) -> OriginResponse {
        let deadline = ContinuousClock.now + configuration.totalTimeout
        var attempt = 1
        while true {
            if isShutDownNow { throw SourceError(key: key, reason: .failed("the HTTP source is shut down")) }
            let failure: AttemptFailure
            do {
                return try await limiter.withPermit {
                    try await self.attempt(url: url, method: method, conditional: conditional, prefix: prefix, deadline: deadline)
                }
            } catch let error as AttemptFailure {
                failure = error
            } catch {
                // Cancellation (the permit's wait, or the exchange's); anything else is a
                // client failure outside a request.
                if Task.isCancelled { throw SourceError(key: key, reason: .cancelled) }
                failure = .origin(Self.failureKind(of: error), url: url)
            }
            if Task.isCancelled { throw SourceError(key: key, reason: .cancelled) }
            switch failure {
            case .notFound:
                validators.remember(nil, forKey: key)
                throw SourceError(key: key, reason: .notFound)
            case .origin(let kind, let failedURL, let said):
                let error = HTTPOriginError(
                    kind: kind, url: "\(failedURL)", attempts: attempt, settings: settingsPrefix, serverCode: said?.code,
                    serverMessage: said?.message, clockSkewSeconds: said?.clockSkewSeconds)
                let backoff = Self.backoff(configuration.retryBackoff, afterAttempt: attempt)
                guard attempt <= configuration.maxRetries, error.isRetryable, ContinuousClock.now + backoff < deadline else {
                    throw SourceError(key: key, reason: .origin(error))
                }
                logger.warning(
                    "origin request failed; retrying",
                    metadata: [
                        "key": "\(key)", "error": "\(error)", "backoff": "\(backoff)",
                        "retry": "\(attempt) of \(configuration.maxRetries)",
                    ])
                do {
                    try await Task.sleep(for: backoff)
                } catch {
                    throw SourceError(key: key, reason: .cancelled)
                }
                attempt += 1
            }
        }
    }

    /// The pause before retry `attempt` (1, 2, …): `base` doubled per earlier retry, times a
    /// random factor in 0.5...1 (so that nodes that failed together do not retry together).
    static func backoff(_ base: Duration, afterAttempt attempt: Int) -> Duration {
        let doubled = base * (1 << min(max(attempt - 1, 0), 10))
        return doubled * Double.random(in: 0.5...1)
    }

    /// One attempt, raced against a watchdog that enforces the read timeout (no byte for
    /// that long, the head included) and the total deadline, while the body streams too
    /// (the client's own deadline stops at the response head).
    private func attempt(
        url: OriginURL, method: HTTPMethod, conditional: HTTPValidator?, prefix: Int?, deadline: ContinuousClock.Instant
    ) async throws -> OriginResponse {
        let progress = Progress()
        let readTimeout = configuration.readTimeout
        return try await withThrowingTaskGroup(of: OriginResponse?.self) { group in
            group.addTask {
                try await self.exchange(
                    url: url, method: method, conditional: conditional, prefix: prefix, deadline: deadline, progress: progress)
            }
            group.addTask {
                try await Self.watchdog(progress: progress, readTimeout: readTimeout, deadline: deadline, url: url)
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let result { return result }
            }
            throw CancellationError()
        }
    }

    /// Throws the timeout that fires first; returns `nil` when cancelled (the exchange ended).
    private static func watchdog(
        progress: Progress, readTimeout: Duration, deadline: ContinuousClock.Instant, url: OriginURL
    ) async throws -> OriginResponse? {
        while true {
            let now = ContinuousClock.now
            if now >= deadline { throw AttemptFailure.origin(.timeout(.total), url: url) }
            let readDeadline = progress.last + readTimeout
            if now >= readDeadline { throw AttemptFailure.origin(.timeout(.read), url: url) }
            do {
                try await Task.sleep(until: min(deadline, readDeadline), clock: .continuous)
            } catch {
                return nil
            }
        }
    }

    /// The request and its redirects (each hop a new request to the resolved `Location`).
    private func exchange(
        url: OriginURL, method: HTTPMethod, conditional: HTTPValidator?, prefix: Int?, deadline: ContinuousClock.Instant,
        progress: Progress
    ) async throws -> OriginResponse {
        var current = url
        var redirects = 0
        while true {
            let sentAt = WallClock.secondsSince1970()
            let response = try await send(current, method: method, conditional: conditional, prefix: prefix, deadline: deadline)
            progress.touch()
            let status = Int(response.status.code)
            switch status {
            case 200...299:
                let validator = HTTPValidator(
                    etag: response.headers.first(name: "etag"), lastModified: response.headers.first(name: "last-modified"))
                if method == .HEAD {
                    await Self.discard(response.body)
                    return OriginResponse(outcome: .headOnly, validator: validator)
                }
                let limit = configuration.maxBodyBytes
                let declared = response.headers.first(name: "content-length").flatMap { Int($0) }
                // A prefix asked for is at most `prefix` bytes, whatever the origin sends (a 200
                // to a ranged GET is the whole file: its transfer is stopped there).
                if prefix == nil, let declared, declared > limit {
                    throw AttemptFailure.origin(.bodyTooLarge(limit: limit, declared: declared), url: current)
                }
                let bytes = try await Self.collect(
                    response.body, limit: limit, stopAt: prefix, expected: declared, progress: progress, url: current)
                return OriginResponse(outcome: .body(bytes), validator: validator)
            case 304 where conditional != nil:
                await Self.discard(response.body)
                return OriginResponse(outcome: .notModified, validator: conditional)
            case 301, 302, 303, 307, 308:
                await Self.discard(response.body)
                guard let location = response.headers.first(name: "location") else {
                    throw AttemptFailure.origin(.invalidResponse("a \(status) redirect without a Location header"), url: current)
                }
                if redirects >= configuration.maxRedirects {
                    throw AttemptFailure.origin(.tooManyRedirects(limit: configuration.maxRedirects), url: url)
                }
                current = try resolveRedirect(location, from: current)
                redirects += 1
            case 404, 410:
                await Self.discard(response.body)
                throw AttemptFailure.notFound
            case 405 where method == .HEAD, 501 where method == .HEAD:
                await Self.discard(response.body)
                return OriginResponse(outcome: .headNotSupported, validator: nil)
            default:
                let said = await ServerRefusal.read(response, sentAt: sentAt)
                throw AttemptFailure.origin(.status(status), url: current, said: said)
            }
        }
    }

    /// The next hop of a redirect from `current`, refusing what leaves the base URL's origin
    /// (unless allowed) or does not parse.
    private func resolveRedirect(_ location: String, from current: OriginURL) throws -> OriginURL {
        let next: OriginURL
        do {
            next = try current.resolving(location: location)
        } catch {
            throw AttemptFailure.origin(.redirectRefused(location: location, reason: error.reason), url: current)
        }
        if !configuration.allowCrossHostRedirects && !next.isSameOrigin(as: base) {
            throw AttemptFailure.origin(
                .redirectRefused(
                    location: location,
                    reason: "it leads to another origin than \(base.scheme)://\(base.host):\(base.effectivePort) "
                        + "(source.http.allowCrossHostRedirects is false)"),
                url: current)
        }
        return next
    }

    /// Sends one request; the static headers and the signature only to the base URL's origin.
    private func send(
        _ url: OriginURL, method: HTTPMethod, conditional: HTTPValidator?, prefix: Int?, deadline: ContinuousClock.Instant
    ) async throws -> HTTPClientResponse {
        var request = HTTPClientRequest(url: url.description)
        request.method = method
        if let conditional {
            let header = conditional.conditionalHeader
            request.headers.replaceOrAdd(name: header.name, value: header.value)
        }
        if let prefix { request.headers.replaceOrAdd(name: "range", value: "bytes=0-\(prefix - 1)") }
        if url.isSameOrigin(as: base) {
            for (name, value) in configuration.headers { request.headers.add(name: name, value: value) }
            // Last: the signature covers the headers as they go out.
            if let signer {
                do {
                    try signer.sign(&request, method: method, url: url)
                } catch {
                    throw AttemptFailure.origin(.invalidResponse("the request could not be signed: \(error)"), url: url)
                }
            }
        }
        requestsSent.add(1, ordering: .relaxed)
        let remaining = max(deadline - ContinuousClock.now, .zero)
        // Traced when the task has a context (the engine binds one only when tracing is on): a
        // client span per request sent, whose context goes to the origin as `traceparent`.
        let span = ServiceContext.current.map { Self.clientSpan(for: url, method: method, request: &request, parent: $0) }
        do {
            let response = try await client.execute(request, deadline: NIODeadline.now() + remaining.timeAmount)
            span?.attributes["http.response.status_code"] = Int(response.status.code)
            span?.end()
            return response
        } catch {
            span?.recordError(error)
            span?.end()
            throw AttemptFailure.origin(Self.failureKind(of: error), url: url)
        }
    }

    /// The client span of one request to the origin (OpenTelemetry's HTTP client conventions;
    /// the URL's path is left out, as it holds the key), its context injected into `request`'s
    /// headers (`traceparent`, with the tracer's propagation).
    private static func clientSpan(
        for url: OriginURL, method: HTTPMethod, request: inout HTTPClientRequest, parent: ServiceContext
    ) -> any Span {
        let span = InstrumentationSystem.tracer.startAnySpan(method.rawValue, context: parent, ofKind: .client)
        span.attributes["http.request.method"] = method.rawValue
        span.attributes["server.address"] = url.host
        span.attributes["server.port"] = url.effectivePort
        span.attributes["url.scheme"] = url.scheme
        InstrumentationSystem.instrument.inject(span.context, into: &request.headers, using: HTTPHeadersInjector())
        return span
    }

    /// The body, refusing more than `limit` bytes as they arrive (the transfer is aborted when
    /// the body's iterator is dropped); with `stopAt`, its first `stopAt` bytes, the rest unread.
    private static func collect(
        _ body: HTTPClientResponse.Body, limit: Int, stopAt: Int?, expected: Int?, progress: Progress, url: OriginURL
    ) async throws -> [UInt8] {
        var bytes: [UInt8] = []
        // The declared length at once (within the limit), so that a large original is never
        // copied by the array's growth. A lying Content-Length reserves address space only:
        // pages not written are not resident.
        bytes.reserveCapacity(min(expected ?? (64 << 10), stopAt ?? limit, limit))
        do {
            for try await buffer in body {
                progress.touch()
                if let stopAt, buffer.readableBytes >= stopAt - bytes.count {
                    let wanted = stopAt - bytes.count
                    buffer.withUnsafeReadableBytes { bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0.prefix(wanted))) }
                    return bytes
                }
                guard buffer.readableBytes <= limit - bytes.count else {
                    throw AttemptFailure.origin(.bodyTooLarge(limit: limit, declared: nil), url: url)
                }
                // One memcpy (appending the buffer's view would go byte by byte).
                buffer.withUnsafeReadableBytes { bytes.append(contentsOf: $0) }
            }
        } catch let error as AttemptFailure {
            throw error
        } catch {
            throw AttemptFailure.origin(failureKind(of: error), url: url)
        }
        return bytes
    }

    /// Reads and drops a small body (an error page, a redirect's) so that the connection can
    /// be reused; a larger one is dropped unread (the client closes that connection).
    private static func discard(_ body: HTTPClientResponse.Body) async {
        var seen = 0
        do {
            for try await buffer in body {
                seen += buffer.readableBytes
                if seen > 64 << 10 { return }
            }
        } catch {}
    }

    /// What a client error means for the caller. Never quotes header values.
    package static func failureKind(of error: any Error) -> HTTPOriginError.Kind {
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout, .tlsHandshakeTimeout, .getConnectionFromPoolTimeout: return .timeout(.connect)
            case .readTimeout: return .timeout(.read)
            case .deadlineExceeded: return .timeout(.total)
            case .remoteConnectionClosed: return .connection("the origin closed the connection before the response ended")
            default:
                let text = String(describing: error)
                if text.contains("HeaderField") { return .invalidResponse("a header was refused by the HTTP client (values not shown)") }
                return .connection(text)
            }
        }
        return .connection(String(describing: error))
    }
}

/// Writes propagated context (`traceparent`, `tracestate`) into an origin request's headers.
struct HTTPHeadersInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout HTTPHeaders) {
        carrier.replaceOrAdd(name: key, value: value)
    }
}
