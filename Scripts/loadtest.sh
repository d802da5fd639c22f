#!/usr/bin/env bash
# Load test: nginx vs a bare NIO server vs `strata serve` vs thumbor 7, in one run on this machine.
#
#   Scripts/loadtest.sh [--json]
#
# Eight wrk runs (2 threads, 32 connections, LOADTEST_SECONDS each, default 15), one server at a
# time, every server on 127.0.0.1 and a free port:
#   nginx         the 256 px JPEG thumbnails of the fixture photos as static files
#   floor         strata-floor (Benchmarks/): a bare swift-nio HTTP/1.1 server answering the same
#                 bytes with the same heads from a dictionary, on as many event loops as
#                 `strata serve`: the floor of a warm answer on Strata's stack
#   strata_warm   `strata serve`, the same URLs, after an untimed warm-up pass (one curl per URL)
#   thumbor_warm  thumbor (file loader, file result storage), the same thumbnails, after a warm-up
#                 pass; the script checks that they then come from the result storage (it hides the
#                 source photos and asks again)
#   strata_thumbor_warm  a fresh `strata serve` with its thumbor route on (thumbor.enabled,
#                 thumbor.allowUnsafe: thumbor's URLs here are unsafe), thumbor_warm's URLs, after
#                 the same warm-up pass
#   strata_zoom   a fresh `strata serve` with an empty disk cache, the zoom mix: every photo at the
#                 widths 200, 210, … 1200 px (fit in a square), in a seeded shuffled order
#   thumbor_zoom  a fresh thumbor with an empty result storage, the same mix
#   strata_thumbor_zoom  a fresh `strata serve` with its thumbor route on and an empty disk cache,
#                 thumbor_zoom's URLs in the same order
# strata_thumbor_warm's warm-up pass, and 25 URLs spread over the mix after strata_thumbor_zoom's
# run, check that Strata's thumbor route answers 200 with a whole JPEG that fits the URL's box.
# Reported per case: requests/s, p99 latency (ms) and errors (answers that are not 2xx/3xx, plus
# socket errors: connect, read, write, timeout). Without --json a table, then the ratio lines
# (requests/s and p99): Strata ÷ bare NIO (Strata's own cost), bare NIO ÷ nginx (the stack's),
# Strata ÷ nginx, and Strata's thumbor route ÷ thumbor, warm and zoom; with --json one object,
#   {"nginx":{"rps":…,"p99_ms":…,"errors":…},"floor":{…},"strata_warm":{…},"thumbor_warm":{…},
#    "strata_thumbor_warm":{…},"strata_zoom":{…},"thumbor_zoom":{…},"strata_thumbor_zoom":{…}}
# on stdout (a case that could not run is null); progress goes to stderr.
#
# Environment:
#   LOADTEST_STRATA     the strata binary (default .build/release/strata); without a working
#                       `strata serve` the four Strata cases are skipped (null), and without the
#                       thumbor.* keys the two strata_thumbor cases
#   LOADTEST_STRATA_ARGS  extra flags for `strata serve`, e.g. "--tolerance 0" (exact sizes in the
#                       zoom mix; the default tolerance 0.2 lets one render serve nearby widths)
#                       or "--memory-cost-limit 512MiB"
#   LOADTEST_FLOOR      the strata-floor binary (default .build-bench/release/strata-floor, built by
#                       `swift build -c release --package-path Benchmarks --scratch-path .build-bench
#                       --product strata-floor`); without it, or without a working strata (whose
#                       answers it serves), the floor case is skipped (null)
#   LOADTEST_FLOOR_MODE  strata-floor's --mode: bytes (default: heads as bytes, one writev, as
#                       Strata's warm path writes) or headers (through NIO's response encoder)
#   LOADTEST_SECONDS    duration of each wrk run (default 15)
#   LOADTEST_TIMEOUT    wrk's per-request timeout (default 10s; a timeout counts as an error)
#   LOADTEST_THUMBOR_PROCESSES  thumbor's --processes (default: the number of cores)
#   LOADTEST_SKIP_THUMBOR=1  no thumbor cases (null): nginx and Strata only, for comparing Strata
#                       builds (Scripts/bench-allocators.sh); the strata_thumbor cases still run
# (None of them starts with STRATA_: `strata serve` refuses STRATA_ variables that are not its keys.)
#   LOADTEST_KEEP=1     keep the scratch folder (logs, caches, URL lists) and print its path
#
# It installs what it lacks: nginx, wrk and curl from Debian (as root), and a virtual environment
# with thumbor in .loadtest/venv (git-ignored). Scratch goes to a temporary folder; every process
# it starts gets its own process group and is stopped by that id on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HERE="$ROOT/Scripts/loadtest"
VENV="$ROOT/.loadtest/venv"
THUMBOR_VERSION="7.8.0"
STRATA="${LOADTEST_STRATA:-$ROOT/.build/release/strata}"
FLOOR="${LOADTEST_FLOOR:-$ROOT/.build-bench/release/strata-floor}"
DURATION="${LOADTEST_SECONDS:-15}"
TIMEOUT="${LOADTEST_TIMEOUT:-10s}"
THREADS=2
CONNECTIONS=32
LOADTEST_THUMBOR_PROCESSES="${LOADTEST_THUMBOR_PROCESSES:-$(nproc)}"
# The photos: real fixture photographs of several sizes (see Fixtures/README.md).
IMAGES=(
  jpeg/path-2560x1600.jpg
  jpeg/fallenleaf-2048x1280-420.jpg
  jpeg/eveningglow-1024x640-progressive.jpg
  jpeg/coldripple-1024x640-orientation6.jpg
  jpeg/kite-800x500-gray.jpg
  webp/path-2560x1600.webp
)

