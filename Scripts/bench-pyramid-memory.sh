#!/usr/bin/env bash
# A tile pyramid's peak memory against its original's size, on photo mosaics like the one of
# issue 50 (a 981-megapixel, 40923×23977 baseline JPEG that a user's `strata serve` built with a
# peak RSS of 538 MiB, over the 512 MB bound). The mosaics are made here with libvips from the
# 5120×2880 photos of Debian's plasma-workspace-wallpapers (4:5.27.5-2, the package the Fixtures
# come from; downloaded with apt-get, not installed), 8 across and 9 down, cut to 40923×23977:
#   mosaic-q90.jpg       quality 90, 4:2:0
#   mosaic-q97-444.jpg   quality 97, 4:4:4 (the same pixels, more bytes)
# Each is built into a fresh pyramid by `strata warm --iiif` (256 px tiles, nothing served), timed
# with /usr/bin/time: the file's size, the build's wall time and its peak RSS (VmHWM).
#
#   Scripts/bench-pyramid-memory.sh [WORK_DIR]   (default /tmp/strata-pyramid-memory; about 5 GB)
#   STRATA=path  the strata binary (default .build/release/strata)
set -euo pipefail
cd "$(dirname "$0")/.."
strata=${STRATA:-$PWD/.build/release/strata}
work=${1:-/tmp/strata-pyramid-memory}
[ -x "$strata" ] || { echo "no strata binary at $strata (swift build -c release, or STRATA=…)" >&2; exit 2; }
for tool in vips vipsheader apt-get dpkg-deb /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 2; }
done
export VIPS_WARNING=0
mkdir -p "$work/source"
if [ ! -s "$work/source/mosaic-q90.jpg" ]; then
    walls="$work/wallpapers"
    if [ ! -d "$walls/x" ]; then
        mkdir -p "$walls"
        (cd "$walls" && apt-get download plasma-workspace-wallpapers >/dev/null && dpkg-deb -x ./*.deb x)
    fi
    images="$walls/x/usr/share/wallpapers"
    names=(Flow Shell Volna SafeLanding Honeywave Altai IceCold Kay MilkyWay Patak)
    mkdir -p "$work/v"
    for i in "${!names[@]}"; do
        photo=$(ls "$images/${names[$i]}/contents/images/5120x2880."* | head -1)
        # Three bands, sRGB (some of the PNGs have an alpha band).
        vips colourspace "$photo" "$work/v/srgb.v" srgb
        vips extract_band "$work/v/srgb.v" "$work/v/$i.v" 0 --n 3
    done
    rm -f "$work/v/srgb.v"
    tiles=()
    for n in $(seq 0 71); do tiles+=("$work/v/$(((n * 7 + n / 8) % 10)).v"); done
    vips arrayjoin "${tiles[*]}" "$work/join.v" --across 8
    vips extract_area "$work/join.v" "$work/source/mosaic-q90.jpg[Q=90,strip]" 0 0 40923 23977
    rm -f "$work/join.v"
fi
[ -s "$work/source/mosaic-q97-444.jpg" ] ||
    vips copy "$work/source/mosaic-q90.jpg" "$work/source/mosaic-q97-444.jpg[Q=97,no_subsample,strip]"

printf '%-22s %12s %10s %14s\n' file bytes build_s peak_rss_mib
for image in mosaic-q90.jpg mosaic-q97-444.jpg; do
    mkdir -p "$work/one"
    rm -rf "$work/one"/* "$work/pyramids"
    ln "$work/source/$image" "$work/one/$image" 2>/dev/null || cp "$work/source/$image" "$work/one/$image"
    /usr/bin/time -f 'wall=%e peak_kb=%M' -o "$work/time.txt" "$strata" warm "$work/one" --iiif \
        --iiif-pyramid-path "$work/pyramids" --iiif-tiled-above 1 --iiif-tile-size 256 \
        --iiif-max-source-pixels 4000000000 --memory-pressure-enabled false >"$work/warm.log" 2>&1 ||
        { tail -5 "$work/warm.log" >&2; exit 1; }
    grep -q 'pyramids failed: 0' "$work/warm.log" || { tail -5 "$work/warm.log" >&2; exit 1; }
    wall=$(sed -n 's/.*wall=\([0-9.]*\).*/\1/p' "$work/time.txt")
    peak=$(sed -n 's/.*peak_kb=\([0-9]*\).*/\1/p' "$work/time.txt")
    printf '%-22s %12s %10s %14s\n' "$image" "$(stat -c %s "$work/source/$image")" "$wall" "$((peak / 1024))"
done
rm -rf "$work/pyramids" "$work/one"
