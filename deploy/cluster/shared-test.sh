#!/usr/bin/env bash
# The cluster over object storage (deploy/cluster/shared.py says what it checks): originals in a
# bucket, renders shared through a second one, two moto servers (signatures checked) and the
# routing nginx on 127.0.0.1 — re-shard with and without the shared tier, and the shared store
# frozen under load. Every process it started is stopped by its pid, pass or fail.
#
# STRATA: the binary (default: .build/release/strata if built, else .build/debug/strata).
# SHARED_KEYS (120), SHARED_JSON (write the figures there).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export CLUSTER_DIR="${CLUSTER_DIR:-$(mktemp -d /tmp/strata-shared.XXXXXX)}"
export CLUSTER_PORT="${CLUSTER_PORT:-$((20000 + RANDOM % 12000))}"
export CLUSTER_ORIGIN_ROOT="$CLUSTER_DIR/originals"
mkdir -p "$CLUSTER_ORIGIN_ROOT"
chmod 755 "$CLUSTER_DIR"
export FAIL_TIMEOUT=3s MAX_FAILS=1
cleanup() {
    for d in "$CLUSTER_DIR"/*/; do CLUSTER_DIR="$d" "$here/cluster.sh" stop >/dev/null 2>&1 || true; done
    rm -rf "$CLUSTER_DIR"
}
trap cleanup EXIT
echo "shared cluster test: state in $CLUSTER_DIR, router on 127.0.0.1:$CLUSTER_PORT"
python3 "$here/shared.py"