JSON=0
for arg in "$@"; do
  case "$arg" in
    --json) JSON=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "unknown argument: $arg (usage: Scripts/loadtest.sh [--json])" >&2
      exit 2
      ;;
  esac
done

log() { printf '[loadtest] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# ---------------------------------------------------------------- installing what is missing

install_debian() {
  local missing=()
  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx-light)
  command -v wrk >/dev/null 2>&1 || missing+=(wrk)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
  if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" -eq 0 ] || die "missing ${missing[*]}: install them (apt-get install ${missing[*]}) or run as root"
    log "installing ${missing[*]} (apt-get)"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
  fi
}

install_venv() {
  if "$VENV/bin/python" -c "import thumbor, sys; sys.exit(thumbor.__version__ != '$THUMBOR_VERSION')" >/dev/null 2>&1; then
    return
  fi
  log "making $VENV with thumbor $THUMBOR_VERSION (pip)"
  mkdir -p "$(dirname "$VENV")"
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  # thumbor's own requirements come as wheels for CPython on x86_64/aarch64 (pycurl, which needs
  # libcurl4-openssl-dev and libssl-dev to build, is only for the HTTP loader, not used here).
  # Where pip has to build something from source after all, the Debian build packages go in and
  # pip tries once more.
  if ! "$VENV/bin/pip" install -q --disable-pip-version-check "thumbor==$THUMBOR_VERSION" >&2; then
    [ "$(id -u)" -eq 0 ] || die "pip could not install thumbor $THUMBOR_VERSION"
    log "pip failed; installing Debian build packages and trying again"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential python3-dev \
      libjpeg-dev zlib1g-dev libwebp-dev libcurl4-openssl-dev libssl-dev >&2
    "$VENV/bin/pip" install -q --disable-pip-version-check "thumbor==$THUMBOR_VERSION" >&2
  fi
}

SKIP_THUMBOR="${LOADTEST_SKIP_THUMBOR:-0}"
install_debian
if [ "$SKIP_THUMBOR" = 1 ]; then
  PY=python3
else
  install_venv
  PY="$VENV/bin/python"
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

