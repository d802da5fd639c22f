#!/usr/bin/env bash
# IIIF deep-zoom benchmark: IIPImage (iipsrv behind nginx over FastCGI, tiled pyramidal TIFFs)
# against `strata serve` (the original JPEG/WebP files), same machine, same tile URLs.
#
# 1. Converts each photo to a 256×256 tiled JPEG pyramid TIFF with `vips tiffsave` (timed).
# 2. Reads Strata's info.json for each photo (a probe process, thrown away) and writes an
#    OpenSeadragon-style tile trace (Scripts/bench-iiif/trace.py): a 1024×768 viewport
#    zooming from the whole image to full resolution, then panning; the same
#    `/{x},{y},{w},{h}/{tw},/0/default.jpg` tiles for both servers.
# 3. Cold first screen (fresh server process, Strata also with an empty disk tier): the
#    info.json and the home-level tiles of the first photo over 6 concurrent connections.
# 4. Warm: one warm-up pass over the trace, then wrk (2 threads, 32 connections,
#    IIIF_BENCH_SECONDS, default 15 s) replaying it round-robin (Scripts/bench-iiif/rotate.lua):
#    tiles/s, p99 latency, errors (non-2xx + socket errors). iipsrv is measured with one
#    process and with two (spawn-fcgi -F N); the best is reported.
#
# Usage: Scripts/bench-iiif.sh [--json]
#   --json  one JSON object on stdout (progress on stderr), else a table.
#   STRATA=path      the strata binary (default .build/release/strata); it must serve /iiif.
#   IIIF_BENCH_SECONDS=n  wrk duration (default 15).
# Needs: nginx, iipimage-server, spawn-fcgi, libvips-tools (vips), wrk, curl, python3
# (Debian: apt-get install iipimage-server nginx libvips-tools spawn-fcgi wrk).
# Servers listen on 127.0.0.1 only and are stopped by pid on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
json=0
case "${1:-}" in
    --json) json=1 ;;
    "") ;;
    *) echo "usage: $0 [--json]" >&2; exit 2 ;;
esac
strata=${STRATA:-$root/.build/release/strata}
seconds=${IIIF_BENCH_SECONDS:-15}
iipsrv=/usr/lib/iipimage-server/iipsrv.fcgi
tile=256
view_w=1024
view_h=768
pan_steps=6
for tool in nginx spawn-fcgi vips wrk curl python3; do
    command -v "$tool" >/dev/null || { echo "missing $tool (see the header of $0)" >&2; exit 2; }
done
[ -x "$iipsrv" ] || { echo "missing $iipsrv (apt-get install iipimage-server)" >&2; exit 2; }
[ -x "$strata" ] || { echo "no strata binary at $strata (swift build -c release, or STRATA=…)" >&2; exit 2; }

log() { echo "[bench-iiif] $*" >&2; }
. Scripts/bench-iiif/common.sh

work=$(mktemp -d)
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# Photos: name in the source directory, source file, TIFF name.
mkdir -p "$work/source" "$work/tiff"
photos=(path-2560x1600.jpg fallenleaf-2048x1280-420.jpg path-2560x1600.webp)
cp Fixtures/jpeg/path-2560x1600.jpg Fixtures/jpeg/fallenleaf-2048x1280-420.jpg \
    Fixtures/webp/path-2560x1600.webp "$work/source/"
tiff_name() { echo "${1%.*}-${1##*.}.tif"; }

# 1. Pyramid conversion (after one untimed `vips` start, so the disk cache holds libvips).
export VIPS_WARNING=0
vips --version >/dev/null
conversion_total=0
for photo in "${photos[@]}"; do
    start=$(now_ms)
    vips tiffsave "$work/source/$photo" "$work/tiff/$(tiff_name "$photo")" \
        --tile --pyramid --compression jpeg --tile-width "$tile" --tile-height "$tile"
    elapsed=$(( $(now_ms) - start ))
    conversion_total=$(( conversion_total + elapsed ))
    log "vips tiffsave $photo: ${elapsed} ms"
