#!/usr/bin/env bash
# `make test`, the README's test command: the whole suite, built once and run once.
#
# - The tests run in the optimized address-sanitizer build (Scripts/asan.sh, .build-asan): the
#   optimizer is part of what is checked, `assert`s are kept (`-assert-config Debug`, as in a
#   debug build), and the build refuses an import of a target that is not a declared dependency
#   (the layers: docs/Architecture.md). Every fuzz harness runs over its corpus among them
#   (StrataFuzzingTests).
# - Beside that build, the release `strata` with every default trait (`make release`'s,
#   .build/release/strata) is built, the two at once (each build's single-threaded steps leave
#   the other a core). The tests that need an unsanitized child or the OTLP exporter run it
#   (RELEASE_STRATA_EXECUTABLE): PyramidProcessTests' peak memory, TracingTests' export. CI's
#   later steps (the validator, the clusters, the soak) use it too.
# - The suite runs as two halves at once, one test at a time each (Scripts/test-halves.sh);
#   PyramidProcessTests run after the rest, alone: they make originals of up to 200 megapixels
#   (800 MB while one is encoded) and run builds in child processes, which would move the
#   others' measures of this process's peak memory and their timeouts.
#
# The whole output goes to .build/test.log, each half's to .build-asan/*.log; a failing test's
# issues are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
./Scripts/install-deps.sh
mkdir -p .build

main() {
    local started=$SECONDS release_build
    # Resolved one after the other: the two builds share SwiftPM's caches and Package.resolved.
    swift package resolve >/dev/null
    swift package --scratch-path .build-asan resolve >/dev/null
    echo "test: the release strata builds beside the sanitizer's build (.build/test-release-build.log)"
    swift build -c release --product strata >.build/test-release-build.log 2>&1 &
    release_build=$!
    trap 'kill "$release_build" 2>/dev/null || true' EXIT
    Scripts/asan.sh --build-only
    if ! wait "$release_build"; then
        tail -40 .build/test-release-build.log
        echo "test: the release strata failed to build (.build/test-release-build.log)" >&2
        return 1
    fi
    trap - EXIT
    echo "test: built in $((SECONDS - started)) s"

    RELEASE_STRATA_EXECUTABLE="$(swift build -c release --show-bin-path)/strata"
    export RELEASE_STRATA_EXECUTABLE
    Scripts/asan.sh --no-build --halves --skip PyramidProcessTests
    Scripts/asan.sh --no-build --filter PyramidProcessTests
    echo "test: passed in $((SECONDS - started)) s"
}
main 2>&1 | tee .build/test.log
exit "${PIPESTATUS[0]}"
