#!/usr/bin/env bash
# Each image operation against libvips on the same decoded photo, in one run:
# `strata-bench operations` and Scripts/bench/pyvips_operations.py, interleaved ROUNDS times
# (the medians of each side's medians), and the ratio Strata ÷ libvips per operation.
#
# Usage: Scripts/bench-operations.sh [--rounds N] [--json FILE] [PHOTO]
#   PHOTO   default Fixtures/jpeg/path-2560x1600.jpg
# Needs the benchmarks built in release (swift build -c release --package-path Benchmarks
# --scratch-path .build-bench) and pyvips: PYVIPS_PYTHON (default: a venv in /tmp/strata-pyvips,
# made with `pip install pyvips` when missing; Debian's libvips42 must be installed).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 json= photo=Fixtures/jpeg/path-2560x1600.jpg
while [[ $# -gt 0 ]]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    *) photo=$1; shift ;;
    esac
done
bench=.build-bench/release/strata-bench
[[ -x $bench ]] || { echo "bench-operations: build $bench first (see docs/Benchmarks.md)" >&2; exit 1; }
python=${PYVIPS_PYTHON:-/tmp/strata-pyvips/bin/python}
if ! "$python" -c 'import pyvips' 2>/dev/null; then
    python3 -m venv /tmp/strata-pyvips && /tmp/strata-pyvips/bin/pip -q install pyvips
    python=/tmp/strata-pyvips/bin/python
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for round in $(seq "$rounds"); do
    "$bench" operations "$photo" --json >"$work/strata-$round.json"
    "$python" Scripts/bench/pyvips_operations.py --json "$photo" >"$work/vips-$round.json"
done
python3 - "$work" "$rounds" "$photo" "$json" <<'EOF'
import json, statistics, sys, datetime
work, rounds, photo, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
strata = [json.load(open(f"{work}/strata-{r}.json")) for r in range(1, rounds + 1)]
vips = [json.load(open(f"{work}/vips-{r}.json")) for r in range(1, rounds + 1)]
rows = []
for name in strata[0]["ms"]:
    s = statistics.median(x["ms"][name] for x in strata)
    v = statistics.median(x["ms"][name] for x in vips)
    rows.append({"operation": name, "strata_ms": round(s, 2), "libvips_ms": round(v, 2), "ratio": round(s / v, 2)})
    print(f"{name:<12} strata {s:8.2f} ms   libvips {v:8.2f} ms   ratio {s / v:5.2f}")
if out:
    json.dump({"date": datetime.date.today().isoformat(), "photo": photo, "size": strata[0]["size"],
               "libvips_bands": vips[0]["bands"], "rounds": rounds, "results": rows}, open(out, "w"), indent=1)
    print(f"wrote {out}")
EOF
