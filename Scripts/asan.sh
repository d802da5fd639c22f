#!/usr/bin/env bash
# The whole test suite under the address sanitizer, in its own build folder (.build-asan).
# LeakSanitizer is off: it reports a 144-byte leak inside XCTest's own harness.
set -euo pipefail
cd "$(dirname "$0")/.."
./Scripts/install-deps.sh
swift build --build-tests --sanitize=address --scratch-path .build-asan
ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}" timeout 1500 \
    swift test --skip-build --sanitize=address --scratch-path .build-asan "$@"