# ---------------------------------------------------------------- processes and scratch

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/strata-loadtest.XXXXXX")
chmod 755 "$SCRATCH" # nginx's workers read the static files from here
KEEP_VARIABLE=LOADTEST_KEEP
# shellcheck source=lib/processes.sh
source "$ROOT/Scripts/lib/processes.sh"

stop() {
  local pid=$1 kept=() p
  stop_group "$pid"
  for p in "${STARTED[@]}"; do [ "$p" = "$pid" ] || kept+=("$p"); done
  STARTED=("${kept[@]+"${kept[@]}"}")
}

free_port() { "$PY" "$HERE/helper.py" port; }

# warm_up BASE URLFILE [--image|--exact]: one sequential GET per URL, each must answer 200 with a
# body; with --image or --exact the body must also pass check_image.
warm_up() {
  local base=$1 list=$2 check=${3:-} path code
  while IFS= read -r path; do
    code=$(curl -sS -o "$SCRATCH/warm.body" -w '%{http_code}' "$base$path")
    if [ "$code" != 200 ] || [ ! -s "$SCRATCH/warm.body" ]; then die "warm-up: $base$path answered $code"; fi
    if [ -n "$check" ]; then
      check_image "$path" "$SCRATCH/warm.body" "$check" >/dev/null || die "warm-up: $base$path is not the image asked for"
    fi
  done <"$list"
}

# check_image PATH FILE --image|--exact: FILE is a whole JPEG within the thumbor URL PATH's fit-in
# box (--exact: its longer side is the box's), as `helper.py image` checks.
check_image() {
  local path=$1 file=$2 flag=$3
  [ "$flag" = --image ] && flag=""
  "$PY" "$HERE/helper.py" image "$path" "$file" ${flag:+"$flag"}
}

# check_sample BASE URLFILE COUNT: GETs COUNT URLs spread over URLFILE after a timed run; each
# must answer 200 with a whole JPEG within its box.
check_sample() {
  local base=$1 list=$2 count=$3 total step i=0 path code
  total=$(wc -l <"$list")
  step=$(((total + count - 1) / count))
  while IFS= read -r path; do
    if ((i % step == 0)); then
      code=$(curl -sS -o "$SCRATCH/check.body" -w '%{http_code}' "$base$path")
      [ "$code" = 200 ] || die "check: $base$path answered $code"
      check_image "$path" "$SCRATCH/check.body" --image >/dev/null || die "check: $base$path is not the image asked for"
    fi
    i=$((i + 1))
  done <"$list"
}

# log_tiers CASE BASE URLFILE: logs how many of the URLs come from which X-Strata-Tier.
log_tiers() {
  local name=$1 base=$2 list=$3 tiers
  tiers=$(while IFS= read -r path; do
    curl -sS -o /dev/null -D - "$base$path" | tr -d '\r' | awk 'tolower($1) == "x-strata-tier:" { print $2 }'
  done <"$list" | sort | uniq -c | tr -s ' \n' ' ')
  log "$name: after the warm-up, X-Strata-Tier:${tiers:- (none)}"
}

# bench CASE BASE URLFILE: one wrk run; its result line goes to $SCRATCH/results/CASE.json.
bench() {
  local name=$1 base=$2 list=$3 out
  log "$name: load average $(cut -d' ' -f1-3 /proc/loadavg); wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s over $(wc -l <"$list") URLs"
  out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --timeout "$TIMEOUT" \
    -s "$HERE/rotate.lua" "$base" -- "$list" "$THREADS")
  printf '%s\n' "$out" >"$SCRATCH/$name.wrk.txt"
  grep '^LOADTEST_RESULT ' <<<"$out" | sed 's/^LOADTEST_RESULT //' >"$SCRATCH/results/$name.json"
  [ -s "$SCRATCH/results/$name.json" ] || die "$name: wrk printed no result"
  log "$name: $(cat "$SCRATCH/results/$name.json")"
}

# ---------------------------------------------------------------- inputs

mkdir -p "$SCRATCH/results" "$SCRATCH/src" "$SCRATCH/static/images" "$SCRATCH/heads/images"
for image in "${IMAGES[@]}"; do
  mkdir -p "$SCRATCH/src/$(dirname "$image")"
  cp "$ROOT/Fixtures/$image" "$SCRATCH/src/$image"
