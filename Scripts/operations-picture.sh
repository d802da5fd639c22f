#!/usr/bin/env bash
# Makes docs/operations.jpg: one photo through /images with each operation, side by side.
#
# Usage: Scripts/operations-picture.sh [STRATA] [OUTPUT]
#   STRATA  the strata binary (default .build/debug/strata; build it first)
#   OUTPUT  default docs/operations.jpg
# Needs `vips` (libvips-tools) and curl. Starts `strata serve` on 127.0.0.1 with a temporary
# source directory (the photo, and the photo framed in a flat border for the trim), stops it by
# its pid, and joins the answers (each 240×240 at most, centred on grey) in one row.
set -euo pipefail
cd "$(dirname "$0")/.."
strata=${1:-.build/debug/strata}
output=${2:-docs/operations.jpg}
work=$(mktemp -d /tmp/strata-operations.XXXXXX)
pid=
cleanup() {
    [[ -n $pid ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/source"
cp Fixtures/jpeg/fallenleaf-2048x1280-420.jpg "$work/source/photo.jpg"
vips embed Fixtures/jpeg/fallenleaf-2048x1280-420.jpg "$work/source/framed.png" 300 200 2648 1680 --extend white

port=$((20000 + RANDOM % 20000))
"$strata" serve --host 127.0.0.1 --port "$port" --source-directory "$work/source" --disk-path "$work/disk" >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
    sleep 0.1
done

tiles=()
i=0
for query in "photo.jpg?w=240&h=240" "photo.jpg?w=240&h=240&blur=3" "photo.jpg?w=240&h=240&sharpen=1.5" \
    "photo.jpg?w=240&h=240&crop=0.3,0.1,0.4,0.8" "photo.jpg?w=240&h=240&rot=90&flip=h" \
    "photo.jpg?w=240&h=240&mode=pad&bg=1e3a5f" "framed.png?w=240&h=240" "framed.png?w=240&h=240&trim=10"; do
    curl -sf -o "$work/answer-$i.png" "http://127.0.0.1:$port/images/$query&format=png"
    vips gravity "$work/answer-$i.png" "$work/tile-$i.v" centre 252 252 --extend background --background "128 128 128"
    tiles+=("$work/tile-$i.v")
    i=$((i + 1))
done
vips arrayjoin "${tiles[*]}" "$output[Q=85,strip]" --across ${#tiles[@]}
echo "wrote $output: plain, blur=3, sharpen=1.5, crop=0.3,0.1,0.4,0.8, rot=90&flip=h, mode=pad&bg=1e3a5f, framed, framed&trim=10"
