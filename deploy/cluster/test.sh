#!/usr/bin/env bash
# The cluster deployment's test (CI runs it after `make test`): three `strata serve` nodes behind
# the routing nginx, over the origin nginx, all on 127.0.0.1 — placement, hit ratios against
# their prediction, a node stopped with requests in flight, its restart from disk, a node
# joining (deploy/cluster/check.py says what each check measures). Exits non-zero when a check
# fails; every process it started is stopped by its pid, pass or fail.
#
# STRATA: the binary (default: .build/release/strata if built, else .build/debug/strata).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export CLUSTER_DIR="${CLUSTER_DIR:-$(mktemp -d /tmp/strata-cluster.XXXXXX)}"
# Ports below Linux's ephemeral range (32768+), so no outgoing connection holds one; the
# router takes CLUSTER_PORT, the origin +1, node I +10+I. CLUSTER_PORT overrides it.
export CLUSTER_PORT="${CLUSTER_PORT:-$((20000 + RANDOM % 12000))}"
# The origin serves the names check.py links there (a few fixtures under many keys).
# (mktemp's 0700 would hide them from nginx's workers, which run as nobody under root).
export CLUSTER_ORIGIN_ROOT="$CLUSTER_DIR/originals"
chmod 755 "$CLUSTER_DIR"
export FAIL_TIMEOUT=3s MAX_FAILS=1
trap '"$here/cluster.sh" stop >/dev/null 2>&1 || true; rm -rf "$CLUSTER_DIR"' EXIT
echo "cluster test: state in $CLUSTER_DIR, router on 127.0.0.1:$CLUSTER_PORT"
python3 "$here/check.py"
