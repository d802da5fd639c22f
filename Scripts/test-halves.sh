#!/usr/bin/env bash
# The test suite as two complementary halves run at once, each one test at a time, by the test
# bundle itself (two `swift test` cannot run at once: SwiftPM locks the build folder). On the
# 2-core machine this takes about the time of a parallel run, and no test waits for a
# cooperative thread: in a parallel run, tests that hold Swift's two cooperative threads
# (decodes, blocking waits) starved others' tasks past their 180 s limits whenever the machine
# was busy (a fresh clone's CI run, a build beside it). The halves: StrataTests but two of its
# suites, and the rest (271 s and 231 s of tests on an idle machine, 2026-11-30, before
# WebPRowReaderTests, 18 s, moved to the second; the pixel targets optimized in the debug
# build, Package.swift).
#
#   Scripts/test-halves.sh BUNDLE LOG-PREFIX [swift-testing options, e.g. --skip X]
#   (sourced, it only defines test_halves_split and run_halves: Scripts/asan.sh runs its
#   halves with them)
test_halves_split='^StrataTests\.(?!TilePyramidsTests|WebPRowReaderTests)'

# run_halves RUNNER [options…]: `RUNNER first --filter SPLIT options…` and `RUNNER second --skip
# SPLIT options…` at once; returns 1 when either fails.
run_halves() {
    local runner=$1 first second rc=0
    shift
    "$runner" first --filter "$test_halves_split" "$@" &
    first=$!
    "$runner" second --skip "$test_halves_split" "$@" &
    second=$!
    wait "$first" || rc=1
    wait "$second" || rc=1
    return "$rc"
}
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0
set -euo pipefail
bundle=$1 prefix=$2
shift 2
export NO_COLOR=1
echo "tests: two halves at once, one test at a time each (logs: $prefix-first.log, $prefix-second.log)…"
# half NAME options…: one half, its output in its log.
half() {
    local name=$1
    shift
    "$bundle" --testing-library swift-testing --no-parallel "$@" >"$prefix-$name.log" 2>&1
}
rc=0
run_halves half "$@" || rc=1
cat "$prefix-first.log" "$prefix-second.log"
echo "tests: $(grep -h -E '^(✔|✘) Test run with' "$prefix-first.log" "$prefix-second.log" | tr '\n' ' ')"
exit "$rc"
