/// The deep-zoom viewer at `GET /viewer?id=KEY`: one self-contained HTML page (no build step,
/// no external script) that reads the key's IIIF 3.0 `info.json` and draws the image from IIIF
/// tiles on a canvas, with wheel zoom around the cursor, drag and pinch, and +/−/reset buttons.
///
/// Use it to look at a cached image in a browser and to watch which tier serves each tile:
/// every tile is fetched with `fetch()`, its `X-Strata-Tier` header counted in an overlay and
/// in `<pre id="counters">` (JSON), also `window.strataViewer.counters`. For headless runs the
/// query may carry `script=zoomin,zoomout,reset,pan:DX:DY,…`: the steps run one after another,
/// each after the previous tiles settled, then `document.title` becomes `done` and
/// `<body data-done="true">` is set. Rendering the page is a few string concatenations; the
/// cost is in the tiles the browser asks for.
package enum ViewerPage {
    /// The whole page for `id` (the decoded key): the key HTML-escaped in the heading and
    /// embedded as a JSON string literal, safe inside `<script>`, for the script.
    package static func html(id: String) -> String {
        let name = htmlEscaped(id)
        let bar = """
            <div id="bar"><button id="zin" title="zoom in">+</button><button id="zout" title="zoom out">\u{2212}</button>\
            <button id="zreset" title="reset">reset</button><span id="name">\(name)</span></div>

            """
        var page = head
        page += "<title>Strata viewer: \(name)</title>\n"
        page += style
        page += "</head>\n<body>\n"
        page += bar
        page += body
        page += "<script>\nconst STRATA_ID = \(scriptString(id));\n"
        page += script
        page += "</script>\n</body>\n</html>\n"
        return page
    }

    /// `text` with `&`, `<`, `>`, `"` and `'` as character references: safe as element text
    /// and inside a quoted attribute.
    package static func htmlEscaped(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }

    /// `text` as a double-quoted JSON (and JavaScript) string literal that can sit inside an
    /// HTML `<script>` element: `<`, `>` and `&` as `\u` escapes (no `</script>` or `<!--`
    /// can appear), as are control characters and the line separators U+2028 and U+2029.
    package static func scriptString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "<", ">", "&", "\u{2028}", "\u{2029}":
                out += unicodeEscape(scalar)
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    out += unicodeEscape(scalar)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    private static func unicodeEscape(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16)
        return "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    private static let head = """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">

        """

    private static let style = """
        <style>
        html, body { margin: 0; height: 100%; overflow: hidden; background: #202124; color: #e8eaed;
          font: 13px system-ui, sans-serif; }
        #view { position: absolute; inset: 0; width: 100%; height: 100%; touch-action: none; cursor: grab; }
        #view.dragging { cursor: grabbing; }
        #bar { position: absolute; top: 8px; left: 8px; z-index: 2; display: flex; gap: 4px; align-items: center; }
        #bar button { min-width: 32px; height: 32px; font-size: 16px; border: 0; border-radius: 4px;
          background: rgba(255,255,255,0.85); color: #202124; cursor: pointer; }
        #name { margin-left: 8px; padding: 4px 8px; background: rgba(0,0,0,0.5); border-radius: 4px; }
        #overlay { position: absolute; right: 8px; bottom: 8px; z-index: 2; padding: 6px 10px;
          background: rgba(0,0,0,0.6); border-radius: 4px; font: 12px ui-monospace, monospace; white-space: pre; }
        #counters { display: none; }
        #error { position: absolute; top: 50px; left: 8px; right: 8px; z-index: 2; padding: 10px;
          background: #5c1d1d; border-radius: 4px; display: none; white-space: pre-wrap; }
        </style>

        """

    private static let body = """
        <canvas id="view"></canvas>
        <div id="overlay">loading…</div>
        <div id="error"></div>
        <pre id="counters">{}</pre>

        """

    // The viewer. Coordinates: `view.scale` is CSS pixels per full-resolution image pixel,
    // (`view.x`, `view.y`) the image point at the canvas's top-left corner.
    private static let script = #"""
        (function () {
          "use strict";
          const canvas = document.getElementById("view");
          const ctx = canvas.getContext("2d");
          const overlay = document.getElementById("overlay");
          const countersElement = document.getElementById("counters");
          const errorElement = document.getElementById("error");
          const base = "/iiif/3/" + encodeURIComponent(STRATA_ID);
          const tiers = ["memory", "disk", "table", "source", "encoded"];
          const counters = { memory: 0, disk: 0, table: 0, source: 0, encoded: 0, other: 0, total: 0, errors: 0 };
          const tiles = new Map();
          const started = new Set(), warm = new Set();
          const view = { scale: 1, x: 0, y: 0 };
          let info = null, factors = [1], tileWidth = 512, tileHeight = 512, pending = 0, waiters = [];

          function showCounters() {
            countersElement.textContent = JSON.stringify(counters);
            const lines = tiers.map(function (t) { return t.padEnd(8) + String(counters[t]).padStart(5); });
            if (counters.other) lines.push("other".padEnd(8) + String(counters.other).padStart(5));
            lines.push("total".padEnd(8) + String(counters.total).padStart(5));
            lines.push("errors".padEnd(8) + String(counters.errors).padStart(5));
            overlay.textContent = lines.join("\n");
          }

          function wake() {
            if (pending !== 0) return;
            const ready = waiters;
            waiters = [];
            ready.forEach(function (resolve) { resolve(); });
          }

          function settled() {
            return new Promise(function (resolve) { waiters.push(resolve); setTimeout(wake, 0); });
          }

          function decode(blob) {
            if (window.createImageBitmap) return createImageBitmap(blob);
            return new Promise(function (resolve, reject) {
              const img = new Image();
              const url = URL.createObjectURL(blob);
              img.onload = function () { URL.revokeObjectURL(url); resolve(img); };
              img.onerror = function () { URL.revokeObjectURL(url); reject(new Error("undecodable tile")); };
              img.src = url;
            });
          }

          function load(tile) {
            tile.state = "loading";
            pending++;
            fetch(tile.url).then(function (response) {
              counters.total++;
              if (!response.ok) throw new Error("HTTP " + response.status);
              const tier = response.headers.get("X-Strata-Tier");
              counters[tiers.indexOf(tier) >= 0 ? tier : "other"]++;
              return response.blob();
            }).then(function (blob) {
              // Settled once the bytes are here: the decode below draws when it is done (a
              // headless browser's virtual clock does not wait for decodes, only for fetches).
              decode(blob).then(function (image) {
                tile.image = image;
                tile.state = "ready";
                draw();
              }, function (error) {
                counters.errors++;
                tile.state = "failed";
                showCounters();
                console.warn("tile " + tile.url + ": " + error);
              });
            }).catch(function (error) {
              counters.errors++;
              tile.state = "failed";
              console.warn("tile " + tile.url + ": " + error);
            }).finally(function () {
              warm.add(tile.factor);
              pending--;
              showCounters();
              draw();
              wake();
            });
          }

          // The tile of level `factor` at (`col`, `row`), created (and fetched) on first use.
          function tile(factor, col, row) {
            const key = factor + "/" + col + "/" + row;
            let t = tiles.get(key);
            if (!t) {
              const x = col * tileWidth * factor, y = row * tileHeight * factor;
              const w = Math.min(tileWidth * factor, info.width - x), h = Math.min(tileHeight * factor, info.height - y);
              const url = base + "/" + x + "," + y + "," + w + "," + h + "/" + Math.ceil(w / factor) + ",/0/default.jpg";
              t = { x: x, y: y, w: w, h: h, url: url, state: "new", image: null };
              tiles.set(key, t);
            }
            // A level's first tile goes alone: the server decodes the level's variant for it and
            // crops the level's other tiles from that variant in memory.
            if (t.state === "new" && (warm.has(factor) || !started.has(factor))) {
              started.add(factor);
              t.factor = factor;
              load(t);
            }
            return t;
          }

          // The coarsest level whose pixels are still at least as fine as the screen's.
          function levelFor(scale) {
            const wanted = 1 / (scale * (window.devicePixelRatio || 1));
            let best = factors[0];
            factors.forEach(function (f) { if (f <= wanted && f > best) best = f; });
            return best;
          }

          function drawLevel(factor) {
            const width = canvas.clientWidth, height = canvas.clientHeight;
            const span = tileWidth * factor, spanY = tileHeight * factor;
            const x0 = Math.max(0, view.x), y0 = Math.max(0, view.y);
            const x1 = Math.min(info.width, view.x + width / view.scale), y1 = Math.min(info.height, view.y + height / view.scale);
            if (x1 <= x0 || y1 <= y0) return;
            for (let row = Math.floor(y0 / spanY); row * spanY < y1; row++) {
              for (let col = Math.floor(x0 / span); col * span < x1; col++) {
                const t = tile(factor, col, row);
                if (t.state !== "ready") continue;
                const sx = (t.x - view.x) * view.scale, sy = (t.y - view.y) * view.scale;
                // Half a pixel of overlap hides seams between neighbouring tiles.
                ctx.drawImage(t.image, sx, sy, t.w * view.scale + 0.5, t.h * view.scale + 0.5);
              }
            }
          }

          function draw() {
            if (!info) return;
            const ratio = window.devicePixelRatio || 1;
            const width = canvas.clientWidth, height = canvas.clientHeight;
            if (canvas.width !== Math.round(width * ratio) || canvas.height !== Math.round(height * ratio)) {
              canvas.width = Math.round(width * ratio);
              canvas.height = Math.round(height * ratio);
            }
            ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
            ctx.clearRect(0, 0, width, height);
            const coarsest = factors[factors.length - 1], level = levelFor(view.scale);
            if (coarsest !== level) drawLevel(coarsest);
            drawLevel(level);
          }

          function fitScale() {
            return Math.min(canvas.clientWidth / info.width, canvas.clientHeight / info.height);
          }

          function reset() {
            if (!info) return;
            view.scale = fitScale();
            view.x = -(canvas.clientWidth / view.scale - info.width) / 2;
            view.y = -(canvas.clientHeight / view.scale - info.height) / 2;
            draw();
          }

          // Zooms by `by` keeping the image point under the canvas point (`cx`, `cy`) in place.
          function zoomAt(by, cx, cy) {
            if (!info) return;
            const scale = Math.min(8, Math.max(fitScale() / 4, view.scale * by));
            const ix = view.x + cx / view.scale, iy = view.y + cy / view.scale;
            view.scale = scale;
            view.x = ix - cx / scale;
            view.y = iy - cy / scale;
            draw();
          }

          function pan(dx, dy) {
            view.x -= dx / view.scale;
            view.y -= dy / view.scale;
            draw();
          }

          function zoomIn() { zoomAt(2, canvas.clientWidth / 2, canvas.clientHeight / 2); }
          function zoomOut() { zoomAt(0.5, canvas.clientWidth / 2, canvas.clientHeight / 2); }

          canvas.addEventListener("wheel", function (event) {
            event.preventDefault();
            const rect = canvas.getBoundingClientRect();
            zoomAt(Math.pow(2, -event.deltaY / 300), event.clientX - rect.left, event.clientY - rect.top);
          }, { passive: false });

          // Pointer events: one pointer drags, two pinch (zoom around their midpoint, pan with it).
          const pointers = new Map();
          let gesture = null;
          function gestureOf() {
            const points = Array.from(pointers.values());
            const rect = canvas.getBoundingClientRect();
            if (points.length === 1) return { x: points[0].x - rect.left, y: points[0].y - rect.top, d: 0 };
            const a = points[0], b = points[1];
            return { x: (a.x + b.x) / 2 - rect.left, y: (a.y + b.y) / 2 - rect.top, d: Math.hypot(a.x - b.x, a.y - b.y) };
          }
          canvas.addEventListener("pointerdown", function (event) {
            canvas.setPointerCapture(event.pointerId);
            pointers.set(event.pointerId, { x: event.clientX, y: event.clientY });
            canvas.classList.add("dragging");
            gesture = gestureOf();
          });
          canvas.addEventListener("pointermove", function (event) {
            if (!pointers.has(event.pointerId)) return;
            pointers.set(event.pointerId, { x: event.clientX, y: event.clientY });
            const now = gestureOf();
            if (gesture && now.d > 0 && gesture.d > 0) zoomAt(now.d / gesture.d, now.x, now.y);
            if (gesture) pan(now.x - gesture.x, now.y - gesture.y);
            gesture = now;
          });
          function release(event) {
            pointers.delete(event.pointerId);
            gesture = pointers.size ? gestureOf() : null;
            if (!pointers.size) canvas.classList.remove("dragging");
          }
          canvas.addEventListener("pointerup", release);
          canvas.addEventListener("pointercancel", release);

          document.getElementById("zin").addEventListener("click", zoomIn);
          document.getElementById("zout").addEventListener("click", zoomOut);
          document.getElementById("zreset").addEventListener("click", reset);
          window.addEventListener("resize", draw);

          function finish(failed) {
            document.body.dataset.done = "true";
            if (failed) document.body.dataset.error = "true";
            document.title = "done";
          }

          async function runScript(steps) {
            for (const step of steps) {
              const parts = step.split(":");
              if (parts[0] === "zoomin") zoomIn();
              else if (parts[0] === "zoomout") zoomOut();
              else if (parts[0] === "reset") reset();
              else if (parts[0] === "pan") pan(Number(parts[1]) || 0, Number(parts[2]) || 0);
              else console.warn("unknown step " + step);
              await settled();
            }
          }

          const steps = (new URLSearchParams(location.search).get("script") || "").split(",").filter(Boolean);
          window.strataViewer = {
            counters: counters, view: view,
            get ready() { return info !== null && pending === 0; },
            zoomIn: zoomIn, zoomOut: zoomOut, pan: pan, reset: reset, settled: settled,
          };
          showCounters();

          fetch(base + "/info.json").then(function (response) {
            return response.text().then(function (text) {
              let body = null;
              try { body = JSON.parse(text); } catch (e) { body = null; }
              if (!response.ok || !body) {
                const message = body && body.message ? body.message : text;
                throw new Error("info.json: HTTP " + response.status + (message ? ": " + message : ""));
              }
              return body;
            });
          }).then(async function (body) {
            info = body;
            const first = (info.tiles && info.tiles[0]) || {};
            tileWidth = first.width || 512;
            tileHeight = first.height || tileWidth;
            factors = (first.scaleFactors || [1]).slice().sort(function (a, b) { return a - b; });
            reset();
            await settled();
            await runScript(steps);
            finish(false);
          }).catch(function (error) {
            errorElement.style.display = "block";
            errorElement.textContent = String(error.message || error);
            overlay.textContent = "no image";
            finish(true);
          });
        })();

        """#
}
