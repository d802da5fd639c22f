#!/usr/bin/env bash
# A Strata cluster on this machine: N `strata serve` nodes (each with its own port, memory and
# disk tier), one nginx serving the originals (every node's HTTP origin) and one routing nginx
# that sends each image key to one node by consistent hashing. Everything listens on
# 127.0.0.1 and is stopped by its process id.
#
#   cluster.sh start N        origin, N nodes, router; waits until each answers /healthz
#   cluster.sh stop           router, nodes (SIGTERM: in-flight requests finish), origin
#   cluster.sh stop-node I    SIGTERM node I and wait for it to exit (--kill: SIGKILL)
#   cluster.sh start-node I   start node I again (its disk directory is kept)
#   cluster.sh add-node       start node N+1 and reload the router with it
#   cluster.sh status         what runs, with ports and pids
#
# Environment (not STRATA_…: those are configuration keys, read by every node):
#   STRATA               the strata binary (default: .build/release/strata, else .build/debug/strata)
#   CLUSTER_DIR   state: configs, logs, pids, each node's disk tier (default: ./.cluster)
#   CLUSTER_PORT  the router's port; the origin listens on +1, node I on +10+I (default 18400)
#   CLUSTER_ORIGIN_ROOT   the directory the origin serves (default: ./Fixtures)
#   CLUSTER_NODE_ARGS     more flags for every node, e.g. "--memory-cost-limit 2GiB --disk-byte-limit 200GiB"
#   CLUSTER_SOURCE_ARGS   the nodes' source instead of the origin nginx, e.g. "--source-s3-bucket originals
#                         --source-s3-endpoint http://127.0.0.1:9000" (credentials from AWS_* variables)
#   NGINX                the nginx binary (default: nginx on PATH, else /usr/sbin/nginx)
#   MAX_FAILS, FAIL_TIMEOUT  the router's passive health check (default 1 and 3s)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
state="${CLUSTER_DIR:-$repo/.cluster}"
base_port="${CLUSTER_PORT:-18400}"
origin_root="${CLUSTER_ORIGIN_ROOT:-$repo/Fixtures}"
max_fails="${MAX_FAILS:-1}"
fail_timeout="${FAIL_TIMEOUT:-3s}"
if [ -z "${STRATA:-}" ]; then
  if [ -x "$repo/.build/release/strata" ]; then STRATA="$repo/.build/release/strata"; else STRATA="$repo/.build/debug/strata"; fi
fi
if [ -z "${NGINX:-}" ]; then
  NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
fi

router_port=$base_port
origin_port=$((base_port + 1))
node_port() { echo $((base_port + 10 + $1)); }

die() { echo "cluster: $*" >&2; exit 1; }

# Replaces each {{NAME}} of a template with the value given as NAME=value.
render() {
  local template="$1" out="$2"; shift 2
  python3 - "$template" "$out" "$@" <<'PY'
import sys
template, out, pairs = sys.argv[1], sys.argv[2], sys.argv[3:]
text = open(template).read()
for pair in pairs:
    name, value = pair.split("=", 1)
    text = text.replace("{{" + name + "}}", value)
if "{{" in text:
    sys.exit("cluster: unreplaced placeholder in " + template)
open(out, "w").write(text)
PY
}

node_count() { cat "$state/nodes" 2>/dev/null || echo 0; }

# Whether PID runs (a zombie, exited but not yet reaped by its new parent, does not).
running() { kill -0 "$1" 2>/dev/null && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

alive() { [ -f "$1" ] && running "$(cat "$1")"; }

# Whether URL answers 200 (curl, or Python's urllib where curl is missing).
answers() {
  if command -v curl >/dev/null 2>&1; then
    curl -fsS -o /dev/null --max-time 1 "$1" 2>/dev/null
  else
    python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1).read()' "$1" 2>/dev/null
  fi
}

