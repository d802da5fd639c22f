#!/usr/bin/env bash
# Allocations per warm answer of a release `strata serve` (issue 50), counted in the whole process:
# Scripts/bench/alloc_count.c, preloaded, counts every `malloc`-family call (glibc's allocator
# underneath: process.allocator system). After a warm-up, the count while idle for 2 s (the
# process's own background rate) and during a wrk run of ALLOC_SECONDS (default 5) on one warm
# URL; allocations per answer = (counted − background) ÷ answers. Cases: an `/images` thumbnail
# (JPEG), a IIIF tile and a thumbor URL (its route on, unsafe URLs allowed), all answered by the
# warm path.
#
#   Scripts/bench-warm-allocations.sh [--json]
#
# ALLOC_STRATA: the binary (default .build/release/strata). The in-process check of the same
# path, in every test run, is WarmPathAllocationTests.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STRATA="${ALLOC_STRATA:-$ROOT/.build/release/strata}"
SECONDS_EACH="${ALLOC_SECONDS:-5}"
JSON=0
[ "${1:-}" = "--json" ] && JSON=1
log() { printf '[warm-allocations] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
command -v wrk >/dev/null || { log "installing wrk"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >&2; }
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/strata-warm-allocations.XXXXXX")
KEEP_VARIABLE=ALLOC_KEEP
# shellcheck source=lib/processes.sh
source "$ROOT/Scripts/lib/processes.sh"
cc -O2 -shared -fPIC -o "$SCRATCH/alloc_count.so" "$ROOT/Scripts/bench/alloc_count.c" -lpthread

PORT=$(free_port)
BASE="http://127.0.0.1:$PORT"
COUNT="$SCRATCH/count"
LD_PRELOAD="$SCRATCH/alloc_count.so" ALLOC_COUNT_FILE="$COUNT" start strata "$STRATA" serve --host 127.0.0.1 --port "$PORT" \
  --source-directory "$ROOT/Fixtures" --process-allocator system --thumbor-enabled true --thumbor-allow-unsafe true
wait_http strata "$LAST_PID" "$BASE/healthz"

count() { sleep 0.1; cat "$COUNT"; }
results=()
for target in "/images/jpeg/fallenleaf-2048x1280-420.jpg?w=256&h=256&format=jpeg" \
  "/iiif/3/jpeg%2Fpath-2560x1600.jpg/0,0,1024,1024/256,/0/default.jpg" \
  "/unsafe/fit-in/256x256/filters:format(jpeg):quality(80)/jpeg/fallenleaf-2048x1280-420.jpg"; do
  for _ in 1 2 3; do curl -fsS -o /dev/null "$BASE$target"; done
  tier=$(curl -fsS -o /dev/null -D - "$BASE$target" | tr -d '\r' | awk 'tolower($1) == "x-strata-tier:" { print $2 }')
  a=$(count); sleep 2; b=$(count)
  background=$(((b - a) / 2))
  out=$(wrk -t1 -c8 -d"${SECONDS_EACH}s" "$BASE$target")
  c=$(count)
  answers=$(awk '/requests in/ { print $1 }' <<<"$out")
  per=$(python3 -c "print(round(($c - $b - $background * ($SECONDS_EACH + 0.2)) / $answers, 2))")
  log "$target ($tier): $answers answers, $((c - b)) allocations counted, background $background/s: $per per answer"
  results+=("{\"target\":\"$target\",\"tier\":\"$tier\",\"answers\":$answers,\"allocations_per_answer\":$per}")
done
if [ "$JSON" = 1 ]; then
  (IFS=,; echo "[${results[*]}]")
else
  printf '%s\n' "${results[@]}"
fi
