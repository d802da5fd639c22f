#!/usr/bin/env bash
# Strata's warm path against its floor and nginx (issue 50): Scripts/loadtest.sh ROUNDS times in
# a row (default 5), thumbor's cases off (LOADTEST_SKIP_THUMBOR=1 unless set), so that nginx, the
# bare NIO server (strata-floor) and `strata serve` alternate; then, per round and as medians of
# the rounds, the three ratios of requests/s — Strata ÷ bare NIO (Strata's own cost), bare NIO ÷
# nginx (the stack's), Strata ÷ nginx — with each case's p99 and the zoom mix's rate.
#
#   Scripts/loadtest-floor.sh [ROUNDS] [--json FILE]
#
# Builds what it lacks: the release `strata` (make release) and strata-floor (the Benchmarks
# package). LOADTEST_SECONDS and every other LOADTEST_ variable pass through. --json FILE keeps
# every round's loadtest object and the medians (docs/bench/ holds such files).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=5
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --json) OUT=$2; shift 2 ;;
    [0-9]*) ROUNDS=$1; shift ;;
    *) echo "usage: Scripts/loadtest-floor.sh [ROUNDS] [--json FILE]" >&2; exit 2 ;;
  esac
done
log() { printf '[loadtest-floor] %s\n' "$*" >&2; }
cd "$ROOT"
[ -x "${LOADTEST_STRATA:-.build/release/strata}" ] || { log "building the release strata"; swift build -c release --product strata >&2; }
if [ ! -x "${LOADTEST_FLOOR:-.build-bench/release/strata-floor}" ]; then
  log "building strata-floor"
  Scripts/swift.sh build -c release --package-path Benchmarks --scratch-path .build-bench --product strata-floor >&2
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/strata-loadtest-floor.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
for ((round = 1; round <= ROUNDS; round++)); do
  log "round $round of $ROUNDS"
  LOADTEST_SKIP_THUMBOR="${LOADTEST_SKIP_THUMBOR:-1}" Scripts/loadtest.sh --json >"$WORK/round-$round.json"
done
python3 - "$WORK" "$ROUNDS" "$OUT" <<'EOF'
import json, statistics, sys
work, rounds, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
runs = [json.load(open(f"{work}/round-{i}.json")) for i in range(1, rounds + 1)]
ratios = {"strata/floor": ("strata_warm", "floor"), "floor/nginx": ("floor", "nginx"), "strata/nginx": ("strata_warm", "nginx")}
def ratio(run, a, b):
    return run[a]["rps"] / run[b]["rps"] if run.get(a) and run.get(b) and run[b]["rps"] else None
def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
print(f"{'round':<7}" + "".join(f"{k:>14}" for k in ratios) + f"{'p99 nginx':>11}{'floor':>8}{'strata':>8}{'zoom req/s':>12}")
rows = []
for i, run in enumerate(runs, 1):
    row = {k: ratio(run, a, b) for k, (a, b) in ratios.items()}
    row.update({f"p99_{c}": (run.get(c) or {}).get("p99_ms") for c in ("nginx", "floor", "strata_warm")})
    row["zoom_rps"] = (run.get("strata_zoom") or {}).get("rps")
    rows.append(row)
    fmt = lambda v, f: format(v, f) if v is not None else "—"
    print(f"{i:<7}" + "".join(f"{fmt(row[k], '.2f'):>14}" for k in ratios)
          + f"{fmt(row['p99_nginx'], '.2f'):>11}{fmt(row['p99_floor'], '.2f'):>8}{fmt(row['p99_strata_warm'], '.2f'):>8}"
          + f"{fmt(row['zoom_rps'], '.0f'):>12}")
medians = {k: median(r[k] for r in rows) for k in rows[0]}
print("median " + "".join(f"{(format(medians[k], '.2f') if medians[k] is not None else '—'):>14}" for k in ratios)
      + "".join(f"{(format(medians[k], '.2f') if medians[k] is not None else '—'):>{w}}"
                for k, w in (("p99_nginx", 11), ("p99_floor", 8), ("p99_strata_warm", 8)))
      + f"{(format(medians['zoom_rps'], '.0f') if medians['zoom_rps'] is not None else '—'):>12}")
if out:
    with open(out, "w") as f:
        json.dump({"rounds": runs, "ratios": rows, "medians": medians}, f, indent=1)
        f.write("\n")
EOF