done
"$PY" "$HERE/helper.py" urls "$SCRATCH" "${IMAGES[@]}"

HAVE_STRATA=0
if [ -x "$STRATA" ] && "$STRATA" serve --help >/dev/null 2>&1; then
  HAVE_STRATA=1
else
  log "no working '$STRATA serve': the Strata cases are skipped (set LOADTEST_STRATA=/path/to/strata)"
fi
# Strata's thumbor route with thumbor's security settings in start_thumbor: no key, unsafe URLs
# allowed (the URL lists are /unsafe/…).
STRATA_THUMBOR_FLAGS=(--thumbor-enabled true --thumbor-allow-unsafe true)
HAVE_STRATA_THUMBOR=0
if [ "$HAVE_STRATA" = 1 ]; then
  if "$STRATA" config "${STRATA_THUMBOR_FLAGS[@]}" >/dev/null 2>&1; then
    HAVE_STRATA_THUMBOR=1
  else
    log "'$STRATA config' does not take ${STRATA_THUMBOR_FLAGS[*]}: the strata_thumbor cases are skipped"
  fi
fi

# start_strata CACHEDIR [FLAG...]: a fresh `strata serve` over $SCRATCH/src, with FLAGs; sets
# STRATA_PID and STRATA_BASE.
start_strata() {
  local port cache=$1
  shift
  port=$(free_port)
  # shellcheck disable=SC2086 # LOADTEST_STRATA_ARGS is a list of flags
  start strata "$STRATA" serve --host 127.0.0.1 --port "$port" \
    --source-directory "$SCRATCH/src" --disk-path "$cache" "$@" ${LOADTEST_STRATA_ARGS:-}
  STRATA_PID=$LAST_PID
  STRATA_BASE="http://127.0.0.1:$port"
  wait_http strata "$STRATA_PID" "$STRATA_BASE/healthz"
}

# start_thumbor RESULTDIR: a fresh thumbor over $SCRATCH/src; sets THUMBOR_PID and THUMBOR_BASE.
start_thumbor() {
  local port conf="$SCRATCH/thumbor.conf"
  port=$(free_port)
  cat >"$conf" <<EOF
LOADER = 'thumbor.loaders.file_loader'
FILE_LOADER_ROOT_PATH = '$SCRATCH/src'
# No storage of the originals: the file loader reads the photo itself, as strata's source tier does.
STORAGE = 'thumbor.storages.no_storage'
RESULT_STORAGE = 'thumbor.result_storages.file_storage'
RESULT_STORAGE_FILE_STORAGE_ROOT_PATH = '$1'
RESULT_STORAGE_STORES_UNSAFE = True
RESULT_STORAGE_EXPIRATION_SECONDS = 0
ALLOW_UNSAFE_URL = True
RESPECT_ORIENTATION = True
QUALITY = 80
EOF
  start thumbor "$VENV/bin/thumbor" --ip 127.0.0.1 --port "$port" --conf "$conf" \
    --processes "$LOADTEST_THUMBOR_PROCESSES" --log-level error
  THUMBOR_PID=$LAST_PID
  THUMBOR_BASE="http://127.0.0.1:$port"
  wait_http thumbor "$THUMBOR_PID" "$THUMBOR_BASE/healthcheck"
}

files_in() { find "$1" -type f 2>/dev/null | wc -l; }

