#!/usr/bin/env bash
# Agreement of Strata's smart crop (gravity=smart) with libvips' smartcrop(interesting=attention)
# on the photographs in Fixtures: for each file and box, both choose a crop of the same size
# (the box's aspect, as large as the image allows); they agree when their centres are within
# 10 % of the image's side along the axis the crop slides on. Prints each pair and the share.
# Needs `vips` (Debian's libvips-tools) and a built `strata-bench` (STRATA_BENCH=..., default the
# release one: `swift build -c release --package-path Benchmarks --scratch-path .build-bench`).
set -euo pipefail
cd "$(dirname "$0")/.."
STRATA_BENCH=${STRATA_BENCH:-.build-bench/release/strata-bench}
[ -x "$STRATA_BENCH" ] || {
  echo "no $STRATA_BENCH: swift build -c release --package-path Benchmarks --scratch-path .build-bench" >&2
  exit 2
}
command -v vips >/dev/null || { echo "needs vips (apt-get install libvips-tools)" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
agree=0
total=0
while IFS=$'\t' read -r file box x y w h; do
  path=$(ls Fixtures/*/"$file")
  W=$(vipsheader -f width "$path" 2>/dev/null)
  H=$(vipsheader -f height "$path" 2>/dev/null)
  cw=$(printf '%.0f' "$w")
  ch=$(printf '%.0f' "$h")
  if [ "$cw" -ge "$W" ] && [ "$ch" -ge "$H" ]; then continue; fi
  vips smartcrop "$path" "$scratch/crop.v" "$cw" "$ch" --interesting attention 2>/dev/null
  vx=$(( -$(vipsheader -f xoffset "$scratch/crop.v") ))
  vy=$(( -$(vipsheader -f yoffset "$scratch/crop.v") ))
  verdict=$(python3 - "$x" "$y" "$vx" "$vy" "$W" "$H" "$cw" "$ch" <<'PY'
import sys
x, y, vx, vy, W, H, cw, ch = map(float, sys.argv[1:])
# The crop slides along one axis; its offset there, as a share of that side.
d = abs(x - vx) / W if cw < W else abs(y - vy) / H
print(f"{d:.3f} {'agree' if d <= 0.10 else 'differ'}")
PY
)
  total=$((total + 1))
  case "$verdict" in *agree) agree=$((agree + 1)) ;; esac
  printf '%-40s %-8s strata %6.0f,%-6.0f libvips %6d,%-6d  distance %s\n' "$file" "$box" "$x" "$y" "$vx" "$vy" "$verdict"
done < <("$STRATA_BENCH" gravity --crops "$@")
echo "agreement: $agree of $total crops (centres within 10 % of the side)"
