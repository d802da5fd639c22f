#!/usr/bin/env bash
# IIIF deep zoom into big images: IIPImage (iipsrv behind nginx, a pyramidal TIFF made first by
# `vips tiffsave --tile --pyramid`) against `strata serve` (the plain JPEG, its tile pyramid
# built by Strata in one streaming pass into an image table), same machine, same tile URLs.
#
# The images are photo mosaics made by this script with libvips from the Fixtures (2560×1600
# photos side by side): 20480×8000 (164 MP) and, with --gigapixel, 40960×25600 (1.05 GP), both
# baseline JPEG at quality 85. For each image:
#
# 1. IIPImage: `vips tiffsave --tile --pyramid --compression jpeg` (256 px tiles) timed, with
#    its peak RSS; then a fresh iipsrv: the first screen (info.json and the home level's tiles
#    of a 1024×768 viewer, 6 connections), one pass over the whole zoom trace
#    (Scripts/bench-iiif/trace.py), then wrk over the trace (IIIF_BENCH_SECONDS, default 15):
#    tiles/s, p99, errors; iipsrv's peak RSS.
# 2. Strata: `strata warm --iiif` (the pyramid alone, nothing served meanwhile) timed, with its
#    peak RSS; then a fresh `strata serve` with an empty pyramid directory (iiif.pyramidPath, tiles of
#    256 px): the first screen from a cold start (the pyramid is built as the tiles are asked
#    for), then the rest of the trace at once (its slowest tile is the longest wait while the
#    pyramid builds), the time until the whole pyramid is written (the last tile of level 0 is
#    written last), then wrk over the trace; Strata's peak RSS (VmHWM).
# 3. Strata over IIPImage's pyramidal TIFF (step 1's file): a fresh `strata serve` with an empty
#    pyramid directory, the same first screen and trace and the time until every tile is in its
#    table (each read from the TIFF's own level: the build's end in /stats), and its peak RSS.
#
# Usage: Scripts/bench-iiif-big.sh [--json] [--gigapixel | --jp2]
#   --jp2        the 100-megapixel tiled JPEG 2000 instead: IIPImage over the JP2, Strata over
#                the JP2 and over the same image as a JPEG, and the tiles' quality
#                (Scripts/bench-iiif-jp2.sh, which this runs).
#   STRATA=path  the strata binary (default .build/release/strata).
#   BIG_DIR=dir  where the images, TIFFs and pyramids go (default a fresh temporary directory;
#                the gigapixel case writes about 6 GB there).
# Needs what Scripts/bench-iiif.sh needs (nginx, iipimage-server, spawn-fcgi, libvips-tools,
# wrk, curl, python3). Servers listen on 127.0.0.1 only and are stopped by pid on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
json=0 gigapixel=0
for arg in "$@"; do
    case "$arg" in
        --json) json=1 ;;
        --gigapixel) gigapixel=1 ;;
        --jp2) exec Scripts/bench-iiif-jp2.sh $([[ " $* " == *" --json "* ]] && echo --json) ;;
        *) echo "usage: $0 [--json] [--gigapixel | --jp2]" >&2; exit 2 ;;
    esac
done
strata=${STRATA:-$root/.build/release/strata}
seconds=${IIIF_BENCH_SECONDS:-15}
iipsrv=/usr/lib/iipimage-server/iipsrv.fcgi
tile=256
for tool in nginx spawn-fcgi vips wrk curl python3; do
    command -v "$tool" >/dev/null || { echo "missing $tool (see the header of $0)" >&2; exit 2; }
done
[ -x "$iipsrv" ] || { echo "missing $iipsrv (apt-get install iipimage-server)" >&2; exit 2; }
[ -x "$strata" ] || { echo "no strata binary at $strata (swift build -c release, or STRATA=…)" >&2; exit 2; }

log() { echo "[bench-iiif-big] $*" >&2; }
. Scripts/bench-iiif/common.sh

bench_work pyramids tiff nginx
# The images: mosaics of two fixture photos at 2560×1600.
export VIPS_WARNING=0
mkdir -p "$work/source" "$work/tiff"
images=(mosaic-164mp.jpg)
mosaic mosaic-164mp.jpg 8 5
if [ "$gigapixel" -eq 1 ]; then
    images+=(mosaic-1gp.jpg)
    mosaic mosaic-1gp.jpg 16 16
