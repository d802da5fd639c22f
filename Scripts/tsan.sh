#!/usr/bin/env bash
# Thread sanitizer over the suites that exercise threads (locks, pools, the resampler's bands,
# coalescing, the memory tier and its pressure monitor, the disk tier and its write-behind on a
# pool, the engine stress test and render-ahead, the HTTP service on small images, and colour
# transforms shared by threads and converted in the resampler's bands and chunks), in its
# own build folder. The decode-heavy engine suites are left out: under TSan their Swift
# resampling runs ~20x slower and passes their time limits. Of the overlapped decode and resample,
# the failing fill and the renderer's tests run here; the many-geometries test (minutes under TSan,
# none of it new to the thread sanitizer) runs in `make test`.
# TSan exits non-zero (66) when it reports a race.
#
# The sanitizer's flags go on Strata's own targets only (`SANITIZER=thread`, Package.swift): the
# dependencies compile as in `make test`'s debug build (same configuration, same traits), so in
# that build's folder (TSAN_SCRATCH=.build: CI) this build reuses them and compiles only Strata
# and the tests; the next `make test` there compiles those again. Alone, it builds in .build-tsan.
# Dependency code is not instrumented: TSan still sees the locks it takes (NIO's, the runtime's
# task queues are annotated), and a race in Strata's code on memory both sides touch is reported.
#
#   Scripts/tsan.sh [extra --filter regex]
#   Scripts/tsan.sh --build-only      (CI builds it beside another step)
#   Scripts/tsan.sh --no-build …      (runs what is built, e.g. after --build-only)
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0 build=1
if [ "${1:-}" = "--build-only" ]; then build_only=1; shift; fi
if [ "${1:-}" = "--no-build" ]; then build=0; shift; fi
suites="${1:-BlockingPool|bandsOnSeveralThreads|LockTests|ReaderBias|MemoryCache|Coalescer|LaneQueue|ImageMemoryTier|OSThread|DiskTierTests|DiskWriteBehindPool|MemoryPressure|EngineStress|metricsStatsAndHealth|aFullUrgentQueueSheds|theServerRefusesMissing|concurrentWarmAnswersKeepTheirBytes|PreparedTargets|ParseOnceTests|theScanNeverRunsOnAnEventLoop|coldIIIFTilesAreShed|ResamplerFillingTests/failingFill|JPEGRowDecodingTests/renderer|RenderAheadTests|ProgressiveSplitTests|concurrentRendersAgree|theEngineAnswersRememberedKeys|EngineBlockingWork|RequestPathCounts|ColourProfileTests/concurrentUse|ColourProfileTests/transformCache|ColourRenderTests/jpegPaths|MemoryBudget|PixelMemory|EngineMemoryLimit|RenderOperationsTests|OperationsAgainstLibvipsTests/sharpen}"
./Scripts/install-deps.sh
scratch="${TSAN_SCRATCH:-.build-tsan}"
export SANITIZER=thread
[ "$build" -eq 0 ] || Scripts/swift.sh build --build-tests --scratch-path "$scratch" --explicit-target-dependency-import-check error
[ "$build_only" -eq 0 ] || exit 0
STRATA_STRESS_SECONDS="${STRATA_STRESS_SECONDS:-20}" timeout 1200 \
    Scripts/swift.sh test --skip-build --scratch-path "$scratch" --filter "$suites"
