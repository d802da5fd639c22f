import Foundation
import Strata
import StrataTestSupport
import Testing

@testable import StrataService

/// `GET /viewer`: the page itself (escaping, the 400 without an id), and the viewer driven by
/// headless Chromium over a real server: tiles fetched, counted per tier, a screenshot taken.
@Suite("IIIF viewer")
struct ViewerBrowserTests {
    static let photo = "jpeg%2Fpath-2560x1600.jpg"

    @Test func pageEscapesTheIdentifier() async throws {
        let server = try await TestServer.start(disk: false)
        let nasty = "a\"</script><b>&'x"
        let query = try #require(nasty.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        let answer = try await server.get("/viewer?id=\(query)")
        #expect(answer.status == 200)
        #expect(answer.header("Content-Type") == "text/html; charset=utf-8")
        let html = answer.text
        #expect(html.contains("const STRATA_ID = \"a\\\"\\u003c/script\\u003e\\u003cb\\u003e\\u0026'x\";"))
        #expect(html.contains("<span id=\"name\">a&quot;&lt;/script&gt;&lt;b&gt;&amp;&#39;x</span>"))
        // The only `</script>` is the page's own.
        #expect(html.components(separatedBy: "</script>").count == 2)

        let plain = try await server.get("/viewer?id=\(Self.photo)")
        #expect(plain.status == 200)
        #expect(plain.text.contains("const STRATA_ID = \"jpeg/path-2560x1600.jpg\";"))

        for target in ["/viewer", "/viewer?id="] {
            let missing = try await server.get(target)
            #expect(missing.status == 400)
            #expect(missing.header("Content-Type")?.hasPrefix("application/json") == true)
            #expect(missing.errorCode == "bad_parameter")
        }
        try await server.stop()
    }

    @Test func escapingHelpers() {
        #expect(ViewerPage.scriptString("a\n\u{2028}\u{1}") == "\"a\\n\\u2028\\u0001\"")
        #expect(ViewerPage.htmlEscaped("plain/key.jpg") == "plain/key.jpg")
    }