done
conversion_per_photo=$(( conversion_total / ${#photos[@]} ))

# Strata.
strata_port=$(free_port)
start_strata() {
    "$strata" serve --host 127.0.0.1 --port "$strata_port" --source-directory "$work/source" \
        --disk-path "$1" --memory-pressure-enabled false >>"$work/strata.log" 2>&1 &
    pids+=($!)
    strata_pid=$!
    wait_http "http://127.0.0.1:$strata_port/healthz"
}

# 2. The trace, from Strata's info.json (a probe process with its own disk tier).
start_strata "$work/probe-disk"
specs=()
for photo in "${photos[@]}"; do
    info=$(curl -fsS "http://127.0.0.1:$strata_port/iiif/3/$photo/info.json") || {
        echo "$strata does not serve /iiif/3/$photo/info.json: a binary with the IIIF routes is needed (STRATA=…)" >&2
        exit 2
    }
    size=$(python3 -c 'import json, sys; i = json.load(sys.stdin); print(str(i["width"]) + "x" + str(i["height"]), i.get("tiles"))' <<<"$info")
    log "strata info.json $photo: ${size}"
    specs+=("$photo:${size%% *}")
done
stop "$strata_pid"
python3 Scripts/bench-iiif/trace.py "$tile" "$view_w" "$view_h" "$pan_steps" "${specs[@]}" >"$work/trace.tsv"
trace_count=$(wc -l <"$work/trace.tsv")
log "trace: $trace_count tiles over ${#photos[@]} photos ($(awk -F'\t' '$3 == "home"' "$work/trace.tsv" | wc -l) on the first screens)"
# Path lists: all tiles, and the first photo's first screen.
first=${photos[0]}
awk -F'\t' '{ print "/iiif/3/" $1 "/" $2 }' "$work/trace.tsv" >"$work/strata-all.txt"
awk -F'\t' -v p="$first" '$1 == p && $3 == "home" { print "/iiif/3/" $1 "/" $2 }' "$work/trace.tsv" >"$work/strata-home.txt"
while IFS=$'\t' read -r photo path kind; do
    echo "$iip_prefix$(tiff_name "$photo")/$path"
    if [ "$photo" = "$first" ] && [ "$kind" = home ]; then
        echo "$iip_prefix$(tiff_name "$photo")/$path" >>"$work/iip-home.txt"
    fi
done <"$work/trace.tsv" >"$work/iip-all.txt"

# wrk_run NAME PORT PATHS: the warm-up pass, then wrk; sets the run_* variables.
wrk_run() {
    local name=$1 port=$2 paths=$3 warm line
    warm=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$port" 6 "$paths")
    log "$name warm-up pass: $warm"
    log "$name load average before wrk: $(cut -d' ' -f1-3 /proc/loadavg)"
    line=$(wrk -t2 -c32 -d"${seconds}s" --latency -s Scripts/bench-iiif/rotate.lua \
        "http://127.0.0.1:$port" -- "$paths" | tee -a "$work/wrk.log" | grep '^BENCH')
    log "$name wrk: $line"
    run_tps=$(field tiles_per_s "$line")
    run_p99=$(field p99_ms "$line")
    run_errors=$(( $(field non2xx "$line") + $(field socket_errors "$line") ))
}

# 3–4. IIPImage behind nginx.
fcgi_port=$(free_port)
nginx_port=$(free_port)
iip_nginx

iip_start 1 "$(tiff_name "$first")"
iip_info=$(curl -fsS "http://127.0.0.1:$nginx_port$iip_prefix$(tiff_name "$first")/info.json")
log "iipsrv info.json $first: $(python3 -c 'import json, sys; i = json.load(sys.stdin); print(i["width"], i["height"], i.get("tiles"))' <<<"$iip_info")"
# The probe above opened the TIFF: the cold run gets a fresh process.
stop "${iip_pids[@]}"
iip_start 1 "$(tiff_name "$first")"
iip_first=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$nginx_port" 6 "$work/iip-home.txt" \
    "$iip_prefix$(tiff_name "$first")/info.json")
log "iipsrv cold first screen: $iip_first"
iip_first_ms=$(field ms "$iip_first")
iip_best_tps=0 iip_best_p99=0 iip_best_errors=0 iip_best_n=0
iip_table=""
for n in 1 2; do
    if [ "$n" -ne 1 ]; then
        stop "${iip_pids[@]}"
        iip_start "$n" "$(tiff_name "$first")"
    fi
    wrk_run "iipsrv×$n" "$nginx_port" "$work/iip-all.txt"
    iip_table+=$(printf '%-22s %12s %10s %8s\n' "IIPImage ($n iipsrv)" "$run_tps" "$run_p99" "$run_errors")$'\n'
    if python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)' "$run_tps" "$iip_best_tps"; then
        iip_best_tps=$run_tps iip_best_p99=$run_p99 iip_best_errors=$run_errors iip_best_n=$n
    fi
done
stop "${iip_pids[@]}"

# 3–4. Strata: fresh process, empty disk tier.
start_strata "$work/disk"
strata_first=$(python3 Scripts/bench-iiif/fetch.py 127.0.0.1 "$strata_port" 6 "$work/strata-home.txt" \
    "/iiif/3/$first/info.json")
log "strata cold first screen: $strata_first"
strata_first_ms=$(field ms "$strata_first")
wrk_run strata "$strata_port" "$work/strata-all.txt"
strata_tps=$run_tps strata_p99=$run_p99 strata_errors=$run_errors
stop "$strata_pid"

result=$(python3 - "$iip_best_tps" "$iip_best_p99" "$iip_best_errors" "$iip_best_n" "$iip_first_ms" \
    "$conversion_per_photo" "$strata_tps" "$strata_p99" "$strata_errors" "$strata_first_ms" <<'PY'
import json, sys
a = sys.argv[1:]
iip_tps, iip_p99, iip_err, iip_n, iip_first, conv = float(a[0]), float(a[1]), int(a[2]), int(a[3]), float(a[4]), float(a[5])
s_tps, s_p99, s_err, s_first = float(a[6]), float(a[7]), int(a[8]), float(a[9])
print(json.dumps({
    "iipimage": {"tiles_per_s": iip_tps, "p99_ms": iip_p99, "errors": iip_err, "processes": iip_n,
                 "first_screen_ms": iip_first, "conversion_ms_per_photo": conv},
    "strata": {"tiles_per_s": s_tps, "p99_ms": s_p99, "errors": s_err, "first_screen_ms": s_first},
    "ratios": {"warm_tiles_per_s": round(s_tps / iip_tps, 3) if iip_tps else None,
               "first_screen_vs_iip_plus_conversion": round(s_first / (iip_first + conv), 3)},
}))
PY
)
if [ "$json" -eq 1 ]; then
    echo "$result"
else
    echo "IIIF deep-zoom tiles: $trace_count tiles over ${#photos[@]} photos, wrk -t2 -c32 -d${seconds}s"
    printf '%-22s %12s %10s %8s\n' server "tiles/s" "p99 ms" errors
    printf '%s' "$iip_table"
    printf '%-22s %12s %10s %8s\n' Strata "$strata_tps" "$strata_p99" "$strata_errors"
    echo "cold first screen ($first, 6 connections): IIPImage ${iip_first_ms} ms + conversion ${conversion_per_photo} ms/photo; Strata ${strata_first_ms} ms"
    echo "$result"
fi
