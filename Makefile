# The two commands: `make run` (the main job) and `make test` (the test suite).
SHELL := /bin/bash
.PHONY: run test deps release lint format

# Builds go through Scripts/swift.sh: a dependency's traits in a stable order, so an unchanged
# tree is not compiled again.
SWIFT := Scripts/swift.sh

deps:
	@./Scripts/install-deps.sh

# The release `strata` with every default trait (the OTLP span exporter among them).
release: deps
	$(SWIFT) build -c release --product strata

# The service (`strata serve`) on its embedded default: Fixtures/ as the source, its disk cache in
# ./.strata-cache/disk, listening on 127.0.0.1:8080; it prints URLs to try. Ctrl-C stops it.
# Built without the OTLP span exporter and the remote sources (the OTLPExporter and RemoteSources
# traits: swift-otel, AsyncHTTPClient with swift-nio-ssl and swift-nio-http2, the costliest
# dependencies to compile) to reach the first URL sooner; there `tracing.enabled`,
# `source.http.baseURL`, `source.s3.bucket` and `shared.s3.bucket` are refused naming the key.
# `make release` builds the whole `strata`.
run: deps
	$(SWIFT) build -c release --product strata --disable-default-traits
	./.build/release/strata serve

# The build refuses an import of a target that is not a declared dependency (the layers:
# docs/Architecture.md). The suite runs as two halves at once, one test at a time each
# (Scripts/test-halves.sh: a parallel run starved tests on a busy 2-core machine). The whole log
# goes to .build/test.log too; on a failure the failing tests and their issues are
# printed again at the end, where a CI log's tail shows them. PyramidProcessTests run after the
# rest, alone: they make originals of up to 200 megapixels (800 MB while one is encoded) and
# run builds in child processes, which would move the others' measures of this process's peak
# memory and their timeouts.
test: deps
	@mkdir -p .build
	@set -o pipefail; { $(SWIFT) build --build-tests --explicit-target-dependency-import-check error \
	  && Scripts/test-halves.sh "$$($(SWIFT) build --show-bin-path)/StrataPackageTests.xctest" .build/test --skip PyramidProcessTests \
	  && $(SWIFT) test --skip-build --filter PyramidProcessTests; } 2>&1 \
	  | tee .build/test.log || { \
	  echo "== failed tests and their issues (whole log: .build/test.log) =="; \
	  grep -E '✘|recorded an issue|error:|Fatal error|fatal error' .build/test.log \
	    | grep -v -E '^✘ Test run with' | head -80; \
	  exit 1; }

# Formatting: `.swift-format` at the root; the toolchain ships swift-format;
# and the layers (Scripts/check-layers.py: every import points down; its self-test shows an
# upward one refused).
lint:
	swift format lint --strict --recursive Sources Tests Fuzz/Sources Package.swift Examples/Embedding/Sources Examples/Embedding/Package.swift \
	  Benchmarks/Sources Benchmarks/Benchmarks Benchmarks/Package.swift
	python3 Scripts/check-layers.py
	python3 Scripts/check-layers.py --self-test

format:
	swift format format --in-place --recursive Sources Tests Fuzz/Sources Package.swift Examples/Embedding/Sources Examples/Embedding/Package.swift \
	  Benchmarks/Sources Benchmarks/Benchmarks Benchmarks/Package.swift
