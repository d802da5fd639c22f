#!/usr/bin/env bash
# Allocators side by side, in one sitting on this machine: for each candidate, the soak's memory
# (Scripts/soak.sh ALLOC_SOAK_MINUTES, default 5: anonymous and file-backed RSS medians after
# warm-up, requests/s), the load test's warm and zoom-mix rates (Scripts/loadtest.sh with
# LOADTEST_SKIP_THUMBOR=1, nginx beside them as the anchor), and the cold render's CPU (a fresh
# server renders each of the zoom mix's URLs once, one at a time: its user + system CPU per render).
#
#   Scripts/bench-allocators.sh [--json]
#
# Candidates (each runs a release `strata`; the wrappers set the allocator and exec it):
#   before      ALLOC_BEFORE, a release `strata` of the commit before PixelMemory (glibc malloc
#               for every buffer; skipped when unset)
#   glibc       .build/release/strata with process.allocator system: pixel buffers from
#               Strata's own mappings (PixelMemory), everything else from glibc's malloc
#   jemalloc    .build/release/strata as it ships (process.allocator jemalloc: Debian's
#               libjemalloc2 preloaded with the settings of Sources/strata/ProcessAllocator.swift)
#   mimalloc    process.allocator system with libmimalloc (Debian libmimalloc2.0) preloaded, its
#               defaults
# Without --json a table; with --json one object per candidate on stdout. Progress on stderr.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STRATA="${ALLOC_STRATA:-$ROOT/.build/release/strata}"
MINUTES="${ALLOC_SOAK_MINUTES:-5}"
CANDIDATES="${ALLOC_CANDIDATES:-before glibc jemalloc mimalloc}"
JSON=0
[ "${1:-}" = "--json" ] && JSON=1
log() { printf '[allocators] %s\n' "$*" >&2; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/strata-allocators.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
MIMALLOC=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2
if [ ! -e "$JEMALLOC" ] || [ ! -e "$MIMALLOC" ]; then
  log "installing libjemalloc2 and libmimalloc2.0 (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libjemalloc2 libmimalloc2.0 >&2
fi

# wrapper NAME: $WORK/NAME, which execs the candidate's strata.
wrapper() {
  local name=$1 path="$WORK/$1"
  case "$name" in
    before) printf '#!/bin/sh\nexec "%s" "$@"\n' "$ALLOC_BEFORE" >"$path" ;;
    glibc) printf '#!/bin/sh\nSTRATA_PROCESS_ALLOCATOR=system exec "%s" "$@"\n' "$STRATA" >"$path" ;;
    jemalloc) printf '#!/bin/sh\nexec "%s" "$@"\n' "$STRATA" >"$path" ;;
    mimalloc) printf '#!/bin/sh\nSTRATA_PROCESS_ALLOCATOR=system LD_PRELOAD=%s exec "%s" "$@"\n' "$MIMALLOC" "$STRATA" >"$path" ;;
  esac
  chmod +x "$path"
  echo "$path"
}

