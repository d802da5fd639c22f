#!/usr/bin/env bash
# IIIF deep zoom into a 100-megapixel tiled JPEG 2000, cold and warm, in one run:
#
# 1. IIPImage (Debian's iipsrv, built with OpenJPEG; behind nginx) over the JP2 itself: its
#    resolution levels and tiles serve every request, no conversion.
# 2. Strata over the JP2 (`strata serve`, an empty pyramid directory): each pyramid tile is a
#    region decode of the file's own levels (JP2PyramidLevels), the tiles asked for first.
# 3. Strata over the same image as a baseline JPEG: its pyramid built in one streaming pass.
#
# For each: the first screen of a 1024×768 viewer from a cold start (info.json and the home
# level's tiles, 6 connections), the rest of the zoom trace (Scripts/bench-iiif/trace.py; its
# slowest tile), for Strata the time until every tile is in its table, then wrk over the trace
# (IIIF_BENCH_SECONDS, default 15), and peak RSS. Then the quality of Strata's tiles from the
# JP2: up to 12 tiles of each level of the trace, as PNG, against a full decode of the JP2
# (opj_decompress) resized over the tile's region (Lanczos-3 and box, Pillow), per level; and
# the same for the JPEG's pyramid against the JPEG's full decode.
#
# The image: a 12800×8000 mosaic of two fixture photos (Scripts/bench-iiif/common.sh), encoded
# by opj_compress with 1024-px tiles, 7 resolution levels and a 10:1 rate (about 2.4 bits a
# pixel: an access copy), and as a JPEG at quality 85.
#
# Usage: Scripts/bench-iiif-jp2.sh [--json]
#   STRATA=path  the strata binary (default .build/release/strata)
#   BIG_DIR=dir  where the images go (default a fresh temporary directory; about 1 GB)
# Needs what Scripts/bench-iiif-big.sh needs, opj_compress/opj_decompress (libopenjp2-tools)
# and Python with Pillow and numpy (a venv in .build/jp2-bench-venv is made if missing).
# Servers listen on 127.0.0.1 only and are stopped by pid on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
json=0
for arg in "$@"; do
    case "$arg" in
        --json) json=1 ;;
        *) echo "usage: $0 [--json]" >&2; exit 2 ;;
    esac
done
strata=${STRATA:-$root/.build/release/strata}
seconds=${IIIF_BENCH_SECONDS:-15}
iipsrv=/usr/lib/iipimage-server/iipsrv.fcgi
tile=256
for tool in nginx spawn-fcgi vips wrk curl python3 opj_compress opj_decompress; do
    command -v "$tool" >/dev/null || { echo "missing $tool (see the header of $0)" >&2; exit 2; }
done
[ -x "$iipsrv" ] || { echo "missing $iipsrv (apt-get install iipimage-server)" >&2; exit 2; }
[ -x "$strata" ] || { echo "no strata binary at $strata (swift build -c release, or STRATA=…)" >&2; exit 2; }
venv=.build/jp2-bench-venv
if ! "$venv/bin/python" -c 'import PIL, numpy' 2>/dev/null; then
    python3 -m venv "$venv" && "$venv/bin/pip" install -q pillow numpy >&2
fi

log() { echo "[bench-iiif-jp2] $*" >&2; }
. Scripts/bench-iiif/common.sh

bench_work pyramids nginx
export VIPS_WARNING=0

image=mosaic-100mp
mosaic "$image.jpg" 5 5
mkdir -p "$work/tiff" "$work/jp2src" "$work/jpgsrc"
size=$(vipsheader -f width "$work/source/$image.jpg")x$(vipsheader -f height "$work/source/$image.jpg")
if [ ! -s "$work/tiff/$image.jp2" ]; then
    vips copy "$work/source/$image.jpg" "$work/$image.tif"
    start=$(now_ms)
    opj_out=$( { /usr/bin/time -f 'peak_kb=%M' opj_compress -i "$work/$image.tif" -o "$work/tiff/$image.jp2" \
        -t 1024,1024 -n 7 -r 10 >/dev/null; } 2>&1)
    encode_ms=$(( $(now_ms) - start ))
    rm -f "$work/$image.tif"
    echo "$encode_ms $(sed -n 's/.*peak_kb=\([0-9]*\).*/\1/p' <<<"$opj_out")" >"$work/tiff/$image.jp2.encode"