# Waits until URL answers 200, up to $2 seconds.
wait_http() {
  local url="$1" limit="$2" i
  for ((i = 0; i < limit * 10; i++)); do
    if answers "$url"; then return 0; fi
    sleep 0.1
  done
  return 1
}

# Copies nginx's pid file FROM (written by its master once it has daemonized, so not always
# there when the command returns) to TO, waiting up to 5 seconds for it.
keep_pid() {
  local from="$1" to="$2" i
  for ((i = 0; i < 50; i++)); do
    if [ -s "$from" ]; then cp "$from" "$to"; return 0; fi
    sleep 0.1
  done
  die "nginx wrote no pid file at $from (see $state/logs/)"
}

# Sends SIGNAL to the process in PIDFILE and waits up to LIMIT seconds for it to exit.
stop_pid() {
  local pidfile="$1" signal="$2" limit="$3" pid i
  [ -f "$pidfile" ] || return 0
  pid="$(cat "$pidfile")"
  if running "$pid"; then
    kill "-$signal" "$pid" 2>/dev/null || true
    for ((i = 0; i < limit * 10; i++)); do
      running "$pid" || break
      sleep 0.1
    done
    if running "$pid"; then
      echo "cluster: pid $pid did not exit in ${limit}s after SIG$signal; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pidfile"
}

write_router_config() {
  local count="$1" servers="" i
  for ((i = 1; i <= count; i++)); do
    servers+="        server 127.0.0.1:$(node_port "$i") max_fails=$max_fails fail_timeout=$fail_timeout;"$'\n'
  done
  render "$here/router.conf.template" "$state/router.conf" \
    STATE="$state" LISTEN="127.0.0.1:$router_port" SERVERS="${servers%$'\n'}" \
    MAX_FAILS="$max_fails" FAIL_TIMEOUT="$fail_timeout"
}