# The static thumbnails: made once, at the same paths as strata's URLs (nginx ignores the query).
# With a working strata they are strata's own answers to those URLs (fetched with curl from a
# running `strata serve`), so nginx sends exactly the bytes strata sends, and their heads are kept
# for the floor; without one, Pillow in the venv makes them (Lanczos, fit in 256×256, JPEG quality
# 80).
if [ "$HAVE_STRATA" = 1 ]; then
  log "making the static thumbnails with strata serve"
  start_strata "$SCRATCH/strata-cache-thumbs"
  for image in "${IMAGES[@]}"; do
    mkdir -p "$SCRATCH/static/images/$(dirname "$image")" "$SCRATCH/heads/images/$(dirname "$image")"
    path=$(grep -F "/images/$image?" "$SCRATCH/warm-strata.txt")
    curl -fsS -D "$SCRATCH/heads/images/$image" -o "$SCRATCH/static/images/$image" "$STRATA_BASE$path" ||
      die "strata did not answer $path"
  done
  stop "$STRATA_PID"
else
  log "making the static thumbnails with Pillow"
  "$PY" "$HERE/helper.py" thumbs "$SCRATCH/src" "$SCRATCH/static/images" "${IMAGES[@]}"
fi

# ---------------------------------------------------------------- 1. nginx

mkdir -p "$SCRATCH/nginx/tmp"
NGINX_PORT=$(free_port)
NGINX_USER=""
[ "$(id -u)" -eq 0 ] && NGINX_USER="user root;"
cat >"$SCRATCH/nginx/nginx.conf" <<EOF
$NGINX_USER
daemon off;
master_process on;
worker_processes auto;
pid $SCRATCH/nginx/nginx.pid;
error_log $SCRATCH/nginx/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_timeout 65;
  keepalive_requests 1000000;
  open_file_cache max=1000 inactive=60s;
  client_body_temp_path $SCRATCH/nginx/tmp/body;
  proxy_temp_path $SCRATCH/nginx/tmp/proxy;
  fastcgi_temp_path $SCRATCH/nginx/tmp/fastcgi;
  uwsgi_temp_path $SCRATCH/nginx/tmp/uwsgi;
  scgi_temp_path $SCRATCH/nginx/tmp/scgi;
  types { }
  default_type image/jpeg;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    root $SCRATCH/static;
    location /images/ { try_files \$uri =404; }
    location = /healthz { return 200; }
  }
}
EOF
start nginx "$NGINX" -e "$SCRATCH/nginx/error.log" -p "$SCRATCH/nginx" -c "$SCRATCH/nginx/nginx.conf"
NGINX_PID=$LAST_PID
NGINX_BASE="http://127.0.0.1:$NGINX_PORT"
wait_http nginx "$NGINX_PID" "$NGINX_BASE/healthz"
warm_up "$NGINX_BASE" "$SCRATCH/warm-strata.txt"
bench nginx "$NGINX_BASE" "$SCRATCH/warm-strata.txt"
stop "$NGINX_PID"

# ---------------------------------------------------------------- 1b. the floor: bare NIO

if [ "$HAVE_STRATA" = 1 ] && [ -x "$FLOOR" ]; then
  port=$(free_port)
  start floor "$FLOOR" --bodies "$SCRATCH/static" --heads "$SCRATCH/heads" --port "$port" --mode "${LOADTEST_FLOOR_MODE:-bytes}"
  FLOOR_PID=$LAST_PID
  FLOOR_BASE="http://127.0.0.1:$port"
  wait_http floor "$FLOOR_PID" "$FLOOR_BASE$(head -n 1 "$SCRATCH/warm-strata.txt")"
  warm_up "$FLOOR_BASE" "$SCRATCH/warm-strata.txt"
  bench floor "$FLOOR_BASE" "$SCRATCH/warm-strata.txt"
  stop "$FLOOR_PID"
else
  log "no floor case: $FLOOR is missing (see LOADTEST_FLOOR) or there is no working strata"
fi

# ---------------------------------------------------------------- 2. strata, warm

if [ "$HAVE_STRATA" = 1 ]; then
  start_strata "$SCRATCH/strata-cache-warm"
  warm_up "$STRATA_BASE" "$SCRATCH/warm-strata.txt"
  log_tiers strata_warm "$STRATA_BASE" "$SCRATCH/warm-strata.txt"
  bench strata_warm "$STRATA_BASE" "$SCRATCH/warm-strata.txt"
  stop "$STRATA_PID"
fi

