#!/usr/bin/env bash
# Under a container's memory limit: a release `strata serve` in a memory cgroup of
# CGROUP_LIMIT_MIB (default 256) with no memory key set, so that its caches and its in-flight
# budget are sized from the limit (ContainerSizing); then, for CGROUP_SECONDS (default 60), the
# zoom mix over the fixture photos and a deep zoom into a 102-megapixel JPEG (12800×8000, made
# with Pillow from the same photos), whose tile pyramid the server builds meanwhile
# (Scripts/cgroup/load.py, 12 connections); then it waits for the pyramid's build to end.
#
#   Scripts/cgroup-limit.sh [--json]
#
# Passes (exit 0) when the server is never OOM-killed and still answers, the pyramid's build
# finished, every answer is a 200 or a 503 with Retry-After (load shed when work waits for
# memory), no connection failed, and `strata config` in the cgroup shows the derived values.
# Reports the cgroup's peak charge, the server's peak anonymous RSS (sampled every 0.5 s), the
# derived settings and /stats' memoryUse at the end. Needs root and a cgroup memory controller
# (v1 here, v2 elsewhere); without them it prints why and exits 0 — the check is then a manual
# run on a machine that has one (docs/Reliability.md).
#
# Environment: CGROUP_STRATA (default .build/release/strata), CGROUP_LIMIT_MIB, CGROUP_SECONDS.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STRATA="${CGROUP_STRATA:-$ROOT/.build/release/strata}"
LIMIT_MIB="${CGROUP_LIMIT_MIB:-256}"
SECONDS_LOAD="${CGROUP_SECONDS:-60}"
VENV="$ROOT/.soak/venv"
JSON=0
[ "${1:-}" = "--json" ] && JSON=1
log() { printf '[cgroup] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 2
}
skip() {
  log "skipped: $*"
  [ "$JSON" = 1 ] && printf '{"skipped": "%s"}\n' "$*"
  exit 0
}

[ -x "$STRATA" ] || die "no strata binary at $STRATA (swift build -c release --product strata)"
[ "$(id -u)" = 0 ] || skip "needs root to make a cgroup"
if [ -d /sys/fs/cgroup/memory ] && [ -w /sys/fs/cgroup/memory ]; then
  CG=/sys/fs/cgroup/memory/strata-limit-$$
  mkdir "$CG" || skip "cannot make a v1 memory cgroup"
  echo $((LIMIT_MIB << 20)) >"$CG/memory.limit_in_bytes"
  # No escape into swap: the memory-and-swap limit is the same.
  [ -f "$CG/memory.memsw.limit_in_bytes" ] && echo $((LIMIT_MIB << 20)) >"$CG/memory.memsw.limit_in_bytes"
  VERSION=1
elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  CG=/sys/fs/cgroup/strata-limit-$$
  mkdir "$CG" || skip "cannot make a v2 cgroup"
  echo $((LIMIT_MIB << 20)) >"$CG/memory.max"
  echo 0 >"$CG/memory.swap.max" 2>/dev/null || true
  VERSION=2
else
  skip "no cgroup memory controller"
fi

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/strata-cgroup.XXXXXX")
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
  # Anything else still in the cgroup (a server whose start failed half-way) goes too.
  for pid in $(cat "$CG/cgroup.procs" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 50); do [ -s "$CG/cgroup.procs" ] || break; sleep 0.1; done
  rmdir "$CG" 2>/dev/null || true
  rm -rf "$SCRATCH"
}
trap cleanup EXIT

