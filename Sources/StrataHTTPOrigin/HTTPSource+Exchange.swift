import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import Strata
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
        /// A 2xx's status (206 for a part) and `Content-Range`.
        var status = 200
        var contentRange: String?
    }

    /// The bytes a ranged GET asks for: `count` bytes from `offset`.
    struct ByteWindow: Sendable {
        var offset: Int
        var count: Int
    }

    /// Why one attempt failed.
    enum AttemptFailure: Error {
        case notFound
        case origin(HTTPOriginError.Kind, url: OriginURL, said: ServerRefusal? = nil)
    }

    /// Sends `method` for `url` (following redirects), retrying up to
    /// ``Configuration/maxRetries`` times after a jittered, doubling backoff when the failure may
    /// be transient and time is left; maps every failure to a ``SourceError``. With `window`, a
    /// GET asks for those bytes only.
    func perform(
        key: String, url: OriginURL, method: HTTPMethod, conditional: HTTPValidator?, window: ByteWindow? = nil
    ) async throws(SourceError) -> OriginResponse {
        let deadline = ContinuousClock.now + configuration.totalTimeout
        var attempt = 1
        while true {
            if isShutDownNow { throw SourceError(key: key, reason: .failed("the HTTP source is shut down")) }
            let failure: AttemptFailure
            do {
                return try await limiter.withPermit {
                    try await self.exchange(url: url, method: method, conditional: conditional, window: window, deadline: deadline)
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

    /// One attempt: the request and its redirects (each hop a new request to the resolved
    /// `Location`), each answer collected whole on the client's event loop. The client's read
    /// timeout bounds each wait for bytes (the head's included), and `deadline` the whole
    /// attempt, bodies included.
    private func exchange(
        url: OriginURL, method: HTTPMethod, conditional: HTTPValidator?, window: ByteWindow?, deadline: ContinuousClock.Instant
    ) async throws -> OriginResponse {
        var current = url
        var redirects = 0
        while true {
            let sentAt = WallClock.secondsSince1970()
            let response = try await send(current, method: method, conditional: conditional, window: window, deadline: deadline)
            let status = Int(response.status.code)
            switch status {
            case 200...299:
                let validator = HTTPValidator(
                    etag: response.headers.first(name: "etag"), lastModified: response.headers.first(name: "last-modified"))
                if method == .HEAD { return OriginResponse(outcome: .headOnly, validator: validator) }
                return OriginResponse(
                    outcome: .body(response.body), validator: validator, status: status,
                    contentRange: response.headers.first(name: "content-range"))
            case 304 where conditional != nil:
                return OriginResponse(outcome: .notModified, validator: conditional)
            case 301, 302, 303, 307, 308:
                guard let location = response.headers.first(name: "location") else {
                    throw AttemptFailure.origin(.invalidResponse("a \(status) redirect without a Location header"), url: current)
                }
                if redirects >= configuration.maxRedirects {
                    throw AttemptFailure.origin(.tooManyRedirects(limit: configuration.maxRedirects), url: url)
                }
                current = try resolveRedirect(location, from: current)
                redirects += 1
            case 404, 410:
                throw AttemptFailure.notFound
            case 405 where method == .HEAD, 501 where method == .HEAD:
                return OriginResponse(outcome: .headNotSupported, validator: nil)
            default:
                let said = ServerRefusal.read(headers: response.headers, body: response.body, sentAt: sentAt)
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

    /// Sends one request and collects its answer (a 2xx's body within
    /// ``Configuration/maxBodyBytes``, or the window's length of it: a 200 to a ranged GET is
    /// the whole file, whose transfer is stopped there); the static headers and the signature
    /// only to the base URL's origin.
    private func send(
        _ url: OriginURL, method: HTTPMethod, conditional: HTTPValidator?, window: ByteWindow?, deadline: ContinuousClock.Instant
    ) async throws -> CollectedResponse {
        var headers = HTTPHeaders()
        if let conditional {
            let header = conditional.conditionalHeader
            headers.replaceOrAdd(name: header.name, value: header.value)
        }
        if let window { headers.replaceOrAdd(name: "range", value: "bytes=\(window.offset)-\(window.offset + window.count - 1)") }
        if url.isSameOrigin(as: base) {
            for (name, value) in configuration.headers { headers.add(name: name, value: value) }
            // Last: the signature covers the headers as they go out.
            if let signer {
                do {
                    try signer.sign(&headers, method: method, url: url)
                } catch {
                    throw AttemptFailure.origin(.invalidResponse("the request could not be signed: \(error)"), url: url)
                }
            }
        }
        // Traced when the task has a context (the engine binds one only when tracing is on): a
        // client span per request sent, whose context goes to the origin as `traceparent`.
        let span = ServiceContext.current.map { Self.clientSpan(for: url, method: method, headers: &headers, parent: $0) }
        let request: HTTPClient.Request
        do {
            request = try HTTPClient.Request(url: url.description, method: method, headers: headers)
        } catch {
            span?.recordError(error)
            span?.end()
            throw AttemptFailure.origin(.invalidResponse("the request could not be made: \(error)"), url: url)
        }
        requestsSent.add(1, ordering: .relaxed)
        let remaining = max(deadline - ContinuousClock.now, .zero)
        do {
            let response = try await client.collect(
                request, bound: BodyBound(limit: configuration.maxBodyBytes, stopAt: window?.count),
                deadline: NIODeadline.now() + remaining.timeAmount)
            span?.attributes["http.response.status_code"] = Int(response.status.code)
            span?.end()
            return response
        } catch {
            span?.recordError(error)
            span?.end()
            if case .bodyTooLarge(let limit, let declared) = error as? CollectFailure {
                throw AttemptFailure.origin(.bodyTooLarge(limit: limit, declared: declared), url: url)
            }
            throw AttemptFailure.origin(Self.failureKind(of: error), url: url)
        }
    }

    /// The client span of one request to the origin (OpenTelemetry's HTTP client conventions;
    /// the URL's path is left out, as it holds the key), its context injected into
    /// `headers` (`traceparent`, with the tracer's propagation).
    private static func clientSpan(
        for url: OriginURL, method: HTTPMethod, headers: inout HTTPHeaders, parent: ServiceContext
    ) -> any Span {
        let span = InstrumentationSystem.tracer.startAnySpan(method.rawValue, context: parent, ofKind: .client)
        span.attributes["http.request.method"] = method.rawValue
        span.attributes["server.address"] = url.host
        span.attributes["server.port"] = url.effectivePort
        span.attributes["url.scheme"] = url.scheme
        InstrumentationSystem.instrument.inject(span.context, into: &headers, using: HTTPHeadersInjector())
        return span
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