fi
# The encode's time and peak RSS, kept beside the file (a BIG_DIR reused keeps its JP2).
read -r encode_ms encode_kb <"$work/tiff/$image.jp2.encode" || { encode_ms=0; encode_kb=0; }
ln -f "$work/tiff/$image.jp2" "$work/jp2src/$image.jp2"
ln -f "$work/source/$image.jpg" "$work/jpgsrc/$image.jpg"
log "$image: $size; JP2 $(stat -c %s "$work/tiff/$image.jp2") bytes (opj_compress $encode_ms ms), JPEG $(stat -c %s "$work/source/$image.jpg") bytes"

python3 Scripts/bench-iiif/trace.py "$tile" 1024 768 6 "$image.jp2:$size" >"$work/trace.tsv"
paths() {  # KIND-FILTER PREFIX NAME: the trace's paths for one server
    awk -F'\t' -v want="$1" -v prefix="$2" -v name="$3" \
        '(want == "all") || (want == "home" && $3 == "home") || (want == "rest" && $3 != "home") { print prefix name "/" $2 }' \
        "$work/trace.tsv"
}
for kind in home rest all; do
    paths "$kind" /iiif/3/ "$image.jp2" >"$work/jp2-$kind.txt"
    paths "$kind" /iiif/3/ "$image.jpg" >"$work/jpg-$kind.txt"
    paths "$kind" "$iip_prefix" "$image.jp2" >"$work/iip-$kind.txt"
done
log "trace of $(wc -l <"$work/trace.tsv") tiles ($(wc -l <"$work/jp2-home.txt") on the first screen)"

fcgi_port=$(free_port)
nginx_port=$(free_port)
strata_port=$(free_port)

# 1. IIPImage over the JP2.
iip_nginx
iip_start 2 "$image.jp2"
stop "${iip_pids[@]}"
iip_start 2 "$image.jp2"
iip_first=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$nginx_port" 6 "$work/iip-home.txt" "$iip_prefix$image.jp2/info.json")
iip_rest=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$nginx_port" 6 "$work/iip-rest.txt")
wrk_run "$nginx_port" "$work/iip-all.txt"
iip_tps=$run_tps iip_p99=$run_p99 iip_errors=$run_errors
iip_kb=0
for pid in "${iip_pids[@]}"; do iip_kb=$(( iip_kb + $(peak_kb "$pid") )); done
log "iipsrv: first screen $iip_first; rest $iip_rest; wrk $iip_tps tiles/s p99 $iip_p99 ms, $iip_errors errors; peak RSS $iip_kb kB (2 processes)"
stop "${iip_pids[@]}"