fi

# nginx in front of iipsrv.
fcgi_port=$(free_port)
nginx_port=$(free_port)
iip_nginx
strata_port=$(free_port)
start_strata() {  # PYRAMID-DIR [SOURCE-DIR]
    "$strata" serve --host 127.0.0.1 --port "$strata_port" --source-directory "${2:-$work/source}" \
        --memory-pressure-enabled false --iiif-pyramid-path "$1" --iiif-tile-size "$tile" \
        --iiif-max-source-pixels 4000000000 >>"$work/strata.log" 2>&1 &
    pids+=($!)
    strata_pid=$!
    wait_http "http://127.0.0.1:$strata_port/healthz"
}

results=()
for image in "${images[@]}"; do
    size=$(vipsheader -f width "$work/source/$image")x$(vipsheader -f height "$work/source/$image")
    python3 Scripts/bench-iiif/trace.py "$tile" 1024 768 6 "$image:$size" >"$work/trace.tsv"
    awk -F'\t' '$3 == "home" { print "/iiif/3/" $1 "/" $2 }' "$work/trace.tsv" >"$work/strata-home.txt"
    awk -F'\t' '$3 != "home" { print "/iiif/3/" $1 "/" $2 }' "$work/trace.tsv" >"$work/strata-rest.txt"
    awk -F'\t' '{ print "/iiif/3/" $1 "/" $2 }' "$work/trace.tsv" >"$work/strata-all.txt"
    tiff="${image%.jpg}.tif"
    sed "s|^/iiif/3/$image/|$iip_prefix$tiff/|" "$work/strata-home.txt" >"$work/iip-home.txt"
    sed "s|^/iiif/3/$image/|$iip_prefix$tiff/|" "$work/strata-rest.txt" >"$work/iip-rest.txt"
    sed "s|^/iiif/3/$image/|$iip_prefix$tiff/|" "$work/strata-all.txt" >"$work/iip-all.txt"
    log "$image: $size, trace of $(wc -l <"$work/trace.tsv") tiles ($(wc -l <"$work/strata-home.txt") on the first screen)"

    # IIPImage.
    rm -f "$work/tiff/$tiff"
    sync
    start=$(now_ms)
    vips_out=$( { /usr/bin/time -f 'peak_kb=%M' vips tiffsave "$work/source/$image" "$work/tiff/$tiff" \
        --tile --pyramid --compression jpeg --tile-width "$tile" --tile-height "$tile"; } 2>&1)
    conversion_ms=$(( $(now_ms) - start ))
    conversion_kb=$(sed -n 's/.*peak_kb=\([0-9]*\).*/\1/p' <<<"$vips_out")
    log "vips tiffsave: $conversion_ms ms, peak RSS $conversion_kb kB"
    iip_start 2 "$tiff"
    # The probe above opened the TIFF: the cold run gets fresh processes.
    stop "${iip_pids[@]}"
    iip_start 2 "$tiff"
    iip_first=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$nginx_port" 6 "$work/iip-home.txt" "$iip_prefix$tiff/info.json")
    iip_rest=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$nginx_port" 6 "$work/iip-rest.txt")
    log "iipsrv first screen: $iip_first; rest of the trace: $iip_rest"
    wrk_run "$nginx_port" "$work/iip-all.txt"
    iip_tps=$run_tps iip_p99=$run_p99 iip_errors=$run_errors
    iip_kb=0
    for pid in "${iip_pids[@]}"; do iip_kb=$(( iip_kb + $(peak_kb "$pid") )); done
    log "iipsrv wrk: $iip_tps tiles/s, p99 $iip_p99 ms, $iip_errors errors; peak RSS (2 processes) $iip_kb kB"
    stop "${iip_pids[@]}"

    # Strata: the pyramid alone (`strata warm --iiif`).
    mkdir -p "$work/only" && rm -f "$work/only/"* && ln -f "$work/source/$image" "$work/only/$image"
    # Three runs (the disk's writeback makes one run noisy): the median, and every run.
    warm_runs=()
    for _ in 1 2 3; do
        rm -rf "$work/pyramids"
        sync
        start=$(now_ms)
        warm_out=$( { /usr/bin/time -f 'peak_kb=%M' "$strata" warm "$work/only" --iiif --iiif-pyramid-path "$work/pyramids" \
            --iiif-tile-size "$tile" --iiif-max-source-pixels 4000000000 >/dev/null; } 2>&1)
        warm_runs+=($(( $(now_ms) - start )))
        warm_kb=$(sed -n 's/.*peak_kb=\([0-9]*\).*/\1/p' <<<"$warm_out")
    done
    warm_ms=$(printf '%s\n' "${warm_runs[@]}" | sort -n | sed -n 2p)
    warm_all=$(IFS=,; echo "${warm_runs[*]}")
    log "strata warm --iiif: median $warm_ms ms (runs $warm_all), peak RSS $warm_kb kB"

    # Strata: cold, the pyramid built as it is asked for.
    rm -rf "$work/pyramids"
    sync
    start_strata "$work/pyramids"
    began=$(now_ms)
    strata_first=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$strata_port" 6 "$work/strata-home.txt" "/iiif/3/$image/info.json")
    strata_rest=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$strata_port" 6 "$work/strata-rest.txt")
    # The last tile of level 0 (bottom right) is the build's last.
    last=$(python3 - "$size" "$tile" <<'PY'
import sys
w, h = map(int, sys.argv[1].split("x")); t = int(sys.argv[2])
x, y = (w - 1) // t * t, (h - 1) // t * t
print(f"{x},{y},{w - x},{h - y}/{w - x},/0/default.jpg")
PY
)
    curl -fsS -o /dev/null "http://127.0.0.1:$strata_port/iiif/3/$image/$last"
    built_ms=$(( $(now_ms) - began ))
    log "strata first screen: $strata_first; rest of the trace: $strata_rest; whole pyramid after $built_ms ms"
    wrk_run "$strata_port" "$work/strata-all.txt"
    strata_tps=$run_tps strata_p99=$run_p99 strata_errors=$run_errors
    strata_kb=$(peak_kb "$strata_pid")
    log "strata wrk: $strata_tps tiles/s, p99 $strata_p99 ms, $strata_errors errors; peak RSS $strata_kb kB"
    stop "$strata_pid"

    # Strata over IIPImage's pyramidal TIFF, cold: each tile read from the TIFF's own level.
    rm -rf "$work/pyramids"
    sync
    start_strata "$work/pyramids" "$work/tiff"
    sed "s|^/iiif/3/$image/|/iiif/3/$tiff/|" "$work/strata-home.txt" >"$work/tiff-home.txt"
    sed "s|^/iiif/3/$image/|/iiif/3/$tiff/|" "$work/strata-rest.txt" >"$work/tiff-rest.txt"
    began=$(now_ms)
    tiff_first=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$strata_port" 6 "$work/tiff-home.txt" "/iiif/3/$tiff/info.json")
    tiff_rest=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$strata_port" 6 "$work/tiff-rest.txt")
    # Tiles asked for come first here, so the last tile says nothing: wait for the build's end.
    until curl -fsS "http://127.0.0.1:$strata_port/stats" | python3 -c \
        'import json, sys; sys.exit(0 if json.load(sys.stdin)["pyramids"]["buildsFinished"] >= 1 else 1)'; do
        sleep 0.05
    done
    tiff_built_ms=$(( $(now_ms) - began ))
    tiff_kb=$(peak_kb "$strata_pid")
    log "strata over the TIFF: first screen: $tiff_first; rest of the trace: $tiff_rest; every tile after $tiff_built_ms ms; peak RSS $tiff_kb kB"
    stop "$strata_pid"

    results+=("$(python3 - "$image" "$size" "$conversion_ms" "$conversion_kb" "$iip_first" "$iip_rest" "$iip_tps" "$iip_p99" \
        "$iip_errors" "$iip_kb" "$strata_first" "$strata_rest" "$built_ms" "$strata_tps" "$strata_p99" "$strata_errors" \
        "$strata_kb" "$warm_ms" "$warm_kb" "$warm_all" "$tiff_first" "$tiff_rest" "$tiff_built_ms" "$tiff_kb" <<'PY'
import json, sys
a = sys.argv[1:]
def kv(text):
    return {k: float(v) for k, v in (w.split("=") for w in text.split())}
iip_first, iip_rest, s_first, s_rest = kv(a[4]), kv(a[5]), kv(a[10]), kv(a[11])
conv, iip_tps, s_tps, built = float(a[2]), float(a[6]), float(a[13]), float(a[12])
print(json.dumps({
    "image": a[0], "size": a[1],
    "iipimage": {"conversion_ms": conv, "conversion_peak_rss_kb": int(a[3]), "first_screen_ms": iip_first["ms"],
                 "first_screen_errors": int(iip_first["errors"] + iip_rest["errors"]), "tiles_per_s": iip_tps,
                 "p99_ms": float(a[7]), "errors": int(a[8]), "peak_rss_kb_two_processes": int(a[9])},
    "strata": {"first_screen_ms": s_first["ms"], "slowest_tile_while_building_ms": max(s_first["max_ms"], s_rest["max_ms"]),
               "cold_errors": int(s_first["errors"] + s_rest["errors"]), "whole_pyramid_ms": built, "tiles_per_s": s_tps,
               "p99_ms": float(a[14]), "errors": int(a[15]), "peak_rss_kb": int(a[16]),
               "warm_iiif_ms": float(a[17]), "warm_iiif_runs_ms": [float(v) for v in a[19].split(",")],
               "warm_iiif_peak_rss_kb": int(a[18])},
    "strata_over_tiff": {"first_screen_ms": kv(a[20])["ms"],
                         "slowest_tile_ms": max(kv(a[20])["max_ms"], kv(a[21])["max_ms"]),
                         "cold_errors": int(kv(a[20])["errors"] + kv(a[21])["errors"]),
                         "every_tile_ms": float(a[22]), "peak_rss_kb": int(a[23])},
    "ratios": {"pyramid_build_vs_vips_tiffsave": round(float(a[17]) / conv, 3),
               "pyramid_while_serving_vs_vips_tiffsave": round(built / conv, 3),
               "first_screen_vs_iip_plus_conversion": round(s_first["ms"] / (iip_first["ms"] + conv), 3),
               "warm_tiles_per_s": round(s_tps / iip_tps, 3) if iip_tps else None},
}))
PY
)")
done
if [ "$json" -eq 1 ]; then
    printf '%s\n' "${results[@]}" | python3 -c 'import json, sys; print(json.dumps([json.loads(l) for l in sys.stdin]))'
