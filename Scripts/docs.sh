#!/usr/bin/env bash
# Builds the DocC catalogs of Strata and StrataService with warnings as errors (a broken symbol
# link, an undocumented parameter) and writes them as a static site to docs/site/<Target>/
# (git-ignored; open docs/site/Strata/documentation/strata/index.html through any web server).
#   Scripts/docs.sh            build and write the site
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p docs/site
for target in Strata StrataService; do
  lower=$(echo "$target" | tr '[:upper:]' '[:lower:]')
  echo "docs: $target…"
  swift package --disable-sandbox --allow-writing-to-directory docs/site \
    generate-documentation --target "$target" --warnings-as-errors --disable-indexing \
    --transform-for-static-hosting --hosting-base-path "$target" \
    --output-path "docs/site/$target" 2>&1 | grep -v "unhandled; explicitly declare them as resources" | tail -3
  [ -f "docs/site/$target/documentation/$lower/index.html" ] || { echo "docs: $target: no site written" >&2; exit 1; }
done
echo "docs: written to docs/site/"
