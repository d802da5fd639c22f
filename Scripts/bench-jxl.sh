#!/usr/bin/env bash
# The JPEG XL figures (docs/Benchmarks.md, "JPEG XL answers"): bytes of JPEG XL, AVIF and JPEG
# answers at equal SSIM over the Fixtures photos, their encode times, and libjxl's effort 3, 5
# and 7 compared (Scripts/bench/jxl_bench.py says how each is measured).
#
#   Scripts/bench-jxl.sh [ROUNDS] [OUT.json]   (default 5 timing rounds; needs
#                                               `swift build -c release --product strata`,
#                                               avifdec, cjxl and djxl: Scripts/install-deps.sh)
#
# Python with numpy, Pillow and scikit-image: $JXL_BENCH_PYTHON, else a venv made under .build/.
set -euo pipefail
cd "$(dirname "$0")/.."
strata=.build/release/strata
[ -x "$strata" ] || { echo "bench-jxl: build it first: swift build -c release --product strata" >&2; exit 2; }
python="${JXL_BENCH_PYTHON:-.build/bench-venv/bin/python}"
if ! "$python" -c "import numpy, PIL, skimage" 2>/dev/null; then
    python3 -m venv .build/bench-venv
    .build/bench-venv/bin/pip install -q numpy pillow scikit-image
    python=.build/bench-venv/bin/python
fi
exec "$python" Scripts/bench/jxl_bench.py "${1:-5}" "${2:-}"
