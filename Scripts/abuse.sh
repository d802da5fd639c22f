#!/usr/bin/env bash
# Connection abuse against `strata serve` (issue 33): idle keep-alive connections, a slowloris,
# clients that never read, GET requests with bodies; a well-behaved client's warm requests are
# measured without an attack and during each.
#
#   Scripts/abuse.sh [--nginx] [--json] [abuse.py options: --idle 10000 --slowloris 200
#                    --never-read 50 --bodies 200 --seconds 15 --hold 90]
#
# --nginx: the same attacks against nginx (the anchor), serving the warm answer's bytes (taken
# from `strata serve` first) as a static file at the same URL, with 2 workers and its defaults
# (client_header_timeout 60s, keepalive_timeout 75s, request bodies of GETs read and dropped).
#
# Starts a release `strata serve` (ABUSE_STRATA, default .build/release/strata; built when
# missing) over Fixtures/ on a free port of 127.0.0.1 with its defaults (http.headerTimeout,
# http.idleTimeout, http.maxConnections: pass others in ABUSE_STRATA_ARGS, e.g.
# "--http-idle-timeout 10s"), caches the warm image, raises `ulimit -n` to its hard limit,
# runs Scripts/abuse/abuse.py (see its header for what is measured), stops the server by its pid.
# Without --json a table; with --json one object on stdout (Scripts/soak.sh reads it):
#   {"baseline":{"requests":…,"errors":…,"p50_ms":…,"p99_ms":…},
#    "idle":{"connections":…,"opened":…,"open_after_hold":…,"open_longer_than_hold":…,"hold_s":…,"warm":{…},
#            "rss_before_kib":…,"rss_peak_kib":…,"kib_per_idle_connection":…},
#    "slowloris":{…},"never_read":{…},"get_bodies":{…}}
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
AGAINST=strata
if [[ "${1:-}" == "--nginx" ]]; then
  AGAINST=nginx
  shift
fi
STRATA="${ABUSE_STRATA:-$ROOT/.build/release/strata}"
if [[ ! -x "$STRATA" ]]; then
  (cd "$ROOT" && Scripts/swift.sh build -c release --product strata >&2)
fi
ulimit -n "$(ulimit -Hn)"
WORK="$(mktemp -d)"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
# shellcheck disable=SC2086
STRATA_SOURCE_DIRECTORY="$ROOT/Fixtures" STRATA_DISK_PATH="$WORK/disk" STRATA_HTTP_PORT="$PORT" \
  "$STRATA" serve ${ABUSE_STRATA_ARGS:-} >"$WORK/serve.log" 2>&1 &
PID=$!
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 200); do
  curl -fsS -o /dev/null "http://127.0.0.1:$PORT/healthz" 2>/dev/null && break
  sleep 0.1
done
WARM="/images/jpeg/kite-800x500-gray.jpg?w=120&h=120&format=jpeg"
curl -fsS -o /dev/null "http://127.0.0.1:$PORT$WARM"
curl -fsS -o /dev/null "http://127.0.0.1:$PORT$WARM"
if [[ "$AGAINST" == nginx ]]; then
  # The warm answer's bytes as a static file at the same path (nginx ignores the query).
  mkdir -p "$WORK/static/images/jpeg" "$WORK/nginx/tmp"
  curl -fsS -o "$WORK/static/images/jpeg/kite-800x500-gray.jpg" "http://127.0.0.1:$PORT$WARM"
  kill "$PID"
  wait "$PID" 2>/dev/null || true
  chmod 755 "$WORK"
  NGINX=$(command -v nginx || echo /usr/sbin/nginx)
  [[ -x "$NGINX" ]] || { echo "abuse: nginx is not installed (apt-get install nginx-light)" >&2; exit 1; }
  PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  NGINX_USER=""
  [[ "$(id -u)" -eq 0 ]] && NGINX_USER="user root;"
  cat >"$WORK/nginx/nginx.conf" <<EOF
$NGINX_USER
daemon off;
worker_processes 2;
worker_rlimit_nofile 65536;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log warn;
events { worker_connections 16384; }
http {
  access_log off;
  sendfile on;
  tcp_nodelay on;
  keepalive_requests 1000000;
  client_body_temp_path $WORK/nginx/tmp/body;
  proxy_temp_path $WORK/nginx/tmp/proxy;
  fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
  uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
  scgi_temp_path $WORK/nginx/tmp/scgi;
  types { }
  default_type image/jpeg;
  server {
    listen 127.0.0.1:$PORT backlog=4096;
    root $WORK/static;
    location /images/ { try_files \$uri =404; }
    location = /healthz { return 200; }
  }
}
EOF
  "$NGINX" -e "$WORK/nginx/error.log" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" &
  PID=$!
  for _ in $(seq 1 100); do
    curl -fsS -o /dev/null "http://127.0.0.1:$PORT/healthz" 2>/dev/null && break
    sleep 0.1
  done
  curl -fsS -o /dev/null "http://127.0.0.1:$PORT$WARM"
  echo "nginx: pid $PID, port $PORT (the warm answer as a static file)" >&2
  python3 "$ROOT/Scripts/abuse/abuse.py" --port "$PORT" --pid "$PID" "$@"
  exit 0
fi
echo "strata serve: pid $PID, port $PORT ($STRATA)" >&2
python3 "$ROOT/Scripts/abuse/abuse.py" --port "$PORT" --pid "$PID" "$@"
echo "server's connection metrics:" >&2
curl -fsS "http://127.0.0.1:$PORT/metrics" | grep -E '^strata_http_connections' >&2 || true