# ---------------------------------------------------------------- 3. thumbor, warm

if [ "$SKIP_THUMBOR" != 1 ]; then
start_thumbor "$SCRATCH/thumbor-results-warm"
warm_up "$THUMBOR_BASE" "$SCRATCH/warm-thumbor.txt"
sleep 0.5 # the result storage writes after answering
stored=$(files_in "$SCRATCH/thumbor-results-warm")
# Proof that the warm run is served by the result storage: with the photos hidden, every URL
# still answers 200.
mv "$SCRATCH/src" "$SCRATCH/src.hidden"
hidden_ok=0
while IFS= read -r path; do
  code=$(curl -sS -o /dev/null -w '%{http_code}' "$THUMBOR_BASE$path")
  [ "$code" = 200 ] && hidden_ok=$((hidden_ok + 1))
done <"$SCRATCH/warm-thumbor.txt"
mv "$SCRATCH/src.hidden" "$SCRATCH/src"
urls=$(wc -l <"$SCRATCH/warm-thumbor.txt")
log "thumbor_warm: $stored files in the result storage; $hidden_ok of $urls URLs answered 200 with the photos hidden"
[ "$hidden_ok" = "$urls" ] || die "thumbor does not serve the warm URLs from its result storage"
bench thumbor_warm "$THUMBOR_BASE" "$SCRATCH/warm-thumbor.txt"
stop "$THUMBOR_PID"
fi

# ---------------------------------------------------------------- 4. strata's thumbor route, warm

if [ "$HAVE_STRATA_THUMBOR" = 1 ]; then
  start_strata "$SCRATCH/strata-cache-thumbor-warm" "${STRATA_THUMBOR_FLAGS[@]}"
  # All six photos are larger than 256 px, so each answer's longer side is the box's.
  warm_up "$STRATA_BASE" "$SCRATCH/warm-thumbor.txt" --exact
  log_tiers strata_thumbor_warm "$STRATA_BASE" "$SCRATCH/warm-thumbor.txt"
  bench strata_thumbor_warm "$STRATA_BASE" "$SCRATCH/warm-thumbor.txt"
  stop "$STRATA_PID"
fi

# ---------------------------------------------------------------- 5. zoom mix from empty caches

if [ "$HAVE_STRATA" = 1 ]; then
  start_strata "$SCRATCH/strata-cache-zoom" # a new process and an empty disk path
  bench strata_zoom "$STRATA_BASE" "$SCRATCH/zoom-strata.txt"
  stop "$STRATA_PID"
fi

if [ "$SKIP_THUMBOR" != 1 ]; then
start_thumbor "$SCRATCH/thumbor-results-zoom"
[ "$(files_in "$SCRATCH/thumbor-results-zoom")" = 0 ] || die "thumbor's zoom result storage is not empty"
bench thumbor_zoom "$THUMBOR_BASE" "$SCRATCH/zoom-thumbor.txt"
stop "$THUMBOR_PID"
log "thumbor_zoom: $(files_in "$SCRATCH/thumbor-results-zoom") files in the result storage afterwards ($(wc -l <"$SCRATCH/zoom-thumbor.txt") distinct URLs)"
fi

if [ "$HAVE_STRATA_THUMBOR" = 1 ]; then
  start_strata "$SCRATCH/strata-cache-thumbor-zoom" "${STRATA_THUMBOR_FLAGS[@]}" # new process, empty disk path
  bench strata_thumbor_zoom "$STRATA_BASE" "$SCRATCH/zoom-thumbor.txt"
  check_sample "$STRATA_BASE" "$SCRATCH/zoom-thumbor.txt" 25
  log "strata_thumbor_zoom: 25 URLs spread over the mix answered whole JPEGs within their boxes"
  stop "$STRATA_PID"
fi

# ---------------------------------------------------------------- report

if [ "$JSON" = 1 ]; then
  "$PY" "$HERE/helper.py" report "$SCRATCH/results" --json
else
  "$PY" "$HERE/helper.py" report "$SCRATCH/results"
fi
