#!/usr/bin/env bash
# The HEIC figure: a 4032×3024 HEIC rendered to 1024 px by Strata (`strata-bench codecs`, the
# release build: ImageRenderer's decode + Lanczos, with headroom 2) against pillow-heif's decode +
# resize of the same files (Scripts/bench/pillow_heif_anchor.py), with and without an embedded
# 2048 px thumbnail, back to back in one run.
#
#   Scripts/bench-heic.sh [ROUNDS]     (default 15; needs `swift build -c release --product strata`
#                                       for `strata decode`, `swift build -c release --package-path
#                                       Benchmarks --scratch-path .build-bench` for `strata-bench`,
#                                       and a venv with pillow-heif: PILLOW_HEIF_PYTHON, default
#                                       /tmp/ph/bin/python)
#
# The 4032×3024 original is the "Path" fixture (2560×1600) enlarged and cropped by Strata to 4:3
# (`strata decode --upscale --mode fill`), encoded by heif-enc (x265, -q 85) as one HEVC image
# (phones write 512×512 grids; libheif decodes their tiles on several threads).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-15}"
python="${PILLOW_HEIF_PYTHON:-/tmp/ph/bin/python}"
strata=.build/release/strata
strata_bench=.build-bench/release/strata-bench
[ -x "$strata" ] || { echo "bench-heic: build it first: swift build -c release --product strata" >&2; exit 2; }
[ -x "$strata_bench" ] || {
    echo "bench-heic: build it first: swift build -c release --package-path Benchmarks --scratch-path .build-bench" >&2
    exit 2
}
"$python" -c "import pillow_heif" 2>/dev/null || {
    echo "bench-heic: no pillow-heif for $python: python3 -m venv /tmp/ph && /tmp/ph/bin/pip install pillow-heif pillow" >&2
    exit 2
}
work=$(mktemp -d /tmp/strata-bench-heic-XXXXXX)
trap 'rm -rf "$work"' EXIT
"$strata" decode Fixtures/jpeg/path-2560x1600.jpg --size 4032x3024 --mode fill --upscale --out "$work/original.png" >/dev/null
heif-enc -q 85 -o "$work/photo-4032x3024.heic" "$work/original.png" >/dev/null
heif-enc -q 85 -t 2048 -o "$work/photo-4032x3024-thumb2048.heic" "$work/original.png" >/dev/null
ls -l "$work"/*.heic | awk '{print "bench-heic: " $NF ": " $5 " bytes"}'
echo "bench-heic: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for file in "$work/photo-4032x3024.heic" "$work/photo-4032x3024-thumb2048.heic"; do
    "$strata_bench" codecs --iterations "$rounds" "$file" | grep -E "^/|anchor|render fit 1024"
    "$python" Scripts/bench/pillow_heif_anchor.py --runs "$rounds" --target 1024 "$file"
done
