# The two commands: `make run` (the main job) and `make test` (the test suite).
.PHONY: run test deps release lint format

deps:
	@./Scripts/install-deps.sh

release: deps
	swift build -c release

run: release
	./.build/release/strata decode Fixtures/jpeg/path-2560x1600.jpg --size 512x512 --out /tmp/strata-out.webp

test: deps
	swift test

# Formatting: `.swift-format` at the root; the toolchain ships swift-format.
lint:
	swift format lint --strict --recursive Sources Tests Package.swift

format:
	swift format format --in-place --recursive Sources Tests Package.swift
