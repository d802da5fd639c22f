# Shared by Scripts/bench-iiif.sh and Scripts/bench-iiif-big.sh (sourced): helpers, and IIPImage
# (iipsrv over FastCGI) behind nginx. The sourcing script sets `pids=()` (every process it
# starts, stopped on exit) and, before iip_nginx/iip_start, `work`, `iipsrv`, `fcgi_port`,
# `nginx_port`; iip_start sets `iip_pids`.

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
# field NAME LINE: the value of NAME=value in a line of key=value words.
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }
# peak_kb PID: the process's peak resident set (VmHWM), in kB.
peak_kb() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status" 2>/dev/null || echo 0; }
# wrk_run PORT PATHS: wrk over the paths for $seconds (2 threads, 32 connections), each
# connection rotating through them; sets run_tps, run_p99 and run_errors.
wrk_run() {
    local line
    line=$(wrk -t2 -c32 -d"${seconds}s" --latency -s Scripts/bench-iiif/rotate.lua "http://127.0.0.1:$1" -- "$2" | grep '^BENCH')
    run_tps=$(field tiles_per_s "$line")
    run_p99=$(field p99_ms "$line")
    run_errors=$(( $(field non2xx "$line") + $(field socket_errors "$line") ))
}

# bench_work SCRATCH…: $work is $BIG_DIR (kept on exit, but for its SCRATCH subfolders) or a
# fresh temporary folder (removed on exit); on exit every process in `pids` is stopped first.
bench_work() {
    if [ -n "${BIG_DIR:-}" ]; then
        work=$BIG_DIR
        mkdir -p "$work"
        bench_scratch=("$@")
    else
        work=$(mktemp -d)
        bench_scratch=()
    fi
    pids=()
    trap bench_cleanup EXIT
}
bench_cleanup() {
    local pid dir
    for pid in "${pids[@]+"${pids[@]}"}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]+"${pids[@]}"}"; do wait "$pid" 2>/dev/null || true; done
    if [ -z "${BIG_DIR:-}" ]; then
        rm -rf "$work"
    else
        for dir in "${bench_scratch[@]+"${bench_scratch[@]}"}"; do rm -rf "${work:?}/$dir"; done
    fi
}

# stop PID...: stops the given processes and forgets them.
stop() {
    local pid keep=() p
    for pid in "$@"; do
        kill "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    done
    for p in "${pids[@]+"${pids[@]}"}"; do
        case " $* " in *" $p "*) ;; *) keep+=("$p") ;; esac
    done
    pids=("${keep[@]+"${keep[@]}"}")
}

wait_http() {
    local url=$1
    for _ in $(seq 1 300); do
        curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "no answer from $url" >&2
    return 1
}

iip_prefix="/fcgi-bin/iipsrv.fcgi?IIIF="

# iip_nginx: nginx on 127.0.0.1:$nginx_port passing /fcgi-bin/iipsrv.fcgi to $fcgi_port.
iip_nginx() {
    mkdir -p "$work/nginx"
    cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 2;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $work/nginx/body;
    fastcgi_temp_path $work/nginx/fastcgi;
    proxy_temp_path $work/nginx/proxy;
    uwsgi_temp_path $work/nginx/uwsgi;
    scgi_temp_path $work/nginx/scgi;
    # No upstream keep-alive: an iipsrv process serves one FastCGI connection at a time,
    # so a connection nginx keeps idle would block the others.
    server {
        listen 127.0.0.1:$nginx_port;
        location /fcgi-bin/iipsrv.fcgi {
            fastcgi_pass 127.0.0.1:$fcgi_port;
            fastcgi_param QUERY_STRING \$query_string;
            fastcgi_param REQUEST_METHOD \$request_method;
            fastcgi_param REQUEST_URI \$request_uri;
            fastcgi_param SCRIPT_NAME \$fastcgi_script_name;
            fastcgi_param SERVER_NAME \$server_name;
            fastcgi_param SERVER_PORT \$server_port;
            fastcgi_param SERVER_PROTOCOL \$server_protocol;
            fastcgi_param HTTP_HOST \$http_host;
            fastcgi_param HTTPS "";
        }
    }
}
EOF
    nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' &
    pids+=($!)
}

# iip_start N TIFF: N iipsrv processes on one FastCGI socket (spawn-fcgi -F N) serving
# $work/tiff/, once TIFF's info.json answers.
iip_start() {
    local out pid
    out=$(FILESYSTEM_PREFIX="$work/tiff/" VERBOSITY=0 MAX_CVT=5000 LOGFILE="$work/iipsrv.log" \
        spawn-fcgi -a 127.0.0.1 -p "$fcgi_port" -F "$1" -- "$iipsrv" 2>&1)
    iip_pids=()
    while read -r pid; do
        iip_pids+=("$pid")
        pids+=("$pid")
    done < <(sed -n 's/.*PID: *\([0-9][0-9]*\).*/\1/p' <<<"$out")
    [ "${#iip_pids[@]}" -eq "$1" ] || { echo "spawn-fcgi: $out" >&2; exit 1; }
    wait_http "http://127.0.0.1:$nginx_port$iip_prefix$2/info.json"
}

# mosaic NAME ACROSS DOWN: $work/source/NAME, a baseline JPEG (quality 85) of ACROSS × DOWN
# 2560×1600 photos, two fixtures alternating, unless it is there already. Run from the
# repository's root.
mosaic() {
    [ -s "$work/source/$1" ] && return 0
    mkdir -p "$work/source"
    [ -s "$work/path.v" ] || vips copy Fixtures/jpeg/path-2560x1600.jpg "$work/path.v"
    [ -s "$work/leaf.v" ] || vips resize Fixtures/jpeg/fallenleaf-2048x1280-420.jpg "$work/leaf.v" 1.25
    python3 - "$work" "$1" "$2" "$3" <<'PY'
import subprocess, sys
work, name, across, down = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
tiles = [f"{work}/{'path' if (r + c) % 2 == 0 else 'leaf'}.v" for r in range(down) for c in range(across)]
out = f"{work}/source/{name}[Q=85,strip]"
# arrayjoin of one image crashes libvips 8.14: a copy is the same file.
command = ["vips", "copy", tiles[0], out] if len(tiles) == 1 else ["vips", "arrayjoin", " ".join(tiles), out, "--across", str(across)]
subprocess.run(command, check=True)
PY
}
