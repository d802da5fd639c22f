#!/usr/bin/env bash
# `swift` for the project's builds (the Makefile, Scripts/, CI): SwiftPM passes a dependency's
# enabled traits to its compiler in the order of a hashed set, and Swift seeds its hashing per
# process, so each `swift build` saw new command lines for swift-configuration, Hummingbird and
# swift-protobuf and compiled them again (with what links them: a minute of a release build that
# had nothing to do). Deterministic hashing in SwiftPM's own process keeps the order. Only the
# build tool gets it: the programs it builds and starts elsewhere do not inherit it.
#
#   Scripts/swift.sh build …   (any `swift` command line)
SWIFT_DETERMINISTIC_HASHING=1 exec swift "$@"