start_node() {
  local i="$1" port
  port="$(node_port "$i")"
  alive "$state/pids/node-$i.pid" && die "node-$i already runs (pid $(cat "$state/pids/node-$i.pid"))"
  mkdir -p "$state/node-$i"
  # shellcheck disable=SC2086 # CLUSTER_NODE_ARGS is a list of flags
  "$STRATA" serve --host 127.0.0.1 --port "$port" \
    --http-node-name "node-$i" \
    ${CLUSTER_SOURCE_ARGS:---source-http-base-url http://127.0.0.1:$origin_port/} \
    --disk-path "$state/node-$i/disk" \
    ${CLUSTER_NODE_ARGS:-} \
    >"$state/logs/node-$i.log" 2>&1 &
  echo $! >"$state/pids/node-$i.pid"
  wait_http "http://127.0.0.1:$port/healthz" 60 || die "node-$i did not answer /healthz on port $port (see $state/logs/node-$i.log)"
}

start() {
  local count="$1" i
  [[ "$count" =~ ^[1-9][0-9]*$ ]] || die "start needs a node count, e.g. start 3"
  [ -x "$STRATA" ] || die "no strata binary at $STRATA (swift build -c release, or set STRATA)"
  [ -x "$NGINX" ] || die "no nginx at $NGINX (apt-get install nginx, or set NGINX)"
  [ -d "$origin_root" ] || die "no origin directory $origin_root (set CLUSTER_ORIGIN_ROOT)"
  alive "$state/pids/router.pid" && die "a cluster already runs from $state (cluster.sh stop)"
  mkdir -p "$state"/{logs,pids,tmp}
  echo "$count" >"$state/nodes"

  render "$here/origin.conf.template" "$state/origin.conf" \
    STATE="$state" LISTEN="127.0.0.1:$origin_port" ROOT="$(cd "$origin_root" && pwd)"
  "$NGINX" -c "$state/origin.conf" -p "$state" -e "$state/logs/origin-error.log"
  keep_pid "$state/origin.pid" "$state/pids/origin.pid"

  for ((i = 1; i <= count; i++)); do start_node "$i"; done

  write_router_config "$count"
  "$NGINX" -c "$state/router.conf" -p "$state" -e "$state/logs/router-error.log"
  keep_pid "$state/router.pid" "$state/pids/router.pid"
  wait_http "http://127.0.0.1:$router_port/healthz" 10 || die "the router does not answer on port $router_port"
  status
}

stop() {
  stop_pid "$state/pids/router.pid" QUIT 10
  local f
  for f in "$state"/pids/node-*.pid; do
    [ -e "$f" ] && stop_pid "$f" TERM 30
  done
  stop_pid "$state/pids/origin.pid" QUIT 10
  rm -f "$state/nodes"
}

add_node() {
  local count
  count=$(($(node_count) + 1))
  [ "$count" -gt 1 ] || die "no cluster runs (cluster.sh start N)"
  start_node "$count"
  echo "$count" >"$state/nodes"
  write_router_config "$count"
  local master old waited=0
  master=$(cat "$state/pids/router.pid")
  old=" $(children "$master" | tr '\n' ' ')"
  "$NGINX" -c "$state/router.conf" -p "$state" -e "$state/logs/router-error.log" -s reload
  # Reload makes the master read the new configuration and start new workers; the old ones
  # close their idle connections, finish their requests in flight and exit. Until then a client
  # still connected to an old worker is routed by the old upstream list, with that worker's own
  # view of which nodes failed. Wait for a new worker and for the old ones to be gone.
  local new left
  while :; do
    read -r new left <<<"$(reload_progress "$master" "$old")"
    [ "$new" -gt 0 ] && [ "$left" -eq 0 ] && break
    if [ "$waited" -ge 100 ]; then
      [ "$new" -gt 0 ] || die "the router started no new workers within 10 s of its reload"
      echo "cluster.sh: old router workers still finish connections after 10 s; the new ones serve new connections" >&2
      break
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  echo "node-$count joined on port $(node_port "$count")"
}

# children PID: the pids of PID's child processes, one a line (from /proc; no procps needed).
children() {
  local stat line rest ppid pid
  for stat in /proc/[0-9]*/stat; do
    { read -r line <"$stat"; } 2>/dev/null || continue
    # After the command name (in parentheses, perhaps with spaces): state, then the parent pid.
    rest=${line##*) }
    ppid=${rest#* }
    ppid=${ppid%% *}
    if [ "$ppid" = "$1" ]; then
      pid=${stat#/proc/}
      echo "${pid%/stat}"
    fi
  done
}

# reload_progress PID OLD: "NEW LEFT", how many of PID's children are not in OLD (" pid pid … ")
# and how many still are (one scan of /proc).
reload_progress() {
  local pid new=0 left=0
  for pid in $(children "$1"); do
    if [[ "$2" == *" $pid "* ]]; then left=$((left + 1)); else new=$((new + 1)); fi
  done
  echo "$new $left"
}

status() {
  local i
  echo "router  http://127.0.0.1:$router_port  pid $(cat "$state/pids/router.pid" 2>/dev/null || echo -)"
  echo "origin  http://127.0.0.1:$origin_port  pid $(cat "$state/pids/origin.pid" 2>/dev/null || echo -)  root $origin_root"
  for ((i = 1; i <= $(node_count); i++)); do
    local pidfile="$state/pids/node-$i.pid" state_word="stopped"
    alive "$pidfile" && state_word="pid $(cat "$pidfile")"
    echo "node-$i  http://127.0.0.1:$(node_port "$i")  $state_word  disk $state/node-$i/disk"
  done
}

case "${1:-}" in
  start) start "${2:-3}" ;;
  stop) stop ;;
  stop-node)
    [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "stop-node needs a node number"
    if [ "${3:-}" = "--kill" ]; then stop_pid "$state/pids/node-$2.pid" KILL 10; else stop_pid "$state/pids/node-$2.pid" TERM 30; fi
    ;;
  start-node)
    [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "start-node needs a node number"
    start_node "$2"
    ;;
  add-node) add_node ;;
  status) status ;;
  *) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
