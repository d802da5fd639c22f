#!/usr/bin/env bash
# Soak: a release `strata serve` with small memory and disk limits (everything evicts) under a
# mixed load for MINUTES (default 3), on 127.0.0.1; exits 0 when it passes, 1 when not.
#
#   Scripts/soak.sh [MINUTES] [--json]
#
# The load (Scripts/soak/soak.py, Python 3 + Pillow in .soak/venv, git-ignored): 12 persistent
# HTTP/1.1 connections, each sending its next request when the last is answered, until MINUTES
# have passed —
#   84 %  /images/{key}?w=&h=&mode=fit|fill&format=png|jpeg|webp|avif|(negotiated), a Zipf mix
#         (s = 1) over 2 450 keys: JPEG, PNG, WebP, GIF, AVIF and HEIC originals, 240…2048 px
#   10 %  IIIF Image API 3 tiles (512 px, levels 1, 2, 4) and info.json of the 2048 px keys
#    5 %  missing keys (expected 404)
#    1 %  corrupt or truncated originals (expected 422)
# and beside it: an original replaced (atomic rename) every 3 s among the 50 hottest keys, half
# of them then purged (DELETE /images/{key}), half left to revalidation (revalidateAfter 5s);
# memory.costLimit switched between 40 and 48 MiB in the configuration file every minute (every
# sample interval when shorter), each reload confirmed in /stats; `strata warm` over the same
# originals and disk directory, again and again.
#
# The oracle: every original is one flat colour that names its key and version (4 096 codes,
# none shared). 25 % of the answers (all those of replaced keys) are decoded: torn or mixed
# pixels, another key's colour, a version not yet published, an ETag naming another version, or
# a replaced version after its window (purge or rename + revalidateAfter + 10 s, then one more
# revalidation period from its first late answer) are wrong images. Any status other than the
# expected one (200, 404, 422), a timeout or a broken connection is unexpected.
#
# Samples: every 60 s from 10 minutes on (shorter runs: six, 30 s apart for 3 minutes): RSS and
# threads (/proc/PID/status), open descriptors (/proc/PID/fd), bytes of the disk directory, p50
# and p99 latency, unexpected statuses and wrong images of the interval. Warm-up: the samples
# before max(one interval, half the run, at most 10 min). Pass: after warm-up the RSS level (median
# of the interval medians) of the last third of the run within +10 % of the first third's, the
# anonymous RSS within the configured bound (below), descriptors within +16 and threads within +2 of theirs, the disk
# directory within disk.byteLimit at every sample (looked at again 1 s later when over), 0
# unexpected statuses, 0 wrong images, every reload applied. Details: docs/Reliability.md ("Soak").
#
# Output: progress on stderr; without --json a summary, with --json the report (settings,
# totals, samples, checks, pass) as one JSON object on stdout. Draw it with
# Scripts/soak.sh --plot REPORT.json OUT.png (matplotlib, added to the venv).
#
# Memory against the configuration: anonymous RSS medians after warm-up at most the configured
# caches (memory.costLimit's higher value, http.encodedCacheSize, render.bufferCacheSize) +
# render.memoryLimit + a fixed overhead of 96 MiB (docs/Reliability.md, "Memory"); each sample
# keeps /stats' memoryUse (the process's memory by part).
#
# Environment: SOAK_STRATA (default .build/release/strata, built when missing), SOAK_BEFORE=1
# (a build without render.memoryLimit and render.bufferCacheSize: those keys left out, the
# memory bound not judged),
# SOAK_CONNECTIONS (12), SOAK_WARM=0 (no `strata warm` beside it, to tell its effects apart),
# SOAK_RSS_GROWTH_PCT (10: the RSS bound after warm-up; CI's 3 minutes use 25, see .ci/run),
# SOAK_KEEP=1 (keep the scratch folder and print its path).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.soak/venv"
CACHE="$ROOT/.soak/originals-v1"
STRATA="${SOAK_STRATA:-$ROOT/.build/release/strata}"
log() { printf '[soak] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 2
}

venv() {
  if ! "$VENV/bin/python" -c 'import PIL, sys; sys.exit(PIL.__version__ != "13.0.0")' >/dev/null 2>&1; then
    log "making $VENV with Pillow (pip)"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check "pillow==13.0.0" >&2
  fi
}

if [ "${1:-}" = --plot ]; then
  [ $# -eq 3 ] || die "usage: Scripts/soak.sh --plot REPORT.json OUT.png"
  venv
  "$VENV/bin/python" -c 'import matplotlib' >/dev/null 2>&1 ||
    "$VENV/bin/pip" install -q --disable-pip-version-check 'matplotlib>=3.7,<4' >&2
  exec "$VENV/bin/python" "$ROOT/Scripts/soak/soak.py" plot "$2" "$3"
fi

MINUTES=3
JSON=0
for arg in "$@"; do
  case "$arg" in
    --json) JSON=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *[!0-9]* | '') die "unknown argument: $arg (usage: Scripts/soak.sh [MINUTES] [--json])" ;;
    *) MINUTES=$arg ;;
  esac
done
[ "$MINUTES" -ge 1 ] || die "MINUTES must be at least 1"

for tool in heif-enc; do command -v "$tool" >/dev/null || die "$tool is missing (Scripts/install-deps.sh installs it)"; done
venv
PY="$VENV/bin/python"
if [ ! -x "$STRATA" ]; then
  log "building the release strata (swift build -c release --product strata)"
  (cd "$ROOT" && Scripts/swift.sh build -c release --product strata >&2)
fi

