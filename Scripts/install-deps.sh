#!/usr/bin/env bash
# Installs the Debian packages Strata builds against, and the image tools its codec tests make
# their AVIF, HEIC and GIF files with and read AVIF answers back with (avifenc/avifdec,
# heif-enc/heif-convert, gifsicle), make pyramidal TIFFs and JPEG 2000 files with (vips,
# opj_compress), make JPEG XL files and read JPEG XL answers back with (cjxl/djxl), and the
# jemalloc that `strata serve` preloads (process.allocator), only when they are missing.
set -euo pipefail
need=()
for pkg in libturbojpeg0-dev libjpeg62-turbo-dev libwebp-dev libpng-dev zlib1g-dev liblcms2-dev libavif-dev libheif-dev libde265-dev libgif-dev libtiff-dev libtiff-tools libxxhash-dev pkg-config libavif-bin libheif-examples gifsicle libvips-tools libjemalloc2 libopenjp2-7-dev libopenjp2-tools libjxl-dev libjxl-tools; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
