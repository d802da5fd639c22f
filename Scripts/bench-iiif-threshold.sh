#!/usr/bin/env bash
# Where `iiif.tiledAbove` belongs: one viewer's deep-zoom session into photo mosaics of growing
# size, served by `strata serve` cut from whole-image variants (the small-image path) and from
# a tile pyramid (the big-image path), each from a cold start with empty caches.
#
# The images are mosaics of two fixture photos (2560×1600 each, baseline JPEG at quality 85,
# made with libvips): 1×1 (4 MP), 2×1 (8 MP), 2×2 (16 MP), 3×3 (37 MP), 4×4 (66 MP) and 5×5 (102 MP). For each image
# and path, a fresh server (memory tier only, so nothing is kept between runs; for the
# whole-variant path `source.maxPixels` is raised to take the largest) answers the trace of
# Scripts/bench-iiif/trace.py (a 1024×768 viewer: the first screen, then zooms to full
# resolution and pans, 6 connections): the time to the first screen, the time for the whole
# trace, its slowest tile, errors, and the server's peak RSS (VmHWM).
#
# Usage: Scripts/bench-iiif-threshold.sh [--json]
#   STRATA=path  the strata binary (default .build/release/strata).
#   BIG_DIR=dir  where the mosaics go (default a fresh temporary directory).
# Needs libvips-tools, curl, python3. The server listens on 127.0.0.1 only and is stopped by pid.
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
tile=256
for tool in vips curl python3; do
    command -v "$tool" >/dev/null || { echo "missing $tool (see the header of $0)" >&2; exit 2; }
done
[ -x "$strata" ] || { echo "no strata binary at $strata (swift build -c release, or STRATA=…)" >&2; exit 2; }

log() { echo "[bench-iiif-threshold] $*" >&2; }
. Scripts/bench-iiif/common.sh

bench_work pyramids
export VIPS_WARNING=0
mkdir -p "$work/source"
port=$(free_port)
run() {  # IMAGE SIZE TILED-ABOVE → "first=… total=… slowest=… errors=… peak_kb=…"
    rm -rf "$work/pyramids"
    sync
    "$strata" serve --host 127.0.0.1 --port "$port" --source-directory "$work/source" --memory-pressure-enabled false \
        --source-max-pixels 200000000 --iiif-pyramid-path "$work/pyramids" --iiif-tile-size "$tile" \
        --iiif-tiled-above "$3" >>"$work/strata.log" 2>&1 &
    pids+=($!)
    local pid=$!
    wait_http "http://127.0.0.1:$port/healthz"
    python3 Scripts/bench-iiif/trace.py "$tile" 1024 768 6 "$1:$2" >"$work/trace.tsv"
    awk -F'\t' '$3 == "home" { print "/iiif/3/" $1 "/" $2 }' "$work/trace.tsv" >"$work/home.txt"
    awk -F'\t' '$3 != "home" { print "/iiif/3/" $1 "/" $2 }' "$work/trace.tsv" >"$work/rest.txt"
    local began first rest total
    began=$(now_ms)
    first=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$port" 6 "$work/home.txt" "/iiif/3/$1/info.json")
    rest=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$port" 6 "$work/rest.txt")
    total=$(( $(now_ms) - began ))
    echo "first=$(field ms "$first") total=$total slowest=$(python3 -c "print(max($(field max_ms "$first"), $(field max_ms "$rest")))") errors=$(( $(field errors "$first") + $(field errors "$rest") )) peak_kb=$(peak_kb "$pid") tiles=$(wc -l <"$work/trace.tsv")"
    stop "$pid"
}

results=()
for grid in 1x1 2x1 2x2 3x3 4x4 5x5; do
    image="mosaic-$grid.jpg"
    mosaic "$image" "${grid%x*}" "${grid#*x}"
    size=$(vipsheader -f width "$work/source/$image")x$(vipsheader -f height "$work/source/$image")
    whole=$(run "$image" "$size" 1000000000000)
    log "$image $size, whole-image variants: $whole"
    tiled=$(run "$image" "$size" 1)
    log "$image $size, tile pyramid: $tiled"
    results+=("$image $size $whole | $tiled")
done
printf '%s\n' "${results[@]}" | python3 -c "$(cat <<'PY'
import json, sys
json_out = sys.argv[1] == "1"
rows = []
for line in sys.stdin:
    head, tiled = line.split("|")
    words = head.split()
    image, size = words[0], words[1]
    kv = lambda ws: {k: float(v) for k, v in (w.split("=") for w in ws)}
    w, t = kv(words[2:]), kv(tiled.split())
    w_, h_ = map(int, size.split("x"))
    rows.append({"image": image, "size": size, "megapixels": round(w_ * h_ / 1e6, 1), "trace_tiles": int(t["tiles"]),
                 "whole_variants": {"first_screen_ms": w["first"], "trace_ms": w["total"], "slowest_tile_ms": w["slowest"],
                                    "errors": int(w["errors"]), "peak_rss_kb": int(w["peak_kb"])},
                 "tile_pyramid": {"first_screen_ms": t["first"], "trace_ms": t["total"], "slowest_tile_ms": t["slowest"],
                                  "errors": int(t["errors"]), "peak_rss_kb": int(t["peak_kb"])}})
if json_out:
    print(json.dumps(rows))
else:
    for r in rows:
        w, t = r["whole_variants"], r["tile_pyramid"]
        print(f"{r['image']} {r['size']} ({r['megapixels']} MP, {r['trace_tiles']} tiles):")
        print(f"  whole-image variants: first screen {w['first_screen_ms']:.0f} ms, trace {w['trace_ms']:.0f} ms, "
              f"slowest tile {w['slowest_tile_ms']:.0f} ms, peak RSS {w['peak_rss_kb'] // 1024} MiB, errors {w['errors']}")
        print(f"  tile pyramid:         first screen {t['first_screen_ms']:.0f} ms, trace {t['trace_ms']:.0f} ms, "
              f"slowest tile {t['slowest_tile_ms']:.0f} ms, peak RSS {t['peak_rss_kb'] // 1024} MiB, errors {t['errors']}")
PY
)" "$json"