    /// Debian's Chromium, installed with apt-get when missing and running as root; `nil` when
    /// it cannot be had (the browser test is then skipped, visibly, by `.enabled(if:)`).
    static let chromium: String? = {
        let candidates = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) { return found }
        guard getuid() == 0 else { return nil }
        _ = try? run("/usr/bin/env", ["DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq", "chromium"], timeout: 600)
        return candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) })
    }()

    /// Runs `executable` with `arguments`; kills it (by its pid) when it overruns `timeout`
    /// seconds. Returns its standard output.
    static func run(_ executable: String, _ arguments: [String], timeout: Double) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let pid = process.processIdentifier
        let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        watchdog.cancel()
        return String(decoding: data, as: UTF8.self)
    }

    /// Headless Chromium's arguments for `url`, with `extra` before the URL.
    static func browser(_ extra: [String], _ url: String, budget: Int = 600_000) -> [String] {
        [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--user-data-dir=\(makeScratchDirectory("chromium"))", "--virtual-time-budget=\(budget)",
        ] + extra + [url]
    }

    /// Runs the viewer page at `url` in headless Chromium (off the cooperative pool: it blocks)
    /// until its script is done; checks it finished without an error and returns its tile
    /// counters (per tier, `total`, `errors`).
    static func runViewer(_ browser: String, _ url: String) async throws -> [String: Int] {
        let counters = try await pageCounters(browser, url)
        return try #require(counters as? [String: Int], "counters: \(counters)")
    }

    /// Runs a page at `url` that ends with `<body data-done="true">` (and `data-error="…"` on a
    /// failure) and writes JSON into `<pre id="counters">`; checks that it finished without an
    /// error (`errorMark` nowhere in the DOM) and returns that JSON.
    static func pageCounters(
        _ browser: String, _ url: String, errorMark: String = "data-error", budget: Int = 600_000
    ) async throws -> Any {
        let dom = try await offThePool { try Self.run(browser, Self.browser(["--dump-dom"], url, budget: budget), timeout: 240) }
        let json = try #require(dom.firstRange(of: "<pre id=\"counters\">").map { dom[$0.upperBound...] }, "DOM: \(dom.prefix(2000))")
        let end = try #require(json.firstRange(of: "</pre>"))
        let shown = json[..<end.lowerBound]
        #expect(dom.contains("data-done=\"true\""), "the script did not finish; counters: \(shown); DOM: \(dom.prefix(1000))")
        #expect(!dom.contains(errorMark), "counters: \(shown); DOM: \(dom.prefix(1000))")
        return try JSONSerialization.jsonObject(with: Data(shown.utf8))
    }

    @Test(
        "the viewer zooms and pans in headless Chromium, tiles come from cached variants",
        .enabled(if: chromium != nil, "no chromium at /usr/bin/chromium and apt-get could not install it: browser test skipped"),
        .timeLimit(.minutes(10)))
    func headlessChromium() async throws {
        let browser = try #require(Self.chromium)
        let server = try await TestServer.start()
        let url = "http://127.0.0.1:\(server.port)/viewer?id=\(Self.photo)&script=zoomin,zoomin,zoomin,pan:300:200"
        let counters = try await Self.runViewer(browser, url)
        print("viewer counters: \(counters)")
        #expect((counters["total"] ?? 0) > 0)
        #expect(counters["errors"] == 0)
        #expect((counters["memory"] ?? 0) + (counters["disk"] ?? 0) + (counters["encoded"] ?? 0) > 0)

        // A screenshot of the same page, for a person to look at.
        let folder = URL(fileURLWithPath: fixturesDirectory).deletingLastPathComponent().appendingPathComponent(".build/test-output")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let png = folder.appendingPathComponent("viewer.png").path
        try? FileManager.default.removeItem(atPath: png)
        _ = try await offThePool {
            try Self.run(browser, Self.browser(["--screenshot=\(png)", "--window-size=1024,768", "--hide-scrollbars"], url), timeout: 240)
        }
        print("viewer screenshot: \(png)")
        let size = (try? FileManager.default.attributesOfItem(atPath: png)[.size] as? Int) ?? 0
        #expect(size > 20_000, "screenshot \(png) is \(size) bytes")
        let signature = FileManager.default.contents(atPath: png)?.prefix(4)
        #expect(signature.map(Array.init) == [0x89, 0x50, 0x4E, 0x47])
        try await server.stop()
    }

    /// A JPEG (its pyramid from one streaming pass) and the same image as a tiled JPEG 2000
    /// (`opj_compress`, 1024-px tiles, 6 levels, 10:1: its pyramid from its own levels).
    @Test(
        "the viewer on a big image: its tiles come from the pyramid built as they are asked for",
        .enabled(if: chromium != nil, "no chromium at /usr/bin/chromium and apt-get could not install it: browser test skipped"),
        .timeLimit(.minutes(10)), arguments: ["big.jpg", "big.jp2"])
    func headlessChromiumOnABigImage(name: String) async throws {
        let browser = try #require(Self.chromium)
        let originals = makeScratchDirectory("big-originals")
        // 6144 × 4096 (100 MB decoded, beside the other tests), above a 20 MP iiif.tiledAbove.
        let jpeg = try await offThePool { try Mosaic.jpeg(PixelSize(width: 6144, height: 4096)) }
        try Data(jpeg).write(to: URL(fileURLWithPath: originals + "/big.jpg"))
        if name == "big.jp2" {
            let tiff = originals + "/big.tif"
            _ = try await offThePool {
                try Data(TIFFWriter.tiff(try ImageDecoder().decode(jpeg), .rgb)).write(to: URL(fileURLWithPath: tiff))
                _ = try ExternalTools.run(
                    "opj_compress", ["-i", tiff, "-o", originals + "/big.jp2", "-t", "1024,1024", "-n", "6", "-r", "10"])
            }
            try FileManager.default.removeItem(atPath: tiff)
        }
        let server = try await TestServer.start(
            ["source.directory": originals, "iiif.pyramidPath": makeScratchDirectory("pyramids"), "iiif.tiledAbove": "20000000"],
            disk: false, sourceDirectory: false)
        let url = "http://127.0.0.1:\(server.port)/viewer?id=\(name)&script=zoomin,zoomin,zoomin,zoomin,pan:300:200"
        let counters = try await Self.runViewer(browser, url)
        print("viewer counters (\(name)): \(counters)")
        #expect((counters["total"] ?? 0) > 0 && counters["errors"] == 0)
        let stats = try JSONSerialization.jsonObject(with: Data(try await server.get("/stats").body)) as? [String: Any]
        let pyramids = try #require(stats?["pyramids"] as? [String: Any])
        #expect(pyramids["buildsStarted"] as? Int == 1 && pyramids["buildsFailed"] as? Int == 0)
        #expect((pyramids["tileHits"] as? Int ?? 0) + (pyramids["tileWaits"] as? Int ?? 0) > 0)
        try await server.stop()
    }

    /// OpenSeadragon (`Scripts/openseadragon.sh`: fetched into .build/, never committed); `nil`
    /// when it cannot be had (the test that drives it is then skipped, visibly).
    static let openSeadragon: String? = {
        let root = URL(fileURLWithPath: fixturesDirectory).deletingLastPathComponent().path
        let path = (try? run(root + "/Scripts/openseadragon.sh", [], timeout: 300))?.trimmingCharacters(in: .whitespacesAndNewlines)
        return path.flatMap { FileManager.default.isReadableFile(atPath: $0) ? $0 : nil }
    }()

    /// The OpenSeadragon page's virtual time budget, in milliseconds: a day (see its `whenLoaded`).
    static let openSeadragonBudget = 86_400_000

    /// A page that opens `info` in OpenSeadragon, zooms in three times by 4 (to full resolution)
    /// and pans, each step once every tile in view is loaded; it then writes what it counted.
    static func openSeadragonPage(script: String, info: String) -> String {
        """
        <!doctype html><html><body style="margin:0">
        <div id="viewer" style="width:1024px;height:768px"></div><pre id="counters"></pre>
        <script src="file://\(script)"></script>
        <script>
        const counts = { loaded: 0, failed: 0, levels: {}, steps: 0 };
        // The counters are shown as they change: a page that never finishes shows where it stopped.
        const show = () => { document.getElementById("counters").textContent = JSON.stringify(counts); };
        function done(error) {
          show();
          if (error) document.body.setAttribute("data-error", error);
          document.body.setAttribute("data-done", "true");
        }
        window.addEventListener("error", (e) => done("script error: " + e.message));
        const viewer = OpenSeadragon({ element: document.getElementById("viewer"), tileSources: \(ViewerPage.scriptString(info)),
          showNavigationControl: false, animationTime: 0, blendTime: 0, immediateRender: true });
        viewer.addHandler("open-failed", (e) => done("open-failed: " + e.message));
        // A failed tile is never loaded again (no retries are configured): the page stops there.
        viewer.addHandler("tile-load-failed", (e) => {
          counts.failed += 1;
          done("tile-load-failed: " + e.message + " " + e.tile.getUrl());
        });
        viewer.addHandler("tile-loaded", (e) => {
          counts.loaded += 1;
          counts.levels[e.tile.level] = (counts.levels[e.tile.level] || 0) + 1;
          show();
        });
        const steps = [() => viewer.viewport.zoomBy(4), () => viewer.viewport.zoomBy(4), () => viewer.viewport.zoomBy(4),
          () => viewer.viewport.panBy(new OpenSeadragon.Point(0.05, 0.03))];
        // Loaded: a frame drawn since the step (or a step that changed nothing: a zoom already
        // at its limit draws nothing), nothing loading, every tile in view there. Polled on a
        // timer, whose virtual time runs as fast as the page idles: the page runs under a virtual
        // budget of a day (openSeadragonBudget), so that on a slow machine OpenSeadragon (which
        // draws on real frames) is never cut short; a page stuck for good polls the day away
        // (a minute or two) and says where it stopped.
        function whenLoaded(then, unchanged) {
          const item = viewer.world.getItemAt(0);
          let drawn = unchanged === true, polls = 0;
          viewer.addOnceHandler("update-viewport", () => { drawn = true; });
          const check = () => {
            const state = { drawn: drawn, jobs: viewer.imageLoader.jobsInProgress, fullyLoaded: item.getFullyLoaded() };
            if (state.drawn && state.jobs === 0 && state.fullyLoaded) return then();
            if (++polls % 100 === 0) { counts.waiting = { step: counts.steps, polls: polls, ...state }; show(); }
            setTimeout(check, 100);
          };
          setTimeout(check, 500);
        }
        function next() {
          const step = steps.shift();
          if (!step) {
            counts.maxLevel = viewer.world.getItemAt(0).source.maxLevel;
            counts.imageZoom = viewer.viewport.viewportToImageZoom(viewer.viewport.getZoom(true));
            done();
            return;
          }
          counts.steps += 1;
          show();
          const before = viewer.viewport.getBounds(true);
          step();
          viewer.viewport.applyConstraints(true);
          whenLoaded(next, viewer.viewport.getBounds(true).equals(before));
        }
        viewer.addHandler("open", () => whenLoaded(next));
        </script></body></html>
        """
    }

    /// OpenSeadragon itself, as an archive's viewer would use it, on a tiled JPEG 2000 (11 MP,
    /// `opj_compress`, above a 10 MP `iiif.tiledAbove`): its IIIF 3 info.json, and every tile it
    /// asks for from the first screen to full resolution, from the pyramid built as they come.
    @Test(
        "OpenSeadragon opens a JPEG 2000 and zooms to full resolution",
        .enabled(if: chromium != nil, "no chromium at /usr/bin/chromium and apt-get could not install it: browser test skipped"),
        .enabled(if: openSeadragon != nil, "Scripts/openseadragon.sh could not fetch OpenSeadragon: its browser test skipped"),
        .timeLimit(.minutes(10)))
    func openSeadragonOnAJP2() async throws {
        let browser = try #require(Self.chromium)
        let script = try #require(Self.openSeadragon)
        let originals = makeScratchDirectory("osd-originals")
        let jpeg = try await offThePool { try Mosaic.jpeg(PixelSize(width: 4096, height: 2730)) }
        let tiff = originals + "/scan.tif"
        _ = try await offThePool {
            try Data(TIFFWriter.tiff(try ImageDecoder().decode(jpeg), .rgb)).write(to: URL(fileURLWithPath: tiff))
            _ = try ExternalTools.run("opj_compress", ["-i", tiff, "-o", originals + "/scan.jp2", "-t", "512,512", "-n", "6", "-r", "10"])
        }
        try FileManager.default.removeItem(atPath: tiff)
        let server = try await TestServer.start(
            ["source.directory": originals, "iiif.pyramidPath": makeScratchDirectory("pyramids"), "iiif.tiledAbove": "10000000"],
            disk: false, sourceDirectory: false)
        let page = makeScratchDirectory("osd-page") + "/viewer.html"
        let info = "http://127.0.0.1:\(server.port)/iiif/3/scan.jp2/info.json"
        try Self.openSeadragonPage(script: script, info: info).write(toFile: page, atomically: true, encoding: .utf8)
        let counts = try #require(
            try await Self.pageCounters(browser, "file://" + page, errorMark: "data-error=\"", budget: Self.openSeadragonBudget)
                as? [String: Any])
        print("OpenSeadragon: \(counts)")
        let levels = try #require(counts["levels"] as? [String: Int])
        let maxLevel = try #require(counts["maxLevel"] as? Int)
        #expect(counts["failed"] as? Int == 0)
        #expect((counts["loaded"] as? Int ?? 0) > 0)
        // Its full resolution, and the first screen's level well below it.
        #expect((levels[String(maxLevel)] ?? 0) > 0, "no full-resolution tile: \(levels)")
        #expect(levels.keys.compactMap(Int.init).min().map { $0 <= maxLevel - 2 } == true, "\(levels)")
        let stats = try JSONSerialization.jsonObject(with: Data(try await server.get("/stats").body)) as? [String: Any]
        let pyramids = try #require(stats?["pyramids"] as? [String: Any])
        #expect(pyramids["buildsStarted"] as? Int == 1 && pyramids["buildsFailed"] as? Int == 0)
        try await server.stop()
    }
}
