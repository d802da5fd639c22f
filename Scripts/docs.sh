#!/usr/bin/env bash
# Builds the DocC documentation with warnings as errors (a broken symbol link, an undocumented
# parameter) and writes it as a static site to docs/site/<name>/ (git-ignored; open
# docs/site/Strata/documentation/strata/index.html through any web server):
# - Strata: the library's four layers (StrataBase, StrataCodecs, StrataTiers, StrataEngine) and
#   the umbrella's catalog (the articles), as one combined archive: a link to a symbol of another
#   layer names its module (``/StrataBase/PixelImage``), and points only down the layers;
# - StrataService: the service's catalog.
#   Scripts/docs.sh            build and write the site
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p docs/site
generate() {
  local name=$1 lower
  shift
  lower=$(echo "$name" | tr '[:upper:]' '[:lower:]')
  echo "docs: $name…"
  local log=".build/docs-$name.log"
  mkdir -p .build
  # The whole log is kept; a failure prints each diagnostic with its source excerpt (DocC's
  # error comes before the summary lines, so the log's tail alone would hide it).
  if ! Scripts/swift.sh package --disable-sandbox --allow-writing-to-directory docs/site \
    generate-documentation "$@" --warnings-as-errors --disable-indexing \
    --transform-for-static-hosting --hosting-base-path "$name" \
    --output-path "docs/site/$name" >"$log" 2>&1; then
    grep -v "unhandled; explicitly declare them as resources" "$log" | grep -E -A8 "^(error|warning):" >&2 || tail -30 "$log" >&2
    echo "docs: $name failed (whole log: $log)" >&2
    exit 1
  fi
  tail -2 "$log"
  [ -f "docs/site/$name/documentation/$lower/index.html" ] || { echo "docs: $name: no site written" >&2; exit 1; }
}
generate Strata --target StrataBase --target StrataCodecs --target StrataTiers --target StrataEngine --target Strata \
  --enable-experimental-combined-documentation
generate StrataService --target StrataService
echo "docs: written to docs/site/"
