#!/usr/bin/env bash
# Builds Examples/Embedding — an executable that takes only the `Strata` product — runs it over
# Fixtures/ (it must answer from the source, then from memory), and fails when its build
# compiled a module that `Strata` must not need: NIO, AsyncHTTPClient, Hummingbird,
# swift-configuration, Yams, ServiceLifecycle, or Strata's own HTTP origin, configuration or
# service targets. SwiftPM still resolves (and clones) every package the root manifest names;
# what matters for an embedder's build time is what is compiled, which is what this checks.
#
#   Scripts/embedding-check.sh [-c release]
set -euo pipefail
cd "$(dirname "$0")/../Examples/Embedding"
configuration=debug
# As an embedder builds it: without this repository's optimized pixel targets in debug builds,
# which Scripts/swift.sh turns on for the project's own builds (Package.swift, optimizedInDebug).
export SWIFTPM_STRATA_OPTIMIZED_DEBUG=0
[ "${1:-}" = "-c" ] && configuration="${2:-debug}"

echo "embedding: building Examples/Embedding ($configuration)…"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! ../../Scripts/swift.sh build -c "$configuration" >"$log" 2>&1; then
    grep -v "unhandled\|CMakeLists.txt" "$log" >&2
    echo "embedding: FAIL: the build failed" >&2
    exit 1
fi
tail -1 "$log"
bin=$(../../Scripts/swift.sh build -c "$configuration" --show-bin-path)

# SwiftPM plans every target of the graph (each gets a <target>.build directory), but only the
# targets compiled hold object files there.
built=$(for dir in "$bin"/*.build; do
    if [ -n "$(find "$dir" -name '*.o' -print -quit)" ]; then basename "$dir" .build; fi
done | sort)
echo "embedding: targets built: $(echo "$built" | tr '\n' ' ')"
forbidden='^(_?C?NIO.*|C?AsyncHTTPClient|Hummingbird.*|Configuration.*|Yams|CYaml|ServiceLifecycle.*|Prometheus|StrataHTTPOrigin|StrataConfiguration|StrataService|strata)$'
if offending=$(echo "$built" | grep -E "$forbidden"); then
    echo "embedding: FAIL: the Strata product pulled in: $(echo "$offending" | tr '\n' ' ')" >&2
    exit 1
fi
echo "$built" | grep -qx Strata || { echo "embedding: FAIL: no Strata target was built" >&2; exit 1; }

echo "embedding: packages resolved (cloned to read their manifests; compiled only as listed above):"
echo "  $(ls .build/checkouts | tr '\n' ' ')"

echo "embedding: running it over Fixtures/…"
"$bin/Embedding"
echo "embedding: OK (no NIO, AsyncHTTPClient, Hummingbird or swift-configuration module built)"