# cold_cpu BINARY: CPU ms per render of a fresh server over the zoom mix's URLs, one at a time.
cold_cpu() {
  local bin=$1 port src="$WORK/cold-src" pid
  rm -rf "$src" "$WORK/cold-disk"
  mkdir -p "$src/jpeg" "$src/webp" "$WORK/cold-disk"
  for p in jpeg/path-2560x1600.jpg jpeg/fallenleaf-2048x1280-420.jpg jpeg/eveningglow-1024x640-progressive.jpg \
    jpeg/coldripple-1024x640-orientation6.jpg jpeg/kite-800x500-gray.jpg webp/path-2560x1600.webp; do
    cp "$ROOT/Fixtures/$p" "$src/$p"
  done
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$bin" serve --host 127.0.0.1 --port "$port" --source-directory "$src" --disk-path "$WORK/cold-disk" \
    --tolerance 0 >"$WORK/cold.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null && break; sleep 0.1; done
  python3 - "$port" "$pid" <<'PY'
import http.client, sys
port, pid = int(sys.argv[1]), sys.argv[2]
def cpu():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / 100  # utime + stime, ms (USER_HZ 100)
photos = ["jpeg/path-2560x1600.jpg", "jpeg/fallenleaf-2048x1280-420.jpg", "jpeg/eveningglow-1024x640-progressive.jpg",
          "jpeg/coldripple-1024x640-orientation6.jpg", "jpeg/kite-800x500-gray.jpg", "webp/path-2560x1600.webp"]
urls = [f"/images/{p}?w={w}&h={w}&format=raw" for p in photos for w in range(200, 1201, 50)]
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
start = cpu()
for url in urls:
    conn.request("GET", url)
    r = conn.getresponse()
    r.read()
    assert r.status == 200, (url, r.status)
print(round((cpu() - start) / len(urls), 2))
PY
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

results="$WORK/results.jsonl"
: >"$results"
for name in $CANDIDATES; do
  if [ "$name" = before ] && [ -z "${ALLOC_BEFORE:-}" ]; then
    log "before: ALLOC_BEFORE unset, skipped"
    continue
  fi
  bin=$(wrapper "$name")
  log "$name: soak of $MINUTES min"
  before_flag=0
  [ "$name" = before ] && before_flag=1
  SOAK_BEFORE=$before_flag SOAK_STRATA="$bin" SOAK_RSS_GROWTH_PCT=100 "$ROOT/Scripts/soak.sh" "$MINUTES" --json \
    >"$WORK/soak-$name.json" 2>"$WORK/soak-$name.log" || true
  log "$name: load test (warm and zoom)"
  LOADTEST_SKIP_THUMBOR=1 LOADTEST_STRATA="$bin" "$ROOT/Scripts/loadtest.sh" --json >"$WORK/load-$name.json" 2>"$WORK/load-$name.log" || true
  log "$name: cold render CPU"
  cpu=$(cold_cpu "$bin" || echo null)
  python3 - "$name" "$WORK/soak-$name.json" "$WORK/load-$name.json" "$cpu" >>"$results" <<'PY'
import json, sys
name, soak_path, load_path, cpu = sys.argv[1:]
try:
    soak = json.load(open(soak_path))
except Exception:
    soak = None
try:
    load = json.load(open(load_path))
except Exception:
    load = {}
row = {"candidate": name, "cold_cpu_ms_per_render": None if cpu == "null" else float(cpu)}
if soak:
    judged = [x for x in soak["samples"] if not x["warmup"]]
    def median(key):
        values = sorted(x[key] for x in judged)
        return values[len(values) // 2] if values else None
    row.update({"soak_anon_median_bytes": median("rss_anon_bytes"), "soak_file_median_bytes": median("rss_file_bytes"),
                "soak_rps_median": median("rps"), "soak_wrong": soak["totals"]["wrong"],
                "soak_unexpected": soak["totals"]["unexpected"], "soak_requests": soak["totals"]["requests"]})
for case in ("nginx", "strata_warm", "strata_zoom"):
    row[case] = load.get(case)
print(json.dumps(row))
PY
  log "$name: $(tail -n 1 "$results")"
done

python3 - "$results" "$JSON" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
if sys.argv[2] == "1":
    print(json.dumps(rows, indent=1))
    sys.exit(0)
def mib(b): return "—" if b is None else f"{b / 2**20:.0f}"
def rps(case): return "—" if not case else f"{case['rps']:.0f}"
print(f"{'candidate':10} {'anon MiB':>9} {'file MiB':>9} {'soak rps':>9} {'warm rps':>9} {'nginx':>7} {'zoom rps':>9} {'cold ms':>8}")
for r in rows:
    print(f"{r['candidate']:10} {mib(r.get('soak_anon_median_bytes')):>9} {mib(r.get('soak_file_median_bytes')):>9} "
          f"{r.get('soak_rps_median') or '—':>9} {rps(r.get('strata_warm')):>9} {rps(r.get('nginx')):>7} "
          f"{rps(r.get('strata_zoom')):>9} {r.get('cold_cpu_ms_per_render') or '—':>8}")
PY
