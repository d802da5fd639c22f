#!/usr/bin/env bash
# A 1-gigapixel original's tile pyramid built by `strata serve` from an S3 bucket (moto,
# signatures checked) against the same from a directory: peak RSS (VmHWM) and build time.
# The original is Scripts/bench-iiif-big.sh's mosaic (40960×25600, baseline JPEG, Q85).
#
#   Scripts/bench-s3-gigapixel.sh [--json]
#   STRATA=path (default .build/release/strata); BIG_DIR=dir keeps the mosaic between runs.
# Servers listen on 127.0.0.1 and are stopped by pid on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
strata="${STRATA:-$root/.build/release/strata}"
json=0
[ "${1:-}" = "--json" ] && json=1
log() { echo "[bench-s3-gigapixel] $*" >&2; }
. Scripts/bench-iiif/common.sh
peak_kb() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status" 2>/dev/null || echo 0; }
if [ -n "${BIG_DIR:-}" ]; then work=$BIG_DIR; mkdir -p "$work"; owned=0; else work=$(mktemp -d); owned=1; fi
chmod 755 "$work"
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]+"${pids[@]}"}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]+"${pids[@]}"}"; do wait "$pid" 2>/dev/null || true; done
    if [ "$owned" -eq 1 ]; then rm -rf "$work"; else rm -rf "$work/pyramids-"*; fi
}
trap cleanup EXIT
export VIPS_WARNING=0
log "the 1-gigapixel mosaic"
mosaic mosaic-1gp.jpg 16 16
bytes=$(stat -c %s "$work/source/mosaic-1gp.jpg")
log "mosaic-1gp.jpg: $bytes bytes"

read -r moto_server moto_python < <(Scripts/moto.sh)
moto_port=$(free_port)
INITIAL_NO_AUTH_ACTION_COUNT=3 "$moto_server" -H 127.0.0.1 -p "$moto_port" >"$work/moto.log" 2>&1 &
pids+=($!)
# Wait for the port, not with a request: each unsigned request spends one of the three actions
# setup.py needs.
for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$moto_port") 2>/dev/null && break; sleep 0.1; done
key=$("$moto_python" Tests/moto/setup.py "http://127.0.0.1:$moto_port" originals)
export AWS_ACCESS_KEY_ID=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["accessKeyID"])' "$key")
export AWS_SECRET_ACCESS_KEY=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["secretAccessKey"])' "$key")
"$moto_python" - "http://127.0.0.1:$moto_port" "$work/source/mosaic-1gp.jpg" <<'PY'
import boto3, os, sys
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1",
                  aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"], aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])
s3.upload_file(sys.argv[2], "originals", "mosaic-1gp.jpg")
PY

# One build: a fresh `strata serve` with an empty pyramid directory; info.json and one tile start
# the build; /stats says when it finished; VmHWM is read then.
build() {  # LABEL SOURCE-FLAGS…
    local label=$1; shift
    local port; port=$(free_port)
    rm -rf "$work/pyramids-$label"
    "$strata" serve --host 127.0.0.1 --port "$port" --iiif-pyramid-path "$work/pyramids-$label" --iiif-tile-size 256 \
        --iiif-max-source-pixels 4000000000 --source-s3-max-body-size 1GiB --memory-pressure-enabled false "$@" \
        >"$work/serve-$label.log" 2>&1 &
    local pid=$!
    pids+=($pid)
    wait_http "http://127.0.0.1:$port/healthz" 60
    local start; start=$(now_ms)
    curl -sf "http://127.0.0.1:$port/iiif/3/mosaic-1gp.jpg/info.json" >/dev/null
    curl -sf -o /dev/null "http://127.0.0.1:$port/iiif/3/mosaic-1gp.jpg/full/160,/0/default.jpg"
    while :; do
        finished=$(curl -sf "http://127.0.0.1:$port/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pyramids"]["buildsFinished"])')
        [ "$finished" -ge 1 ] && break
        sleep 0.2
    done
    local ms=$(( $(now_ms) - start )) kb; kb=$(peak_kb "$pid")
    kill "$pid"; wait "$pid" 2>/dev/null || true
    log "$label: pyramid built in $ms ms, peak RSS $kb kB"
    echo "$label $ms $kb"
}
dir_result=$(build directory --source-directory "$work/source")
s3_result=$(build s3 --source-s3-bucket originals --source-s3-endpoint "http://127.0.0.1:$moto_port")
if [ "$json" -eq 1 ]; then
    python3 - "$bytes" "$dir_result" "$s3_result" <<'PY'
import json, sys
out = {"originalBytes": int(sys.argv[1])}
for line in sys.argv[2:]:
    label, ms, kb = line.split()
    out[label] = {"buildMs": int(ms), "peakRssKb": int(kb)}
print(json.dumps(out, indent=2, sort_keys=True))
PY
else
    echo "1-GP original, $bytes bytes"; echo "$dir_result"; echo "$s3_result"
fi
