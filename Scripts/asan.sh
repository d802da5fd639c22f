#!/usr/bin/env bash
# The whole test suite under the address sanitizer, in its own build folder (.build-asan, or
# ASAN_SCRATCH); CI runs it. Every fuzz harness runs over its corpus here too (StrataFuzzingTests).
# Optimized (`-c release`), as the shipped binary and the libFuzzer builds are: the optimizer is
# part of what is checked, and the suite runs about 4× faster than a debug ASan build (measured:
# halves of 177 s and 195 s against about 930 s). `assert`s are kept (`-assert-config Debug`), as
# in `make test`'s debug build, and so is its refusal of an import of a target that is not a
# declared dependency (the layers). Built without the OTLP exporter trait (swift-otel is not
# Strata's code; TracingTests then check the refusal), with the remote sources
# (`--traits RemoteSources`: the HTTP origin's and S3's tests run here too).
#
# The sanitizer's flags go on Strata's own targets only (`SANITIZER=address`, Package.swift):
# the dependencies compile as in a release `strata`, so in a folder where one was built, this
# build reuses them and compiles only Strata, the tests and what the remote sources add (CI
# builds the soak's `strata` there first: `make run`'s build, without either trait). The
# tests' own code is compiled unoptimized.
# LeakSanitizer is off: it reports a 144-byte leak inside XCTest's own harness.
#
# An AddressSanitizer report fails at once. A run that fails without one (under ASan the suite
# runs slower, and on a 2-core machine its "eventually" checks can time out
# while blocking tests hold both of Swift's cooperative threads) is run once more, whole: a test
# that fails twice in a row fails the script. Tests run one at a time (in parallel at ASan's
# speed, tests that hold the cooperative threads starve the others' waits past 180 s).
#
#   Scripts/asan.sh [swift-testing options, e.g. --filter DiskTierTests]
#   Scripts/asan.sh --halves [options]  (two halves of the suite at once)
#   Scripts/asan.sh --build-only        (builds, runs nothing)
#   Scripts/asan.sh --no-build …        (runs what is built, e.g. after --build-only)
set -euo pipefail
cd "$(dirname "$0")/.."
build=1
if [ "${1:-}" = "--no-build" ]; then build=0; shift; fi
scratch="${ASAN_SCRATCH:-.build-asan}"
if [ "$build" -eq 1 ]; then
    ./Scripts/install-deps.sh
    SANITIZER=address Scripts/swift.sh build -c release --build-tests --scratch-path "$scratch" --traits RemoteSources \
        --explicit-target-dependency-import-check error
fi
[ "${1:-}" != "--build-only" ] || exit 0
export ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}"
export NO_COLOR=1

# run_tests LOG ARGS…: the suite (or the part ARGS select) one test at a time, run by the test
# bundle itself: two runs at once cannot both go through `swift test`, which locks the build
# folder. Exit: 0 passed, 1 failed, 2 an AddressSanitizer report.
run_tests() {
    local log=$1 rc
    shift
    set +e
    timeout 1500 "$scratch/release/StrataPackageTests.xctest" --testing-library swift-testing --no-parallel "$@" >"$log" 2>&1
    rc=$?
    set -e
    if grep -q "ERROR: AddressSanitizer" "$log"; then
        grep -A40 "ERROR: AddressSanitizer" "$log" | head -80
        echo "asan: AddressSanitizer report (whole log: $log)" >&2
        return 2
    fi
    grep -E "^✘|^✔ Test run" "$log" | tail -20 || true
    if [ "$rc" -ne 0 ]; then
        # The failing tests' issues (the log's tail would show only the summary).
        grep -E '✘|recorded an issue|Fatal error|fatal error' "$log" | grep -v -E '^✘ Test run with' | head -60 || true
        echo "asan: $log failed (exit $rc) without an AddressSanitizer report" >&2
        return 1
    fi
}

# run_twice NAME ARGS…: a run that fails without a report is run once more, whole.
run_twice() {
    local name=$1 rc
    shift
    for attempt in 1 2; do
        rc=0
        run_tests "$scratch/$name-$attempt.log" "$@" || rc=$?
        [ "$rc" -ne 0 ] || { echo "asan: $name: attempt $attempt passed, no AddressSanitizer report"; return 0; }
        [ "$rc" -ne 2 ] || return 2
    done
    return 1
}

if [ "${1:-}" = "--halves" ]; then
    # Two halves at once, each one test at a time (CI): about half the time on two cores, and
    # no test waits behind another for a cooperative thread, as in a parallel run at ASan's
    # speed. The halves and their launch are make test's (Scripts/test-halves.sh).
    shift
    source Scripts/test-halves.sh
    # Under ASan the codec suites weigh more than in the debug build: the two JPEG 2000 suites
    # (69 s) go to the second half too (halves of 524 s and 361 s before, 2026-11-30), and
    # ImageTableProcessTests (29 s; halves of 520 s and 467 s before, 2026-12-01).
    test_halves_split='^StrataTests\.(?!TilePyramidsTests|WebPRowReaderTests|JP2DecodingTests|JP2PyramidLevelsTests|ImageTableProcessTests)'
    rc=0
    run_halves run_twice "$@" || rc=1
    exit "$rc"
fi
run_twice test "$@"
