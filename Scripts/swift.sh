#!/usr/bin/env bash
# `swift` for the project's builds (the Makefile, Scripts/, CI): SwiftPM passes a dependency's
# enabled traits to its compiler in the order of a hashed set, and Swift seeds its hashing per
# process, so each `swift build` saw new command lines for swift-configuration, Hummingbird and
# swift-protobuf and compiled them again (with what links them: a minute of a release build that
# had nothing to do). Deterministic hashing in SwiftPM's own process keeps the order.
#
# It also sets SWIFTPM_STRATA_OPTIMIZED_DEBUG=1 (unless set): the pixel targets optimized in
# debug builds too (Package.swift, `optimizedInDebug`). A plain `swift build` compiles them
# unoptimized, and switching between the two recompiles them. `swift test` hands both variables
# on to the tests and the processes they start; neither begins with STRATA_ (`strata` refuses an
# unknown STRATA_ variable as a configuration key).
#
# The variables that differ between two shells of one run (`SHLVL`, `OLDPWD`, `_`) and those
# `make` adds (`MAKEFLAGS`, `MAKELEVEL`, `MFLAGS`) are left out of swift's environment: SwiftPM
# records its whole environment with each package plugin it compiles
# (.build/plugins/cache/*-state.json) and compiles the dependencies' five plugins again when it
# differs, 35 s on every build of an unchanged tree run from another shell or from `make`.
#
#   Scripts/swift.sh build …   (any `swift` command line)
SWIFTPM_STRATA_OPTIMIZED_DEBUG=${SWIFTPM_STRATA_OPTIMIZED_DEBUG:-1} SWIFT_DETERMINISTIC_HASHING=1 \
    exec env -u SHLVL -u OLDPWD -u _ -u MAKEFLAGS -u MAKELEVEL -u MFLAGS -u MAKE_TERMOUT -u MAKE_TERMERR swift "$@"
