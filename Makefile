# The two commands: `make run` (the main job) and `make test` (the test suite).
.PHONY: run test deps release lint format

deps:
	@./Scripts/install-deps.sh

release: deps
	swift build -c release

# The engine on a fixture, twice with one disk cache: the first answer comes from the source,
# the second (a new process, empty memory) from the disk tier.
run: release
	rm -rf /tmp/strata-run-cache
	./.build/release/strata get jpeg/path-2560x1600.jpg --size 512x512 --source Fixtures --cache /tmp/strata-run-cache --out /tmp/strata-out.webp
	./.build/release/strata get jpeg/path-2560x1600.jpg --size 512x512 --source Fixtures --cache /tmp/strata-run-cache

test: deps
	swift test

# Formatting: `.swift-format` at the root; the toolchain ships swift-format.
lint:
	swift format lint --strict --recursive Sources Tests Package.swift

format:
	swift format format --in-place --recursive Sources Tests Package.swift
