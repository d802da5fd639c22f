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
#   Scripts/tsan.sh [extra --filter regex]
set -euo pipefail
cd "$(dirname "$0")/.."
suites="${1:-BlockingPool|bandsOnSeveralThreads|LockTests|ReaderBias|MemoryCache|Coalescer|LaneQueue|ImageMemoryTier|OSThread|DiskTierTests|DiskWriteBehindPool|MemoryPressure|EngineStress|metricsStatsAndHealth|aFullUrgentQueueSheds|theServerRefusesMissing|concurrentWarmAnswersKeepTheirBytes|PreparedTargets|ParseOnceTests|theScanNeverRunsOnAnEventLoop|coldIIIFTilesAreShed|ResamplerFillingTests/failingFill|JPEGRowDecodingTests/renderer|RenderAheadTests|ProgressiveSplitTests|concurrentRendersAgree|theEngineAnswersRememberedKeys|EngineBlockingWork|RequestPathCounts|ColourProfileTests/concurrentUse|ColourProfileTests/transformCache|ColourRenderTests/jpegPaths}"
./Scripts/install-deps.sh
# Without the OTLP exporter trait: swift-otel is not Strata's code, and under -sanitize=thread
# swift-otel 1.6 fails Swift 6's region-based isolation check, which the suite's own code keeps.
swift build --build-tests --sanitize=thread --scratch-path .build-tsan --disable-default-traits
STRATA_STRESS_SECONDS="${STRATA_STRESS_SECONDS:-20}" timeout 1200 \
    swift test --skip-build --sanitize=thread --scratch-path .build-tsan --disable-default-traits --filter "$suites"
