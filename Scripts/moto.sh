#!/usr/bin/env bash
# The moto server (PyPI `moto[server]`, a local S3 that checks AWS Signature Version 4 when
# started with INITIAL_NO_AUTH_ACTION_COUNT) in its own virtual environment, .build/moto-venv.
# Installs it when missing; prints the path of its `moto_server` and of its python.
#
#   Scripts/moto.sh            install if needed, print "MOTO_SERVER PYTHON"
set -euo pipefail
cd "$(dirname "$0")/.."
version="5.2.1"
venv="${STRATA_MOTO_VENV:-$PWD/.build/moto-venv}"
if [ ! -x "$venv/bin/moto_server" ] || ! "$venv/bin/python" -c "import moto,sys; sys.exit(moto.__version__ != '$version')" 2>/dev/null; then
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q "moto[server]==$version" >&2
fi
echo "$venv/bin/moto_server $venv/bin/python"
