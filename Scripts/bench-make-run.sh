#!/usr/bin/env bash
# A first `make run` from a fresh clone, timed: clones this repository at REV (default HEAD) into
# a temporary folder, starts `make run` there and prints the seconds until `strata serve`
# answers /healthz on 127.0.0.1:8080 (the packages resolved, the release `strata` compiled from
# nothing, the server started), then stops it by its process group and removes the clone.
# Port 8080 must be free. Run it alone on the machine: it measures a build.
#
#   Scripts/bench-make-run.sh [REV]     e.g. Scripts/bench-make-run.sh HEAD~1
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
rev="${1:-HEAD}"
if curl -s -o /dev/null http://127.0.0.1:8080/healthz; then
    echo "bench-make-run: something already answers on 127.0.0.1:8080" >&2
    exit 1
fi
clone=$(mktemp -d /tmp/strata-make-run-XXXXXX)
log="$clone.log"
pid=""
cleanup() {
    [ -z "$pid" ] || kill -- "-$pid" 2>/dev/null || true
    [ -z "$pid" ] || wait "$pid" 2>/dev/null || true
    rm -rf "$clone"
}
trap cleanup EXIT
git clone -q "$repo" "$clone"
git -C "$clone" checkout -q "$rev"
start=$(date +%s.%N)
# Its own process group, so that make, the build and the server stop together.
setsid make -C "$clone" run >"$log" 2>&1 &
pid=$!
until curl -s -o /dev/null http://127.0.0.1:8080/healthz; do
    if ! kill -0 "$pid" 2>/dev/null; then
        tail -20 "$log"
        echo "bench-make-run: make run exited before serving (log: $log)" >&2
        exit 1
    fi
    sleep 0.5
done
end=$(date +%s.%N)
echo "bench-make-run: $(git -C "$clone" rev-parse --short HEAD): first answer after $(echo "$end - $start" | bc) s ($(grep -o 'Build of product .* complete! ([0-9.]*s)' "$log" || echo 'build time not found'); log: $log)"