# 2 and 3. Strata, cold, over the JP2 and over the JPEG.
strata_run() {  # SOURCE-DIR NAME PREFIX: sets run_first run_rest run_built run_kb and the wrk figures
    rm -rf "$work/pyramids"
    sync
    "$strata" serve --host 127.0.0.1 --port "$strata_port" --source-directory "$1" --memory-pressure-enabled false \
        --iiif-pyramid-path "$work/pyramids" --iiif-tile-size "$tile" --iiif-max-source-pixels 4000000000 >>"$work/strata.log" 2>&1 &
    pids+=($!)
    strata_pid=$!
    wait_http "http://127.0.0.1:$strata_port/healthz"
    local began
    began=$(now_ms)
    run_first=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$strata_port" 6 "$work/$3-home.txt" "/iiif/3/$2/info.json")
    run_rest=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$strata_port" 6 "$work/$3-rest.txt")
    until curl -fsS "http://127.0.0.1:$strata_port/stats" | python3 -c \
        'import json, sys; p = json.load(sys.stdin)["pyramids"]; sys.exit(0 if p["buildsFinished"] + p["buildsFailed"] >= 1 else 1)'; do
        sleep 0.05
    done
    run_built=$(( $(now_ms) - began ))
    wrk_run "$strata_port" "$work/$3-all.txt"
    run_kb=$(peak_kb "$strata_pid")
}
strata_run "$work/jp2src" "$image.jp2" jp2
jp2_first=$run_first jp2_rest=$run_rest jp2_built=$run_built jp2_tps=$run_tps jp2_p99=$run_p99 jp2_errors=$run_errors jp2_kb=$run_kb
log "strata over the JP2: first screen $jp2_first; rest $jp2_rest; every tile after $jp2_built ms; wrk $jp2_tps tiles/s p99 $jp2_p99 ms; peak RSS $jp2_kb kB"
# Quality: tiles of the trace as PNG, while this server is up.
awk -F'\t' '{ print $2 }' "$work/trace.tsv" >"$work/suffixes.txt"
opj_decompress -i "$work/tiff/$image.jp2" -o "$work/jp2-full.ppm" -threads 2 >/dev/null 2>&1 || opj_decompress -i "$work/tiff/$image.jp2" -o "$work/jp2-full.ppm" >/dev/null
quality_script=$(cat <<'PY'
import io, json, sys, urllib.request
from collections import defaultdict
import numpy as np
from PIL import Image
Image.MAX_IMAGE_PIXELS = None
port, name, reference, suffixes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
full = Image.open(reference).convert("RGB")
by_level = defaultdict(list)
for line in open(suffixes):
    region, size = line.strip().split("/")[:2]
    x, y, w, h = map(int, region.split(","))
    out_w = int(size.rstrip(","))
    by_level[round(w / out_w)].append((x, y, w, h, out_w))
def psnr(a, b):
    m = ((a.astype(np.float64) - b.astype(np.float64)) ** 2).mean()
    return 99.0 if m == 0 else 10 * np.log10(255 ** 2 / m)
result = {}
for scale in sorted(by_level):
    tiles = by_level[scale]
    picked = tiles[:: max(1, len(tiles) // 12)][:12]
    lan, box = [], []
    for x, y, w, h, out_w in picked:
        url = f"http://127.0.0.1:{port}/iiif/3/{name}/{x},{y},{w},{h}/{out_w},/0/default.png"
        tile = np.asarray(Image.open(io.BytesIO(urllib.request.urlopen(url).read())).convert("RGB"))
        crop = full.crop((x, y, x + w, y + h))
        size = (tile.shape[1], tile.shape[0])
        lan.append(psnr(tile, np.asarray(crop.resize(size, Image.LANCZOS))))
        box.append(psnr(tile, np.asarray(crop.resize(size, Image.BOX))))
    result[str(scale)] = {"tiles": len(picked), "min_lanczos_db": round(min(lan), 2), "min_box_db": round(min(box), 2)}
print(json.dumps(result))
PY
)
jp2_quality=$("$venv/bin/python" -c "$quality_script" "$strata_port" "$image.jp2" "$work/jp2-full.ppm" "$work/suffixes.txt")
log "strata over the JP2, tiles against the full decode resized (per scale factor): $jp2_quality"
rm -f "$work/jp2-full.ppm"
stop "$strata_pid"

strata_run "$work/jpgsrc" "$image.jpg" jpg
jpg_first=$run_first jpg_rest=$run_rest jpg_built=$run_built jpg_tps=$run_tps jpg_p99=$run_p99 jpg_errors=$run_errors jpg_kb=$run_kb
log "strata over the JPEG: first screen $jpg_first; rest $jpg_rest; every tile after $jpg_built ms; wrk $jpg_tps tiles/s p99 $jpg_p99 ms; peak RSS $jpg_kb kB"
vips copy "$work/source/$image.jpg" "$work/jpg-full.ppm"
jpg_quality=$("$venv/bin/python" -c "$quality_script" "$strata_port" "$image.jpg" "$work/jpg-full.ppm" "$work/suffixes.txt")
log "strata over the JPEG, tiles against the full decode resized: $jpg_quality"
rm -f "$work/jpg-full.ppm"
stop "$strata_pid"

report=$(python3 - "$image" "$size" "$encode_ms" "$encode_kb" "$(stat -c %s "$work/tiff/$image.jp2")" "$(stat -c %s "$work/source/$image.jpg")" \
    "$iip_first" "$iip_rest" "$iip_tps" "$iip_p99" "$iip_errors" "$iip_kb" \
    "$jp2_first" "$jp2_rest" "$jp2_built" "$jp2_tps" "$jp2_p99" "$jp2_errors" "$jp2_kb" "$jp2_quality" \
    "$jpg_first" "$jpg_rest" "$jpg_built" "$jpg_tps" "$jpg_p99" "$jpg_errors" "$jpg_kb" "$jpg_quality" <<'PY'
import json, sys
a = sys.argv[1:]
def kv(text):
    return {k: float(v) for k, v in (w.split("=") for w in text.split())}
def server(first, rest, tps, p99, errors, kb, built=None, quality=None):
    f, r = kv(first), kv(rest)
    out = {"first_screen_ms": f["ms"], "slowest_tile_cold_ms": max(f["max_ms"], r["max_ms"]), "rest_of_trace_ms": r["ms"],
           "cold_errors": int(f["errors"] + r["errors"]), "tiles_per_s": float(tps), "p99_ms": float(p99),
           "errors": int(errors), "peak_rss_kb": int(kb)}
    if built is not None: out["every_tile_ms"] = float(built)
    if quality is not None: out["tile_psnr_by_scale"] = json.loads(quality)
    return out
iip = server(a[6], a[7], a[8], a[9], a[10], a[11])
jp2 = server(a[12], a[13], a[15], a[16], a[17], a[18], a[14], a[19])
jpg = server(a[20], a[21], a[23], a[24], a[25], a[26], a[22], a[27])
print(json.dumps({
    "image": a[0], "size": a[1], "jp2": {"bytes": int(a[4]), "opj_compress_ms": float(a[2]), "opj_compress_peak_rss_kb": int(a[3]),
    "options": "-t 1024,1024 -n 7 -r 10"}, "jpeg_bytes": int(a[5]), "tile": 256,
    "iipimage_over_jp2": iip, "strata_over_jp2": jp2, "strata_over_jpeg": jpg,
    "ratios": {
        "jp2_first_screen_vs_iip": round(jp2["first_screen_ms"] / iip["first_screen_ms"], 3),
        "jp2_first_screen_vs_jpeg_pyramid": round(jp2["first_screen_ms"] / jpg["first_screen_ms"], 3),
        "jp2_slowest_tile_vs_jpeg_pyramid": round(jp2["slowest_tile_cold_ms"] / jpg["slowest_tile_cold_ms"], 3),
        "jp2_warm_tiles_per_s_vs_iip": round(jp2["tiles_per_s"] / iip["tiles_per_s"], 3) if iip["tiles_per_s"] else None,
    },
}))
PY
)
if [ "$json" -eq 1 ]; then
    echo "$report"
else
    python3 -c "$(cat <<'PY'
import json, sys
r = json.loads(sys.argv[1])
for key, label in (("iipimage_over_jp2", "IIPImage over the JP2"), ("strata_over_jp2", "Strata over the JP2"), ("strata_over_jpeg", "Strata over the JPEG")):
    s = r[key]
    extra = f", every tile after {s['every_tile_ms']:.0f} ms" if "every_tile_ms" in s else ""
    print(f"{label}: first screen {s['first_screen_ms']:.0f} ms, slowest cold tile {s['slowest_tile_cold_ms']:.0f} ms{extra}; "
          f"warm {s['tiles_per_s']} tiles/s p99 {s['p99_ms']} ms; peak RSS {s['peak_rss_kb'] // 1024} MiB; errors {s['errors'] + s['cold_errors']}")
    if "tile_psnr_by_scale" in s: print(f"  tiles against the full decode resized: {s['tile_psnr_by_scale']}")
print("ratios:", r["ratios"])
PY
)" "$report"
fi
