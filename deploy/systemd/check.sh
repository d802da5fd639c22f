#!/usr/bin/env bash
# Checks deploy/systemd: the unit passes `systemd-analyze verify` (with ExecStart pointed at a
# built strata), its `systemd-analyze security` exposure stays at most 2.0 ("OK"), and the
# example configuration is valid for that strata. STRATA=path (default .build/debug/strata).
set -euo pipefail
cd "$(dirname "$0")/../.."
STRATA=${STRATA:-$PWD/.build/debug/strata}
if ! command -v systemd-analyze >/dev/null; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq systemd >/dev/null
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
sed "s|/usr/local/bin/strata|$STRATA|" deploy/systemd/strata.service > "$scratch/strata.service"
out=$(systemd-analyze verify "$scratch/strata.service" 2>&1 || true)
if [ -n "$out" ]; then echo "systemd: verify: $out" >&2; exit 1; fi
exposure=$(systemd-analyze security --offline=true "$scratch/strata.service" 2>/dev/null | sed -n 's/.*exposure level for strata.service: \([0-9.]*\).*/\1/p')
echo "systemd: verify clean; security exposure $exposure"
awk -v e="$exposure" 'BEGIN { exit !(e != "" && e <= 2.0) }' || { echo "systemd: exposure $exposure is above 2.0" >&2; exit 1; }
"$STRATA" config --config deploy/systemd/strata.yaml >/dev/null
echo "systemd: strata.yaml is a valid configuration"