# The originals: made once into .soak/ (about a minute), copied into the scratch folder per run.
"$PY" "$ROOT/Scripts/soak/soak.py" originals "$CACHE"

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/strata-soak.XXXXXX")
SERVER_PID=""
cleanup() {
  local status=$? i
  if [ -n "$SERVER_PID" ]; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [ "${SOAK_KEEP:-0}" = 1 ]; then log "scratch kept in $SCRATCH"; else rm -rf "$SCRATCH"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cp -r "$CACHE/src" "$SCRATCH/src"
mkdir -p "$SCRATCH/disk"
PORT=$("$PY" "$ROOT/Scripts/soak/soak.py" port)
TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d " \n")
DISK_LIMIT=$((64 * 1024 * 1024))
# The server's settings, all in its configuration file (the reloaded key must not be on the
# command line, which outranks the file).
"$PY" - "$SCRATCH" "$PORT" "$TOKEN" "$DISK_LIMIT" "$STRATA" "$MINUTES" "${SOAK_CONNECTIONS:-12}" "$CACHE" <<'PY'
import json, os, sys
scratch, port, token, disk_limit, strata, minutes, connections, cache = sys.argv[1:]
values = {
    "source.directory": f"{scratch}/src",
    "disk.path": f"{scratch}/disk",
    "disk.byteLimit": int(disk_limit),
    "memory.costLimit": "48MiB",
    "memory.countLimit": 2000,
    "http.encodedCacheSize": "8MiB",
    "http.adminToken": token,
    "revalidateAfter": "5s",
    "negativeTTL": "10s",
    # What renders in flight and the cache of freed pixel buffers may hold: with the caches above,
    # the bound the anonymous RSS is judged against (SOAK_BEFORE=1: builds without these keys).
    "render.memoryLimit": "64MiB",
    "render.bufferCacheSize": "16MiB",
}
if os.environ.get("SOAK_BEFORE") == "1":
    del values["render.memoryLimit"], values["render.bufferCacheSize"]
warm = {"source.directory": f"{scratch}/src", "disk.path": f"{scratch}/disk", "disk.byteLimit": int(disk_limit), "memory.costLimit": "16MiB"}
def write(path, flat):
    tree = {}
    for k, v in flat.items():
        node = tree
        *parents, last = k.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = v
    with open(path, "w") as f:
        json.dump(tree, f, indent=2)
write(f"{scratch}/strata.yaml", values)
write(f"{scratch}/warm.yaml", warm)
json.dump({
    "port": int(port), "pid": 0, "minutes": int(minutes), "connections": int(connections),
    "cache": cache, "src": f"{scratch}/src", "disk": f"{scratch}/disk", "disk_limit": int(disk_limit),
    "admin_token": token, "strata": strata, "config": f"{scratch}/strata.yaml", "config_values": values,
    "warm_config": f"{scratch}/warm.yaml", "revalidate_after_s": 5.0, "report": f"{scratch}/report.json",
    "warm": os.environ.get("SOAK_WARM", "1") != "0",
    "rss_growth_pct": float(os.environ.get("SOAK_RSS_GROWTH_PCT", "10")),
}, open(f"{scratch}/settings.json", "w"))
PY

"$STRATA" serve --config "$SCRATCH/strata.yaml" --host 127.0.0.1 --port "$PORT" >"$SCRATCH/serve.log" 2>&1 </dev/null &
SERVER_PID=$!
for ((i = 0; i < 600; i++)); do
  curl -fsS -o /dev/null "http://127.0.0.1:$PORT/healthz" 2>/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || { tail -n 20 "$SCRATCH/serve.log" >&2; die "strata serve exited before it answered"; }
  sleep 0.1
done
log "strata serve (pid $SERVER_PID) on 127.0.0.1:$PORT; disk limit $((DISK_LIMIT >> 20)) MiB, memory 40–48 MiB"
"$PY" - "$SCRATCH/settings.json" "$SERVER_PID" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); s["pid"] = int(sys.argv[2]); json.dump(s, open(sys.argv[1], "w"))
PY

status=0
"$PY" "$ROOT/Scripts/soak/soak.py" run "$SCRATCH/settings.json" || status=$?
kill -0 "$SERVER_PID" 2>/dev/null || { tail -n 30 "$SCRATCH/serve.log" >&2; die "strata serve is gone"; }
[ -s "$SCRATCH/report.json" ] || die "no report"
if [ "$JSON" = 1 ]; then
  cat "$SCRATCH/report.json"
else
  "$PY" - "$SCRATCH/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{'t (s)':>6} {'RSS MiB':>8} {'fds':>4} {'thr':>4} {'disk MiB':>8} {'req/s':>6} {'p50 ms':>7} {'p99 ms':>7} {'unexp':>5} {'wrong':>5}")
for x in r["samples"]:
    print(f"{x['t_s']:>6.0f} {x['rss_bytes'] / 2**20:>8.1f} {x['fds']:>4} {x['threads']:>4} {x['disk_bytes'] / 2**20:>8.1f} {x['rps']:>6} "
          f"{x['p50_ms']:>7} {x['p99_ms']:>7} {x['unexpected']:>5} {x['wrong']:>5}{'  warm-up' if x['warmup'] else ''}")
t = r["totals"]
print(f"requests {t['requests']}, checked {t['checked']}, replacements {t['replacements']} ({t['purges']} purged), "
      f"reloads {t['reloads_confirmed']}/{t['reloads']}, warm runs {t['warm_runs']} {t['warm_exit_codes']}")
for name, c in r["checks"].items():
    print(f"  {'pass' if c['pass'] else 'FAIL'}  {name}  {json.dumps({k: v for k, v in c.items() if k != 'pass'})}")
print("PASS" if r["pass"] else "FAIL")
PY
fi
exit "$status"
