#!/usr/bin/env bash
# Warm-path throughput with tracing off and on, beside a baseline binary, in one run.
#
#   BASELINE=/path/to/main/strata Scripts/bench-tracing.sh
#
# Four variants, each a fresh `strata serve` over the load test's six fixture photos (256 px
# JPEG thumbnails, warmed up with two untimed passes, so every timed request is a warm-path
# answer), measured with wrk (2 threads, 32 connections, BENCH_SECONDS each, default 10,
# Scripts/loadtest/rotate.lua) and interleaved round by round (BENCH_ROUNDS, default 3):
#   baseline   $BASELINE (e.g. main's release build), its defaults
#   off        $STRATA (default .build/release/strata), tracing off (the default)
#   on_1       $STRATA, tracing.enabled, samplingRatio 1 (every request a span, exported)
#   on_0.01    $STRATA, tracing.enabled, samplingRatio 0.01
# With tracing on, spans go over OTLP/HTTP (protobuf) to an nginx on 127.0.0.1 that answers
# every POST with 200 (a sink). Prints each run's requests/s, then per variant the median and
# its ratio to the baseline's median. Scratch goes to a temporary folder; every process it
# starts is stopped by its id on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STRATA="${STRATA:-$ROOT/.build/release/strata}"
BASELINE="${BASELINE:?set BASELINE to the baseline strata binary}"
SECONDS_EACH="${BENCH_SECONDS:-10}"
ROUNDS="${BENCH_ROUNDS:-3}"
IMAGES=(
  jpeg/path-2560x1600.jpg
  jpeg/fallenleaf-2048x1280-420.jpg
  jpeg/eveningglow-1024x640-progressive.jpg
  jpeg/coldripple-1024x640-orientation6.jpg
  jpeg/kite-800x500-gray.jpg
  webp/path-2560x1600.webp
)

log() { printf '[bench-tracing] %s\n' "$*" >&2; }
SCRATCH=$(mktemp -d /tmp/strata-bench-tracing.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$SCRATCH"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

mkdir -p "$SCRATCH/src" "$SCRATCH/nginx/tmp"
for image in "${IMAGES[@]}"; do
  mkdir -p "$SCRATCH/src/$(dirname "$image")"
  cp "$ROOT/Fixtures/$image" "$SCRATCH/src/$image"
  echo "/images/$image?w=256&h=256&format=jpeg" >>"$SCRATCH/urls.txt"
done

# The OTLP sink.
SINK_PORT=$(free_port)
cat >"$SCRATCH/nginx/nginx.conf" <<EOF
worker_processes 1;
pid $SCRATCH/nginx/nginx.pid;
error_log $SCRATCH/nginx/error.log;
daemon off;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $SCRATCH/nginx/tmp/body;
  proxy_temp_path $SCRATCH/nginx/tmp/proxy;
  fastcgi_temp_path $SCRATCH/nginx/tmp/fastcgi;
  uwsgi_temp_path $SCRATCH/nginx/tmp/uwsgi;
  scgi_temp_path $SCRATCH/nginx/tmp/scgi;
  client_max_body_size 64m;
  server {
    listen 127.0.0.1:$SINK_PORT;
    location / { default_type application/x-protobuf; return 200 ''; }
  }
}
EOF
nginx -p "$SCRATCH/nginx" -c "$SCRATCH/nginx/nginx.conf" -e "$SCRATCH/nginx/error.log" &
PIDS+=($!)

# run VARIANT BINARY FLAGS...: one server, warm-up, one wrk run; prints requests/s.
run() {
  local name=$1 binary=$2
  shift 2
  local port pid out rps
  port=$(free_port)
  rm -rf "$SCRATCH/disk"
  "$binary" serve --host 127.0.0.1 --port "$port" --source-directory "$SCRATCH/src" --disk-path "$SCRATCH/disk" \
    --memory-pressure-enabled false "$@" >"$SCRATCH/$name.out" 2>"$SCRATCH/$name.err" &
  pid=$!
  PIDS+=("$pid")
  for _ in $(seq 1 300); do
    curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null && break
    sleep 0.1
  done
  for _ in 1 2; do
    while IFS= read -r path; do curl -fsS -o /dev/null "http://127.0.0.1:$port$path"; done <"$SCRATCH/urls.txt"
  done
  out=$(wrk -t2 -c32 -d"${SECONDS_EACH}s" -s "$ROOT/Scripts/loadtest/rotate.lua" "http://127.0.0.1:$port" -- "$SCRATCH/urls.txt" 2)
  warm=$(curl -fsS "http://127.0.0.1:$port/metrics" | awk '/^strata_http_warm_total/ { s += $2 } END { print s + 0 }')
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  rps=$(grep '^LOADTEST_RESULT ' <<<"$out" | sed 's/^LOADTEST_RESULT //' | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["rps"]))')
  problems=$(grep -ciE 'error|fail' "$SCRATCH/$name.err" || true)
  log "$name: $rps requests/s (warm-path answers: $warm; log lines with error/fail: $problems; load $(cut -d' ' -f1 /proc/loadavg))"
  echo "$name $rps" >>"$SCRATCH/results.txt"
}

ENDPOINT="http://127.0.0.1:$SINK_PORT/v1/traces"
for round in $(seq 1 "$ROUNDS"); do
  log "round $round of $ROUNDS"
  run baseline "$BASELINE"
  run off "$STRATA"
  run on_1 "$STRATA" --tracing-enabled true --tracing-endpoint "$ENDPOINT" --tracing-sampling-ratio 1
  run on_0.01 "$STRATA" --tracing-enabled true --tracing-endpoint "$ENDPOINT" --tracing-sampling-ratio 0.01
done

python3 - "$SCRATCH/results.txt" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, rps = line.split()
    runs.setdefault(name, []).append(int(rps))
base = statistics.median(runs["baseline"])
print(f"{'variant':10} {'runs (requests/s)':32} {'median':>8} {'vs baseline':>12}")
for name, values in runs.items():
    median = statistics.median(values)
    print(f"{name:10} {', '.join(map(str, values)):32} {median:8.0f} {median / base:12.3f}")
EOF
