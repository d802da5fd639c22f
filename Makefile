# The two commands: `make run` (the main job) and `make test` (the test suite).
.PHONY: run test deps release lint format

deps:
	@./Scripts/install-deps.sh

release: deps
	swift build -c release

# The service (`strata serve`) on its embedded default: Fixtures/ as the source, its disk cache in
# ./.strata-cache/disk, listening on 127.0.0.1:8080; it prints URLs to try. Ctrl-C stops it.
run: release
	./.build/release/strata serve

test: deps
	swift test

# Formatting: `.swift-format` at the root; the toolchain ships swift-format.
lint:
	swift format lint --strict --recursive Sources Tests Package.swift

format:
	swift format format --in-place --recursive Sources Tests Package.swift
