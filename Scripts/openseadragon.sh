#!/usr/bin/env bash
# OpenSeadragon (BSD-3-Clause), the IIIF deep-zoom viewer the browser test drives, fetched into
# .build/openseadragon/ when missing and printed as a path. It is not on Debian or on PyPI as
# such and npm is not reachable from CI's machines, so it is taken from the sdist of PyPI's
# openslide-python, whose deep-zoom example ships OpenSeadragon's build and its licence:
# openslide-python 1.4.7 holds OpenSeadragon 6.1.1. Nothing of it goes into the repository.
#
#   Scripts/openseadragon.sh    fetch if needed, print the path of openseadragon.js
set -euo pipefail
cd "$(dirname "$0")/.."
release="openslide_python-1.4.7"
want="openseadragon 6.1.1"
dir="$PWD/.build/openseadragon"
script="$dir/openseadragon.js"
if [ ! -s "$script" ] || ! head -1 "$script" | grep -q "$want"; then
    mkdir -p "$dir"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    # pip from the system's Python when it has one, else from a throwaway venv (as moto.sh's).
    pip=(python3 -m pip)
    if ! python3 -m pip --version >/dev/null 2>&1; then
        python3 -m venv "$work/venv" >&2
        pip=("$work/venv/bin/pip")
    fi
    "${pip[@]}" download -q --no-deps --no-binary :all: -d "$work" "openslide-python==${release#openslide_python-}" >&2
    tar -xzf "$work/$release.tar.gz" -C "$work" "$release/examples/deepzoom/static/openseadragon.js" \
        "$release/examples/deepzoom/licenses/LICENSE.openseadragon"
    head -1 "$work/$release/examples/deepzoom/static/openseadragon.js" | grep -q "$want" \
        || { echo "openseadragon.sh: $release does not hold $want" >&2; exit 1; }
    cp "$work/$release/examples/deepzoom/licenses/LICENSE.openseadragon" "$dir/LICENSE"
    cp "$work/$release/examples/deepzoom/static/openseadragon.js" "$script"
fi
echo "$script"
