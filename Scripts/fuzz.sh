#!/usr/bin/env bash
# Builds `strata-fuzz` (Fuzz/Sources/strata-fuzz: every harness of Tests/StrataFuzzing, chosen by
# $STRATA_FUZZ_HARNESS) with -sanitize=fuzzer,address and runs each harness under libFuzzer for
# SECONDS (default 30), printing the executions per harness; exits non-zero when any harness
# finds a crash (the input is kept under .build-fuzz/crashes/: add it to Fuzz/Corpus/<harness>/
# once fixed, as a regression seed — `StrataFuzzingTests` then runs it in every `make test` and
# ASan run; `strata-fuzz HARNESS FILE` replays one in an ordinary build).
#
# These long explorations are run and reported per issue; CI runs every corpus and seed as
# tests (CorpusTests) instead.
#
#   Scripts/fuzz.sh [SECONDS] [HARNESS...]     e.g. Scripts/fuzz.sh 600 FuzzDiskFile
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(FuzzDecode FuzzDiskFile FuzzImageTable FuzzSizing FuzzAVIF FuzzHEIF FuzzGIF FuzzTIFF FuzzJP2 FuzzJXL
    FuzzImageParameters FuzzIIIF FuzzURLSigner FuzzConfigFile FuzzWarmPath FuzzThumbor)
scratch=.build-fuzz

./Scripts/install-deps.sh >/dev/null
echo "fuzz: building strata-fuzz (release, -sanitize=fuzzer,address)…"
# -DSTRATA_LIBFUZZER leaves out strata-fuzz's own main: libFuzzer's runs the harness.
Scripts/swift.sh build --product strata-fuzz --scratch-path "$scratch" -c release -Xswiftc -DSTRATA_LIBFUZZER -Xswiftc -DSTRATA_ADDRESS_SANITIZER \
    -Xswiftc -sanitize=fuzzer,address --sanitize=fuzzer --sanitize=address 2>&1 | grep -v "Cannot export local symbol" | tail -3
bin="$scratch/release"

# Table files go to a tmpfs when there is one (the harness writes two files per input).
tables_dir=$(mktemp -d "$( [ -d /dev/shm ] && echo /dev/shm || echo /tmp )/strata-fuzz-XXXXXX")
trap 'rm -rf "$tables_dir"' EXIT
export STRATA_FUZZ_SCRATCH="$tables_dir"
# Leaks are not what these harnesses look for (the Swift runtime keeps caches for the process).
export ASAN_OPTIONS="detect_leaks=0:${ASAN_OPTIONS:-}"
# libFuzzer reports traps itself; the Swift runtime's backtracer would get in its way.
export SWIFT_BACKTRACE=enable=no

failed=()
summary=()
for h in "${harnesses[@]}"; do
    corpus="$scratch/corpus/$h"
    mkdir -p "$corpus" "$scratch/crashes"
    seeds=()
    # Regression inputs of crashes fixed, and a few seeds.
    [ -d "Fuzz/Corpus/$h" ] && seeds+=("Fuzz/Corpus/$h")
    if [ "$h" = FuzzDecode ]; then
        # Every fixture under 256 KiB (the broken ones and the bombs included) seeds the decoder.
        mkdir -p "$scratch/seeds/$h"
        find Fixtures/jpeg Fixtures/webp Fixtures/png Fixtures/broken -type f -size -256k -exec cp {} "$scratch/seeds/$h/" \;
        seeds+=("$scratch/seeds/$h")
    fi
    log="$scratch/$h.log"
    start=$(date +%s)
    set +e
    STRATA_FUZZ_HARNESS="$h" "$bin/strata-fuzz" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 -malloc_limit_mb=1024 -print_final_stats=1 \
        -artifact_prefix="$scratch/crashes/$h-" "$corpus" "${seeds[@]}" >"$log" 2>&1
    rc=$?
    set -e
    wall=$(( $(date +%s) - start ))
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [ $rc -ne 0 ]; then
        failed+=("$h")
        echo "fuzz: $h FAILED (exit $rc) after ${runs:-?} executions, ${wall}s:"
        grep -E "ERROR|Fatal error|Precondition|deadly|Test unit written" "$log" | head -20 || tail -30 "$log"
    fi
    summary+=("$(printf '%-16s %12s executions  %5ss  %s' "$h" "${runs:-?}" "$wall" "$([ $rc -eq 0 ] && echo '0 crashes' || echo CRASH)")")
done
echo "fuzz: ${seconds}s per harness"
printf '  %s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: crashes in ${failed[*]}; inputs in $scratch/crashes/" >&2
    exit 1
fi
