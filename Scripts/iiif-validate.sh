#!/usr/bin/env bash
# Runs the IIIF consortium's validator (iiif-validator from PyPI) against `strata serve`:
# Image API 3.0 and 2.0 at level 2, over a PNG original and over the same image as a lossless
# JPEG 2000 (opj_compress; served from its own resolution levels).
#
# Installs the validator in a venv under .iiif-validator/ (git-ignored), draws the validator's
# 1000×1000 test image (10×10 cells of 100 px in the colours of the validator's own table,
# read from the installed package) as a PNG in a temporary source directory, starts
# `strata serve` on a free port of 127.0.0.1 with that directory as its source, runs both
# validations, stops the server by its pid, and exits non-zero when either fails.
#
# Usage: Scripts/iiif-validate.sh   (after `swift build`; STRATA=path overrides the binary)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
strata=${STRATA:-$root/.build/debug/strata}
[ -x "$strata" ] || { echo "no $strata: run swift build first" >&2; exit 2; }

venv=$root/.iiif-validator/venv
if [ ! -x "$venv/bin/iiif-validate.py" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "iiif-validator==1.0.5" "pillow==13.0.0"
fi

identifier=67352ccc-d1b0-11e1-89ae-279075081939
work=$(mktemp -d)
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/source"

# The test image: cell (x, y) covers pixels x·100…, y·100… in colorInfo[x][y].
"$venv/bin/python" - "$work/source/$identifier" <<'PY'
import sys
from PIL import Image
from iiif_validator.validator import ValidationInfo
colors = ValidationInfo().colorInfo
image = Image.new("RGB", (1000, 1000))
for x in range(10):
    for y in range(10):
        image.paste(colors[x][y], (x * 100, y * 100, x * 100 + 100, y * 100 + 100))
image.save(sys.argv[1], format="PNG")
PY
# The same pixels as JPEG 2000 (lossless, 1000×1000 in four tiles, six resolution levels).
cp "$work/source/$identifier" "$work/grid.png"
opj_compress -i "$work/grid.png" -o "$work/grid.jp2" -t 512,512 -n 6 >/dev/null
mv "$work/grid.jp2" "$work/source/jp2-$identifier"

port=$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
"$strata" serve --source-directory "$work/source" --disk-path "$work/disk" --host 127.0.0.1 --port "$port" \
    >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done

status=0
for id in "$identifier" "jp2-$identifier"; do
    for version in 3.0 2.0; do
        echo "== IIIF Image API $version, level 2: $id"
        if ! "$venv/bin/iiif-validate.py" -s "127.0.0.1:$port" -p iiif/"${version%%.*}" -i "$id" \
            --version "$version" --level 2 -v; then
            status=1
        fi
    done
done
[ "$status" -eq 0 ] || { echo "-- server log:"; tail -20 "$work/server.log"; }
exit "$status"
