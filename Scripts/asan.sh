#!/usr/bin/env bash
# The whole test suite under the address sanitizer, in its own build folder (.build-asan); CI
# runs it. Every fuzz harness runs over its corpus here too (StrataFuzzingTests). Built without
# the OTLP exporter trait (swift-otel is not Strata's code; TracingTests then check the refusal).
# LeakSanitizer is off: it reports a 144-byte leak inside XCTest's own harness.
#
# An AddressSanitizer report fails at once. A run that fails without one (under ASan the suite
# runs at a third of its speed, and on a 2-core machine its "eventually" checks can time out
# while blocking tests hold both of Swift's cooperative threads) is run once more, whole: a test
# that fails twice in a row fails the script.
#
#   Scripts/asan.sh [swift test options, e.g. --filter DiskTierTests]
#   Scripts/asan.sh --build-only      (CI builds it beside another step)
set -euo pipefail
cd "$(dirname "$0")/.."
./Scripts/install-deps.sh
# STRATA_ADDRESS_SANITIZER: every pixel buffer from malloc (PixelMemory maps none), so that
# ASan's redzones catch an overflow of one.
swift build --build-tests --sanitize=address --scratch-path .build-asan --disable-default-traits -Xswiftc -DSTRATA_ADDRESS_SANITIZER
[ "${1:-}" != "--build-only" ] || exit 0
export ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}"
for attempt in 1 2; do
    log=".build-asan/test-$attempt.log"
    set +e
    timeout 1500 swift test --skip-build --sanitize=address --scratch-path .build-asan --disable-default-traits \
        -Xswiftc -DSTRATA_ADDRESS_SANITIZER "$@" >"$log" 2>&1
    rc=$?
    set -e
    if grep -q "ERROR: AddressSanitizer" "$log"; then
        grep -A40 "ERROR: AddressSanitizer" "$log" | head -80
        echo "asan: AddressSanitizer report (whole log: $log)" >&2
        exit 1
    fi
    grep -E "^✘|^✔ Test run" "$log" | tail -20 || true
    if [ "$rc" -eq 0 ]; then
        echo "asan: attempt $attempt passed, no AddressSanitizer report"
        exit 0
    fi
    echo "asan: attempt $attempt failed (exit $rc) without an AddressSanitizer report (log: $log)" >&2
done
exit 1