# In the cgroup: the command's own process joins it before it execs.
in_cgroup() { sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG" "$@"; }

PHOTOS=(jpeg/path-2560x1600.jpg jpeg/fallenleaf-2048x1280-420.jpg jpeg/eveningglow-1024x640-progressive.jpg
  jpeg/coldripple-1024x640-orientation6.jpg jpeg/kite-800x500-gray.jpg webp/path-2560x1600.webp)
mkdir -p "$SCRATCH/src/jpeg" "$SCRATCH/src/webp" "$SCRATCH/disk" "$SCRATCH/pyramids"
for p in "${PHOTOS[@]}"; do cp "$ROOT/Fixtures/$p" "$SCRATCH/src/$p"; done
if ! "$VENV/bin/python" -c 'import PIL' 2>/dev/null; then
  log "making $VENV with Pillow (pip)"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "pillow==13.0.0" >&2
fi
# 5 × 5 photos of 2560×1600 (each turned so that neighbours differ): 12800×8000, 102 megapixels.
"$VENV/bin/python" - "$ROOT/Fixtures" "$SCRATCH/src/big.jpg" <<'PY'
import sys
from PIL import Image
names = ["jpeg/path-2560x1600.jpg", "webp/path-2560x1600.webp"]
photos = [Image.open(f"{sys.argv[1]}/{n}").convert("RGB").resize((2560, 1600)) for n in names]
big = Image.new("RGB", (12800, 8000))
for row in range(5):
    for col in range(5):
        photo = photos[(row + col) % 2]
        big.paste(photo.transpose(Image.Transpose.FLIP_LEFT_RIGHT) if col % 2 else photo, (col * 2560, row * 1600))
big.save(sys.argv[2], quality=85)
PY
log "12800×8000 JPEG made ($(($(stat -c %s "$SCRATCH/src/big.jpg") >> 20)) MiB)"

ARGS=(--source-directory "$SCRATCH/src" --disk-path "$SCRATCH/disk" --iiif-pyramid-path "$SCRATCH/pyramids")
in_cgroup "$STRATA" config "${ARGS[@]}" >"$SCRATCH/config.txt" 2>&1 || { cat "$SCRATCH/config.txt" >&2; die "strata config failed"; }
derived=$(grep -c "derived: " "$SCRATCH/config.txt" || true)
log "strata config in the cgroup: $derived values derived from the limit"
grep "derived: " "$SCRATCH/config.txt" | sed 's/^/[cgroup]   /' >&2 || true

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Not through the function: $! must be the pid that becomes strata's (sh execs it).
sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG" "$STRATA" serve "${ARGS[@]}" --host 127.0.0.1 --port "$PORT" \
  >"$SCRATCH/serve.log" 2>&1 </dev/null &
SERVER_PID=$!
for _ in $(seq 1 100); do
  curl -fsS -o /dev/null "http://127.0.0.1:$PORT/healthz" 2>/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || { tail -n 20 "$SCRATCH/serve.log" >&2; die "strata serve exited before it answered"; }
  sleep 0.1
done
log "strata serve (pid $SERVER_PID) in a ${LIMIT_MIB} MiB cgroup (v$VERSION), $SECONDS_LOAD s of load"

# RSS samples beside the load.
( while kill -0 "$SERVER_PID" 2>/dev/null; do
    awk '/^RssAnon/ { print $2 }' "/proc/$SERVER_PID/status" 2>/dev/null
    sleep 0.5
  done >"$SCRATCH/rss.txt" ) &
SAMPLER=$!
photo_keys=$(IFS=,; echo "${PHOTOS[*]}")
python3 "$ROOT/Scripts/cgroup/load.py" 127.0.0.1 "$PORT" "$SECONDS_LOAD" 12 "$photo_keys" big.jpg 12800 8000 >"$SCRATCH/load.json"
# The pyramid's build (started by the first tile) goes on until every tile is written: a build
# that finished without failing (one refused by render.memoryLimit fails, and the next tile
# starts another).
built=0
for _ in $(seq 1 1800); do
  kill -0 "$SERVER_PID" 2>/dev/null || break
  if curl -fsS "http://127.0.0.1:$PORT/stats" 2>/dev/null | python3 -c \
    'import json, sys; p = json.load(sys.stdin)["pyramids"]; sys.exit(0 if p["buildsFinished"] > p["buildsFailed"] else 1)'; then
    built=1
    break
  fi
  sleep 0.5
done
alive=0
curl -fsS -o "$SCRATCH/stats.json" "http://127.0.0.1:$PORT/stats" 2>/dev/null && alive=1
kill -0 "$SERVER_PID" 2>/dev/null || alive=0
kill "$SAMPLER" 2>/dev/null || true
if [ "$VERSION" = 1 ]; then
  peak=$(cat "$CG/memory.max_usage_in_bytes")
  oom_kills=$(awk '/^oom_kill / { print $2 }' "$CG/memory.oom_control")
else
  peak=$(cat "$CG/memory.peak" 2>/dev/null || echo 0)
  oom_kills=$(awk '/^oom_kill / { print $2 }' "$CG/memory.events")
fi

python3 - "$SCRATCH" "$LIMIT_MIB" "$VERSION" "$peak" "${oom_kills:-0}" "$alive" "$built" "$derived" "$JSON" <<'PY'
import json, sys
scratch, limit_mib, version, peak, oom_kills, alive, built, derived, as_json = sys.argv[1:]
load = json.load(open(f"{scratch}/load.json"))
rss = [int(x) * 1024 for x in open(f"{scratch}/rss.txt").read().split()]
stats = json.load(open(f"{scratch}/stats.json")) if alive == "1" else {}
config = [line.strip() for line in open(f"{scratch}/config.txt") if "derived: " in line]
unexpected = sum(n for s, n in load["statuses"].items() if s not in ("200", "503"))
report = {
    "limit_bytes": int(limit_mib) << 20, "cgroup_version": int(version), "cgroup_peak_bytes": int(peak),
    "oom_kills": int(oom_kills), "alive": alive == "1", "pyramid_built": built == "1",
    "rss_anon_peak_bytes": max(rss) if rss else None, "derived_settings": config, "load": load,
    "memory_use": stats.get("memoryUse"),
}
checks = {
    "not_oom_killed": report["oom_kills"] == 0 and report["alive"],
    "pyramid_built": report["pyramid_built"],
    "only_200_or_503": unexpected == 0,
    "503s_say_retry_after": load["shed_without_retry_after"] == 0,
    "no_connection_errors": load["connection_errors"] == 0,
    "settings_derived": int(derived) >= 4,
}
report["checks"] = checks
report["pass"] = all(checks.values())
if as_json == "1":
    print(json.dumps(report, indent=1))
else:
    print(f"cgroup v{version}, limit {limit_mib} MiB: peak charge {int(peak) >> 20} MiB, "
          f"peak anonymous RSS {(report['rss_anon_peak_bytes'] or 0) >> 20} MiB, OOM kills {oom_kills}")
    print(f"load: {load['requests']} answers {load['statuses']}, {load['connection_errors']} connection errors")
    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
sys.exit(0 if report["pass"] else 1)
PY
