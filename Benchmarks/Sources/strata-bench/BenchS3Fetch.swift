import ArgumentParser
import Foundation
import Strata
import StrataHTTPOrigin
import StrataS3

/// `strata-bench s3-fetch --endpoint URL --bucket B --key K`: S3Source's own CPU per fetch
/// against a cold render of the same bytes.
struct BenchS3FetchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "s3-fetch",
        abstract: "S3Source's CPU per fetch (signing, the exchange, the body) against a cold render's.",
        discussion: """
            In one process, on this process's CPU clock (every thread: the event loop's, the \
            cooperative pool's): --fetches sequential GETs of one object through S3Source \
            (signed) and, with --static-endpoint, the same object from a plain HTTP server through \
            S3Source and through HTTPSource (signed and unsigned: the difference is S3Source's own \
            part), interleaved in rounds so that machine noise hits them alike; the CPU of one \
            signature alone; then cold renders \
            of the fetched bytes (shrink-on-load decode and resample, as the source tier renders) \
            at each --sides. Prints each one's CPU per operation and the fetch's share of each \
            render. Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (any pair when the \
            endpoint does not check signatures). Use a release build; the endpoint should keep \
            connections open, as S3 does (Scripts/bench-objectstorage.py starts one).
            """
    )

    @Option(help: "The S3 endpoint, e.g. http://127.0.0.1:9000 (path-style addressing).")
    var endpoint: String

    @Option(help: "The bucket.")
    var bucket: String

    @Option(help: "The object's key.")
    var key: String

    @Option(
        help: """
            A plain HTTP server (nginx) that serves the bucket's objects as files at the same paths \
            (/BUCKET/KEY): S3Source and HTTPSource fetch the same bytes from it, signed and \
            unsigned, so that their difference is S3Source's own cost (signing, its headers).
            """)
    var staticEndpoint: String?

    @Option(help: "Fetches of each kind (after 20 untimed).")
    var fetches = 400

    @Option(help: "Renders per side (after one untimed).")
    var renders = 40

    @Option(parsing: .upToNextOption, help: "Render sides (fit in a square).")
    var sides: [Int] = [256, 1024]

    @Flag(help: "Print one JSON object instead of a table.")
    var json = false

    func validate() throws {
        guard fetches >= 50, renders >= 10 else { throw ValidationError("--fetches must be ≥ 50 and --renders ≥ 10") }
        guard !sides.isEmpty, sides.allSatisfy({ $0 > 0 }) else { throw ValidationError("--sides must be positive") }
    }

    struct Output: Codable {
        var objectBytes: Int
        var fetches: Int
        /// S3Source from --endpoint.
        var s3CpuMsPerFetch: Double
        var s3WallMsPerFetch: Double
        /// S3Source and HTTPSource from --static-endpoint.
        var staticS3CpuMsPerFetch: Double?
        var staticHTTPCpuMsPerFetch: Double?
        /// One SigV4 signature of a GET (the canonical request, its hash, the key and the HMAC).
        var signCpuMsPerRequest: Double
        var renders: [Render]

        struct Render: Codable {
            var side: Int
            var cpuMsPerRender: Double
            var s3FetchShare: Double
        }
    }

    func run() async throws {
        #if DEBUG
        if !json { print("warning: this is a debug build; benchmark with `swift build -c release`") }
        #endif
        let environment = ProcessInfo.processInfo.environment
        let credentials =
            AWSCredentials.fromEnvironment(environment) ?? AWSCredentials(accessKeyID: "bench", secretAccessKey: "bench")
        func s3Source(_ endpoint: String) throws -> S3Source {
            var configuration = S3Source.Configuration(
                endpoint: S3Endpoint(bucket: bucket, endpoint: endpoint, addressing: .path), credentials: credentials)
            configuration.maxRetries = 0
            return try S3Source(configuration: configuration)
        }
        // The fetchers, each measured in rounds of 25, alternated.
        var fetchers: [any ImageSource] = [try s3Source(endpoint)]
        if let staticEndpoint {
            fetchers.append(try s3Source(staticEndpoint))
            var configuration = HTTPSource.Configuration(
                baseURL: staticEndpoint + (staticEndpoint.hasSuffix("/") ? "" : "/") + bucket + "/")
            configuration.maxRetries = 0
            fetchers.append(try HTTPSource(configuration: configuration))
        }
        var bytes: [UInt8] = []
        for _ in 0..<20 {
            for fetcher in fetchers {
                let fetched = try await fetcher.fetch(key: key).bytes
                if !bytes.isEmpty && fetched != bytes { throw ValidationError("the endpoints answer different bytes for \(key)") }
                bytes = fetched
            }
        }
        var cpu = [Double](repeating: 0, count: fetchers.count)
        var s3Wall = 0.0
        var done = 0
        while done < fetches {
            let count = min(25, fetches - done)
            for (index, fetcher) in fetchers.enumerated() {
                let c0 = processCPUSeconds(), w0 = DispatchTime.now().uptimeNanoseconds
                for _ in 0..<count { _ = try await fetcher.fetch(key: key) }
                cpu[index] += processCPUSeconds() - c0
                if index == 0 { s3Wall += Double(DispatchTime.now().uptimeNanoseconds - w0) / 1e9 }
            }
            done += count
        }
        for fetcher in fetchers {
            if let source = fetcher as? S3Source { try await source.shutdown() }
            if let source = fetcher as? HTTPSource { try await source.shutdown() }
        }
        let perFetch = cpu.map { 1000 * $0 / Double(fetches) }

        // One signature, as S3Source makes it for a GET.
        let signer = SigV4Signer(credentials: credentials, region: "us-east-1")
        let host = endpoint.split(separator: "/").dropFirst().first.map(String.init) ?? "localhost"
        let signs = 20_000
        let s0 = processCPUSeconds()
        var sink = 0
        for _ in 0..<signs {
            let added = signer.sign(
                method: "GET", path: "/\(bucket)/\(key)", query: [], headers: [("host", host)],
                payloadHash: SigV4Signer.emptyPayloadHash, date: SigV4Date.now())
            sink &+= added.count
        }
        let signMs = 1000 * (processCPUSeconds() - s0) / Double(signs)
        precondition(sink == signs * 3)

        let renderer = ImageRenderer()
        var rows: [Output.Render] = []
        for side in sides {
            let request = RenderRequest(box: PixelSize(width: side, height: side), mode: .fit)
            _ = try renderer.render(bytes, request: request)
            let c0 = processCPUSeconds()
            for _ in 0..<renders { _ = try renderer.render(bytes, request: request) }
            let perRender = 1000 * (processCPUSeconds() - c0) / Double(renders)
            rows.append(Output.Render(side: side, cpuMsPerRender: perRender, s3FetchShare: perFetch[0] / perRender))
        }
        let output = Output(
            objectBytes: bytes.count, fetches: fetches, s3CpuMsPerFetch: perFetch[0], s3WallMsPerFetch: 1000 * s3Wall / Double(fetches),
            staticS3CpuMsPerFetch: perFetch.count > 1 ? perFetch[1] : nil, staticHTTPCpuMsPerFetch: perFetch.count > 2 ? perFetch[2] : nil,
            signCpuMsPerRequest: signMs, renders: rows)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(output), as: UTF8.self))
        } else {
            print("object: \(output.objectBytes) bytes, \(fetches) fetches of each kind")
            print(
                String(
                    format: "S3Source from --endpoint         %.3f ms CPU per fetch (%.3f ms wall)", perFetch[0], output.s3WallMsPerFetch))
            if let signed = output.staticS3CpuMsPerFetch, let unsigned = output.staticHTTPCpuMsPerFetch {
                print(String(format: "S3Source from --static-endpoint  %.3f ms CPU per fetch", signed))
                print(String(format: "HTTPSource, the same files       %.3f ms CPU per fetch", unsigned))
            }
            print(String(format: "one signature                    %.4f ms CPU", signMs))
            for row in rows {
                print(
                    String(
                        format: "render %5d px  %.3f ms CPU; an S3 fetch is %.1f %% of it", row.side, row.cpuMsPerRender,
                        100 * row.s3FetchShare))
            }
        }
    }
}

/// This process's CPU time (every thread), in seconds: nanosecond resolution, unlike
/// /proc/PID/stat's ticks.
func processCPUSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}
