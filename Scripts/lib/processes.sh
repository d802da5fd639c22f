# shellcheck shell=bash
# The processes a script starts and its scratch folder, shared by the scripts that run servers
# (Scripts/loadtest.sh, Scripts/thumbor-compare.sh). Source it after setting
#   SCRATCH        the script's scratch folder (removed on exit)
#   KEEP_VARIABLE  the name of the variable that keeps it when set to 1 (LOADTEST_KEEP, …)
# and defining log() and die(). Each process started with `start` runs in a session of its own, so its
# children share its process group; on exit every group is stopped (TERM, then KILL after 10 s).

STARTED=() # process group ids of everything this script started

# Stops one process group that this script started: TERM, then KILL after 10 s.
stop_group() {
  local pid=$1 i
  kill -TERM -- "-$pid" 2>/dev/null || return 0
  for ((i = 0; i < 100; i++)); do
    kill -0 -- "-$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local status=$? pid
  for pid in "${STARTED[@]+"${STARTED[@]}"}"; do stop_group "$pid"; done
  if [ "${!KEEP_VARIABLE:-0}" = 1 ]; then
    log "scratch kept in $SCRATCH"
  else
    rm -rf "$SCRATCH"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# free_port: a free TCP port on 127.0.0.1 (python3's socket; a script with its own helper may
# define its own after sourcing this).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start NAME COMMAND...: runs COMMAND in a new session (so its children share its process group),
# output to $SCRATCH/NAME.log; sets LAST_PID.
start() {
  local name=$1
  shift
  setsid "$@" >"$SCRATCH/$name.log" 2>&1 </dev/null &
  LAST_PID=$!
  STARTED+=("$LAST_PID")
}

# wait_http NAME PID URL: waits up to 60 s for URL to answer 200.
wait_http() {
  local name=$1 pid=$2 url=$3 i
  for ((i = 0; i < 600; i++)); do
    curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || {
      tail -n 20 "$SCRATCH/$name.log" >&2 || true
      die "$name exited before it answered"
    }
    sleep 0.1
  done
  tail -n 20 "$SCRATCH/$name.log" >&2 || true
  die "$name did not answer $url within 60 s"
}
