#!/usr/bin/env bash
# Builds the strata container image with podman (Debian's `podman`) from the repository:
#   deploy/container/build.sh [TAG]            (default localhost/strata:latest)
# BUILDER_IMAGE / RUNTIME_IMAGE override the base images (e.g. a local mirror).
set -euo pipefail
cd "$(dirname "$0")/../.."
tag=${1:-localhost/strata:latest}
command -v podman >/dev/null || { echo "needs podman (apt-get install podman)" >&2; exit 2; }
args=()
[ -n "${BUILDER_IMAGE:-}" ] && args+=(--build-arg "BUILDER_IMAGE=$BUILDER_IMAGE")
[ -n "${RUNTIME_IMAGE:-}" ] && args+=(--build-arg "RUNTIME_IMAGE=$RUNTIME_IMAGE")
podman build -f deploy/container/Containerfile -t "$tag" "${args[@]}" .
echo "built $tag: podman run -p 8080:8080 -v /srv/images:/images:ro -v strata-data:/data $tag"
