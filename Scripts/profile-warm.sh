#!/usr/bin/env bash
# Where a warm answer's time goes (issue 50): `perf record` of a release `strata serve` (or of
# strata-floor, the bare NIO server, with --floor) while wrk asks it for warm thumbnails, then
# `perf report` summarised: the share of the server's samples by library (kernel, libc, NIO,
# Strata…) and the top symbols.
#
#   Scripts/profile-warm.sh [--floor] [--keep]
#
# PROFILE_STRATA (default .build/release/strata), PROFILE_FLOOR (default
# .build-bench/release/strata-floor), PROFILE_SECONDS (default 8: perf's window, inside a wrk run
# of that plus 4 s; 2 threads, 32 connections, the six fixture photos' 256 px thumbnails).
# PROFILE_FLOOR_ARGS: more flags for strata-floor (--mode headers, --threads N).
# --keep leaves perf.data and the report in the scratch folder and prints its path.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STRATA="${PROFILE_STRATA:-$ROOT/.build/release/strata}"
FLOOR="${PROFILE_FLOOR:-$ROOT/.build-bench/release/strata-floor}"
WINDOW="${PROFILE_SECONDS:-8}"
TARGET=strata
PROFILE_KEEP=0
for arg in "$@"; do
  case "$arg" in
    --floor) TARGET=floor ;;
    --keep) PROFILE_KEEP=1 ;;
    *) echo "usage: Scripts/profile-warm.sh [--floor] [--keep]" >&2; exit 2 ;;
  esac
done
log() { printf '[profile-warm] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
command -v perf >/dev/null && command -v wrk >/dev/null ||
  { log "installing perf and wrk"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf wrk >&2; }
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/strata-profile-warm.XXXXXX")
KEEP_VARIABLE=PROFILE_KEEP
# shellcheck source=lib/processes.sh
source "$ROOT/Scripts/lib/processes.sh"

IMAGES=(jpeg/path-2560x1600.jpg jpeg/fallenleaf-2048x1280-420.jpg jpeg/eveningglow-1024x640-progressive.jpg
  jpeg/coldripple-1024x640-orientation6.jpg jpeg/kite-800x500-gray.jpg webp/path-2560x1600.webp)
# The load test's warm URLs for these photos (its helper writes them, warm-strata.txt).
python3 "$ROOT/Scripts/loadtest/helper.py" urls "$SCRATCH" "${IMAGES[@]}"
mv "$SCRATCH/warm-strata.txt" "$SCRATCH/urls.txt"

port=$(free_port)
start strata "$STRATA" serve --host 127.0.0.1 --port "$port" --source-directory "$ROOT/Fixtures"
STRATA_PID=$LAST_PID
BASE="http://127.0.0.1:$port"
wait_http strata "$STRATA_PID" "$BASE/healthz"
while IFS= read -r path; do curl -fsS -o /dev/null "$BASE$path"; done <"$SCRATCH/urls.txt"
PID=$STRATA_PID
if [ "$TARGET" = floor ]; then
  [ -x "$FLOOR" ] || die "no $FLOOR (swift build -c release --package-path Benchmarks --scratch-path .build-bench --product strata-floor)"
  mkdir -p "$SCRATCH/bodies/images" "$SCRATCH/heads/images"
  while IFS= read -r path; do
    file=${path%%\?*}
    mkdir -p "$SCRATCH/bodies$(dirname "$file")" "$SCRATCH/heads$(dirname "$file")"
    curl -fsS -D "$SCRATCH/heads$file" -o "$SCRATCH/bodies$file" "$BASE$path"
  done <"$SCRATCH/urls.txt"
  stop_group "$STRATA_PID"
  port=$(free_port)
  # shellcheck disable=SC2086 # PROFILE_FLOOR_ARGS is a list of flags
  start floor "$FLOOR" --bodies "$SCRATCH/bodies" --heads "$SCRATCH/heads" --port "$port" ${PROFILE_FLOOR_ARGS:-}
  PID=$LAST_PID
  BASE="http://127.0.0.1:$port"
  wait_http floor "$PID" "$BASE$(head -n 1 "$SCRATCH/urls.txt")"
fi

log "$TARGET: wrk -t2 -c32 for $((WINDOW + 4)) s, perf record -g for $WINDOW s of it"
wrk -t2 -c32 -d"$((WINDOW + 4))s" -s "$ROOT/Scripts/loadtest/rotate.lua" "$BASE" -- "$SCRATCH/urls.txt" 2 >"$SCRATCH/wrk.txt" &
WRK=$!
sleep 2
# The server's CPU time (user, system) over the window, from /proc: per answer, it compares
# servers without the noise of requests/s.
cpu() { awk '{ print $14, $15 }' "/proc/$PID/stat"; }
read -r user0 sys0 < <(cpu)
perf record -F 1999 -g -p "$PID" -o "$SCRATCH/perf.data" -- sleep "$WINDOW" >/dev/null 2>"$SCRATCH/perf-record.log"
read -r user1 sys1 < <(cpu)
wait "$WRK"
rps=$(awk '/^Requests\/sec/ { print $2 }' "$SCRATCH/wrk.txt")
python3 - "$user0" "$sys0" "$user1" "$sys1" "$rps" "$WINDOW" "$(getconf CLK_TCK)" <<'PY'
import sys
u0, s0, u1, s1, rps, window, tick = (float(v) for v in sys.argv[1:])
answers = rps * window
print(f"== {int(rps)} answers/s; server CPU per answer: {(u1 - u0 + s1 - s0) / tick / answers * 1e6:.1f} us "
      f"(user {(u1 - u0) / tick / answers * 1e6:.1f}, system {(s1 - s0) / tick / answers * 1e6:.1f}; perf sampling included)")
PY
echo "== $TARGET: samples by library (perf report --sort dso, self)"
perf report -i "$SCRATCH/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -12
echo "== $TARGET: top symbols (perf report --sort dso,symbol, self)"
perf report -i "$SCRATCH/perf.data" --no-children --sort dso,symbol --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -40
perf report -i "$SCRATCH/perf.data" --no-children --sort dso,symbol --stdio >"$SCRATCH/report.txt" 2>/dev/null || true