else
    printf '%s\n' "${results[@]}" | python3 -c "$(cat <<'PY'
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    i, s, q = r["iipimage"], r["strata"], r["ratios"]
    print(f"{r['image']} {r['size']}:")
    print(f"  pyramid: vips tiffsave {i['conversion_ms']:.0f} ms ({i['conversion_peak_rss_kb'] // 1024} MiB); "
          f"strata warm --iiif {s['warm_iiif_ms']:.0f} ms ({s['warm_iiif_peak_rss_kb'] // 1024} MiB, "
          f"{q['pyramid_build_vs_vips_tiffsave']}x); whole pyramid {s['whole_pyramid_ms']:.0f} ms from a cold start "
          f"while serving the trace ({q['pyramid_while_serving_vs_vips_tiffsave']}x)")
    print(f"  first screen: IIPImage {i['first_screen_ms']:.0f} ms after the conversion; Strata {s['first_screen_ms']:.0f} ms "
          f"cold ({q['first_screen_vs_iip_plus_conversion']}x of IIPImage + conversion); "
          f"slowest tile while building {s['slowest_tile_while_building_ms']:.0f} ms")
    print(f"  warm: IIPImage {i['tiles_per_s']} tiles/s p99 {i['p99_ms']} ms; Strata {s['tiles_per_s']} tiles/s "
          f"p99 {s['p99_ms']} ms ({q['warm_tiles_per_s']}x); errors {i['errors']} / {s['errors'] + s['cold_errors']}")
    print(f"  peak RSS: iipsrv {i['peak_rss_kb_two_processes'] // 1024} MiB (2 processes), Strata {s['peak_rss_kb'] // 1024} MiB")
    t = r["strata_over_tiff"]
    print(f"  Strata over the pyramidal TIFF: first screen {t['first_screen_ms']:.0f} ms cold, slowest tile {t['slowest_tile_ms']:.0f} ms, "
          f"every tile in its table after {t['every_tile_ms']:.0f} ms, peak RSS {t['peak_rss_kb'] // 1024} MiB, errors {t['cold_errors']}")
PY
)"
fi
