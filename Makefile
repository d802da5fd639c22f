# The two commands: `make run` (the main job) and `make test` (the test suite).
SHELL := /bin/bash
.PHONY: run test deps release lint format

deps:
	@./Scripts/install-deps.sh

# The release `strata` with every default trait (the OTLP span exporter among them).
release: deps
	swift build -c release --product strata

# The service (`strata serve`) on its embedded default: Fixtures/ as the source, its disk cache in
# ./.strata-cache/disk, listening on 127.0.0.1:8080; it prints URLs to try. Ctrl-C stops it.
# Built without the OTLP span exporter (the OTLPExporter trait, the costliest dependency to
# compile) to reach the first URL sooner: `make release` builds the whole `strata`.
run: deps
	swift build -c release --product strata --disable-default-traits
	./.build/release/strata serve

# The whole suite, built once and run once (Scripts/test.sh): optimized under the address
# sanitizer with `assert`s kept and the build's import check (the layers:
# docs/Architecture.md), beside the release `strata` that the tests needing an unsanitized child
# or the OTLP exporter run. Two halves at once, one test at a time each; PyramidProcessTests
# after the rest, alone. The whole log goes to .build/test.log; a failing test's issues are
# printed at the end.
test: deps
	@Scripts/test.sh

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
