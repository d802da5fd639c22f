#!/usr/bin/env bash
# Per-node cost figures for a capacity plan: what one request costs a node in CPU time, by how it
# is answered, and what one cached image costs in each tier. Run by hand (release build), not by
# CI; prints a table (and, with --json, one JSON object on the last line).
#
#   deploy/cluster/capacity.sh [--json]
#
# One node at a time, started by cluster.sh over the origin nginx (Fixtures/), loaded by wrk
# through the routing nginx for CAPACITY_SECONDS (default 8) per case:
#   warm   the 256 px JPEG of each fixture photo, already encoded: memory tier + encoded cache
#   disk   the 256 px raw pixels with memory.costLimit 0: every answer is a disk-tier hit (mmap)
#   cold   a new exact size of a photo per request (1024–2560 px originals, 200–1199 px JPEG out):
#          origin fetch + shrink-on-load decode + resample + encode
# CPU per request is the node's own CPU time (utime + stime from /proc/PID/stat) over the
# requests wrk completed, so it does not depend on how many cores the load generator and nginx
# took: requests/s per core = 1 / CPU per request. Bytes per image come from the node's /stats.
#
# Environment: STRATA (default .build/release/strata), CAPACITY_SECONDS, CLUSTER_PORT.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
json=0
[ "${1:-}" = "--json" ] && json=1
export STRATA="${STRATA:-$repo/.build/release/strata}"
export CLUSTER_DIR
CLUSTER_DIR="$(mktemp -d /tmp/strata-capacity.XXXXXX)"
chmod 755 "$CLUSTER_DIR"
export CLUSTER_PORT="${CLUSTER_PORT:-$((20000 + RANDOM % 12000))}"
export CLUSTER_ORIGIN_ROOT="$repo/Fixtures"
seconds="${CAPACITY_SECONDS:-8}"
router="http://127.0.0.1:$CLUSTER_PORT"
node_url="http://127.0.0.1:$((CLUSTER_PORT + 11))"
trap '"$here/cluster.sh" stop >/dev/null 2>&1 || true; rm -rf "$CLUSTER_DIR"' EXIT
command -v wrk >/dev/null || { echo "capacity: wrk is needed (apt-get install wrk)" >&2; exit 1; }
[ -x "$STRATA" ] || { echo "capacity: no $STRATA (swift build -c release --product strata)" >&2; exit 1; }

photos=(jpeg/path-2560x1600.jpg jpeg/fallenleaf-2048x1280-420.jpg jpeg/eveningglow-1024x640-progressive.jpg
  jpeg/coldripple-1024x640-orientation6.jpg webp/path-2560x1600.webp)
ticks_per_second=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# run_case NAME URLFILE THREADS CONNECTIONS: wrk over the URL list; prints "requests cpu_seconds".
run_case() {
  local pid before after out requests
  pid="$(cat "$CLUSTER_DIR/pids/node-1.pid")"
  before="$(cpu_ticks "$pid")"
  out="$(wrk -t "$3" -c "$4" -d "${seconds}s" --timeout 10s -s "$repo/Scripts/loadtest/rotate.lua" "$router" -- "$2" "$3" 2>&1)"
  after="$(cpu_ticks "$pid")"
  requests="$(sed -n 's/^LOADTEST_RESULT //p' <<<"$out" | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["requests"], r["errors"])')"
  echo "$requests $(python3 -c "print(($after - $before) / $ticks_per_second)")"
}

start_node() { CLUSTER_NODE_ARGS="$1" "$here/cluster.sh" start 1 >/dev/null; }
stop_node() { "$here/cluster.sh" stop >/dev/null; rm -rf "$CLUSTER_DIR/node-1"; }
stat_of() { curl -fsS "$node_url/stats" | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

lists="$CLUSTER_DIR/lists"
mkdir -p "$lists"
: >"$lists/warm"; : >"$lists/raw"; : >"$lists/cold"
for photo in "${photos[@]}"; do
  echo "/images/$photo?w=256&h=256&format=jpeg" >>"$lists/warm"
  echo "/images/$photo?w=256&h=256&format=raw" >>"$lists/raw"
done
for ((w = 200; w < 1200; w++)); do
  for photo in "${photos[@]}"; do echo "/images/$photo?w=$w&h=4096&exact=1&format=jpeg" >>"$lists/cold"; done
done

echo "capacity: $STRATA, $seconds s a case, $(nproc) cores" >&2

# warm: memory + encoded cache
start_node ""
while read -r path; do curl -fsS -o /dev/null "$router$path"; curl -fsS -o /dev/null "$router$path"; done <"$lists/warm"
read -r warm_requests warm_errors warm_cpu <<<"$(run_case warm "$lists/warm" 2 32)"
memory_per_image="$(stat_of 'd["tiers"]["memory"]["bytes"] // max(1, d["tiers"]["memory"]["entries"])')"
encoded_per_image="$(stat_of 'd["encoded"]["bytes"] // max(1, d["encoded"]["entries"])')"
stop_node

# disk: memory tier off; the raw variants rendered once, then published to disk
start_node "--memory-cost-limit 0"
while read -r path; do curl -fsS -o /dev/null "$router$path"; done <"$lists/raw"
sleep 2 # the write-behind queue publishes the files
while read -r path; do
  tier="$(curl -fsS -o /dev/null -D - "$router$path" | tr -d '\r' | sed -n 's/^X-Strata-Tier: //p')"
  [ "$tier" = disk ] || { echo "capacity: $path answered from '$tier', not disk" >&2; exit 1; }
done <"$lists/raw"
read -r disk_requests disk_errors disk_cpu <<<"$(run_case disk "$lists/raw" 2 32)"
disk_per_image="$(stat_of 'd["tiers"]["disk"]["bytes"] // max(1, d["tiers"]["disk"]["entries"])')"
stop_node

# cold: a new exact size per request
start_node ""
read -r cold_requests cold_errors cold_cpu <<<"$(run_case cold "$lists/cold" 2 8)"
stop_node

python3 - "$json" <<PY
import json, sys
cases = {
    "warm": ($warm_requests, $warm_errors, $warm_cpu),
    "disk": ($disk_requests, $disk_errors, $disk_cpu),
    "cold": ($cold_requests, $cold_errors, $cold_cpu),
}
seconds = $seconds
out = {"seconds": seconds, "cases": {}, "bytes_per_image": {
    "memory_256px_raw": $memory_per_image, "disk_256px_raw": $disk_per_image, "encoded_256px_jpeg": $encoded_per_image}}
print("| case | requests/s (this run) | node CPU per request | requests/s per core | errors |")
print("|---|---|---|---|---|")
for name, (requests, errors, cpu) in cases.items():
    per = cpu / max(1, requests)
    out["cases"][name] = {"rps": round(requests / seconds), "cpu_us_per_request": round(per * 1e6, 1),
                          "rps_per_core": round(1 / per) if per > 0 else None, "errors": errors}
    print("| %s | %d | %.1f µs | %s | %d |" % (name, requests / seconds, per * 1e6,
          "%d" % (1 / per) if per > 0 else "-", errors))
b = out["bytes_per_image"]
print("\nbytes per cached 256 px image (fit in 256×256; e.g. 256×160): memory %d, disk %d, encoded JPEG %d"
      % (b["memory_256px_raw"], b["disk_256px_raw"], b["encoded_256px_jpeg"]))
if sys.argv[1] == "1":
    print(json.dumps(out))
PY
