#!/usr/bin/env bash
# Draws docs/benchmarks.png from the JSON files in docs/bench/ (or the folder given):
#   Scripts/plot-benchmarks.sh [--dir FOLDER] [--out PNG]
# Runs Scripts/plot-benchmarks.py in the virtual environment .loadtest/venv (git-ignored; the one
# Scripts/loadtest.sh uses), adding matplotlib to it when it lacks it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.loadtest/venv"
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || { echo "python3-venv is missing: apt-get install python3-venv" >&2; exit 1; }
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
fi
[ -x "$VENV/bin/python" ] || { mkdir -p "$(dirname "$VENV")" && python3 -m venv "$VENV"; }
if ! "$VENV/bin/python" -c 'import matplotlib' >/dev/null 2>&1; then
  echo "installing matplotlib into $VENV" >&2
  "$VENV/bin/pip" install -q --disable-pip-version-check 'matplotlib>=3.7,<4'
fi
cd "$ROOT"
exec "$VENV/bin/python" Scripts/plot-benchmarks.py "$@"
