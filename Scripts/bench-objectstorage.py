#!/usr/bin/env python3
"""Object storage figures, in one run on this machine (docs/Benchmarks.md, "Object storage").

  Scripts/bench-objectstorage.py [--json FILE] [--only zoom,cold,fetch,tiers]

Every server on 127.0.0.1; a release `strata` (BENCH_STRATA, default .build/release/strata);
moto (Scripts/moto.sh, signatures checked) as the S3 server; nginx as the HTTP origin.

1. Origin cost — the zoom mix of Scripts/loadtest.sh (the six fixture photos at widths 200,
   210, … 1200 px, fit in a square, a seeded shuffle) for BENCH_SECONDS (default 20) with 16
   clients, from empty caches: once with the photos behind nginx (source.http.baseURL), once in
   a moto bucket (source.s3.bucket). Requests/s, p99, and the CPU seconds of strata and of the
   origin (nginx's workers, or moto: Python).
2. S3Source's own cost per fetch — BENCH_RENDERS (default 60) cold renders (distinct keys, one
   2048×1280 photo, 256 px) from a directory and from the bucket: strata's CPU per render in
   each; the difference is what fetching from S3 costs (signing, the exchange, the body),
   against the CPU of a render.
3. S3Source's own cost per fetch, in one process (`strata-bench s3-fetch`, BENCH_STRATA_BENCH,
   default .build-bench/release/strata-bench): sequential signed GETs of the 257 KB photo from
   moto through the keep-alive front, and unsigned GETs of the same file from nginx, on the process's CPU
   clock (nanoseconds, where /proc's ticks are 10 ms), against cold renders of the same bytes at
   256 and 1024 px in the same process.
4. A shared hit against a local disk hit and against a render: the same keys (raw pixels,
   256 px and 1024 px) rendered by one node, then asked of that node again after a restart
   (its disk tier), then of a new node with an empty disk and the shared tier: each answer's
   latency at the client (median and p90).
"""

import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
STRATA = os.environ.get("BENCH_STRATA", os.path.join(ROOT, ".build", "release", "strata"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "20"))
RENDERS = int(os.environ.get("BENCH_RENDERS", "60"))
STRATA_BENCH = os.environ.get("BENCH_STRATA_BENCH", os.path.join(ROOT, ".build-bench", "release", "strata-bench"))
SECTIONS = {"zoom", "cold", "fetch", "tiers"}
if "--only" in sys.argv:
    SECTIONS = set(sys.argv[sys.argv.index("--only") + 1].split(","))
if "fetch" in SECTIONS and not os.access(STRATA_BENCH, os.X_OK):
    raise SystemExit("no strata-bench at %s (swift build -c release --package-path Benchmarks --scratch-path .build-bench; "
                     "or BENCH_STRATA_BENCH=..., or --only zoom,cold,tiers)" % STRATA_BENCH)
PHOTOS = ["jpeg/path-2560x1600.jpg", "jpeg/fallenleaf-2048x1280-420.jpg", "jpeg/eveningglow-1024x640-progressive.jpg",
          "jpeg/coldripple-1024x640-orientation6.jpg", "jpeg/kite-800x500-gray.jpg", "webp/path-2560x1600.webp"]
SCRATCH = tempfile.mkdtemp(prefix="strata-objstore.")
os.chmod(SCRATCH, 0o755)  # nginx's workers run as nobody under root
processes = []


def log(text):
    print(text, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("nothing listens on %d" % port)


def start(args, env=None, name="proc"):
    out = open(os.path.join(SCRATCH, name + ".log"), "w")
    process = subprocess.Popen(args, env=env, stdout=out, stderr=out, start_new_session=True)
    processes.append(process)
    return process


def stop(process):
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(15)
    except Exception:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except Exception:
            pass


def cpu_seconds(pid):
    """User + system CPU of `pid` and its children still running (nginx's workers)."""
    total = 0.0
    pids = [pid] + [int(p) for p in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()]
    for p in pids:
        try:
            with open("/proc/%d/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return total


class Moto:
    def __init__(self, buckets):
        server, self.python = subprocess.check_output([os.path.join(ROOT, "Scripts", "moto.sh")], text=True).split()
        self.port = free_port()
        self.process = start([server, "-H", "127.0.0.1", "-p", str(self.port)],
                             env=dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3"), name="moto-%d" % self.port)
        wait_port(self.port)
        key = json.loads(subprocess.check_output(
            [self.python, os.path.join(ROOT, "Tests", "moto", "setup.py"), self.endpoint, *buckets], text=True))
        self.key_id, self.secret = key["accessKeyID"], key["secretAccessKey"]

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def upload(self, bucket, pairs):
        script = ("import boto3,sys\ns3=boto3.client('s3',endpoint_url=sys.argv[1],region_name='us-east-1',"
                  "aws_access_key_id=sys.argv[2],aws_secret_access_key=sys.argv[3])\n"
                  "for i in range(5,len(sys.argv),2): s3.put_object(Bucket=sys.argv[4],Key=sys.argv[i],Body=open(sys.argv[i+1],'rb').read())\n")
        flat = [x for pair in pairs for x in pair]
        subprocess.run([self.python, "-c", script, self.endpoint, self.key_id, self.secret, bucket, *flat], check=True)


class Node:
    def __init__(self, name, args, env=None):
        self.port = free_port()
        self.process = start([STRATA, "serve", "--host", "127.0.0.1", "--port", str(self.port), "--http-node-name", name,
                              "--memory-pressure-enabled", "false", *args], env=env, name=name)
        wait_port(self.port)

    def get(self, path, connection=None):
        own = connection is None
        connection = connection or http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        started = time.monotonic()
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
        elapsed = time.monotonic() - started
        if own:
            connection.close()
        return response.status, response.headers, body, elapsed

    def stats(self):
        return json.loads(self.get("/stats")[2])

    def cpu(self):
        return cpu_seconds(self.process.pid)

    def stop(self):
        stop(self.process)


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else 0


def zoom_urls():
    urls = ["/images/%s?w=%d&h=%d&format=jpeg" % (photo, width, width) for photo in PHOTOS for width in range(200, 1201, 10)]
    random.Random(42).shuffle(urls)
    return urls


def zoom(node, origin_pid):
    urls, latencies, statuses, lock = zoom_urls(), [], [], threading.Lock()
    position = [0]
    stop_at = time.monotonic() + SECONDS
    cpu0, origin0 = node.cpu(), cpu_seconds(origin_pid)

    def client():
        connection = http.client.HTTPConnection("127.0.0.1", node.port, timeout=120)
        while time.monotonic() < stop_at:
            with lock:
                url = urls[position[0] % len(urls)]
                position[0] += 1
            status, _, _, elapsed = node.get(url, connection)
            with lock:
                latencies.append(elapsed)
                statuses.append(status)

    threads = [threading.Thread(target=client) for _ in range(16)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    return {"rps": round(len(latencies) / wall, 1), "p99Ms": round(1000 * percentile(latencies, 0.99)),
            "errors": sum(1 for s in statuses if s != 200), "requests": len(latencies),
            "strataCpuSeconds": round(node.cpu() - cpu0, 2), "originCpuSeconds": round(cpu_seconds(origin_pid) - origin0, 2)}


def main():
    figures = {}
    src = os.path.join(SCRATCH, "src")
    for photo in PHOTOS:
        os.makedirs(os.path.join(src, os.path.dirname(photo)), exist_ok=True)
        shutil.copy(os.path.join(ROOT, "Fixtures", photo), os.path.join(src, photo))
    # Distinct keys of one photo for the cold renders.
    leaf = os.path.join(ROOT, "Fixtures", "jpeg/fallenleaf-2048x1280-420.jpg")
    os.makedirs(os.path.join(src, "many"), exist_ok=True)
    many = ["many/k%03d.jpg" % i for i in range(RENDERS)]
    for key in many:
        shutil.copy(leaf, os.path.join(src, key))

    moto = Moto(["originals", "renders"])
    log("uploading %d originals to moto" % (len(PHOTOS) + len(many)))
    moto.upload("originals", [(p, os.path.join(src, p)) for p in PHOTOS + many])
    aws = dict(os.environ, AWS_ACCESS_KEY_ID=moto.key_id, AWS_SECRET_ACCESS_KEY=moto.secret)
    s3_source = ["--source-s3-bucket", "originals", "--source-s3-endpoint", moto.endpoint]

    # nginx: the photos as static files (also at /originals/, the bucket's paths, for S3Source
    # against a plain server), and a keep-alive front for moto (whose own server closes every
    # connection, so that each fetch from it would open one: not what S3 does). The front buffers
    # moto's answers, which then arrive at a server's pace and not in moto's 8 KB writes. The
    # Host header passes through unchanged, so moto checks the signature Strata made.
    nginx_port, front_port = free_port(), free_port()
    conf = os.path.join(SCRATCH, "nginx.conf")
    with open(conf, "w") as f:
        f.write("daemon off; worker_processes 2; pid %s/nginx.pid; error_log %s/nginx-error.log;\n"
                "events { worker_connections 1024; }\nhttp { access_log off; sendfile on; etag on;\n"
                "  server { listen 127.0.0.1:%d; location / { root %s; } location /originals/ { alias %s/; } }\n"
                "  server { listen 127.0.0.1:%d; client_max_body_size 0; location / { proxy_pass http://127.0.0.1:%d;\n"
                "    proxy_set_header Host $http_host; proxy_buffers 16 64k; proxy_buffer_size 64k; proxy_request_buffering off; } } }\n"
                % (SCRATCH, SCRATCH, nginx_port, src, src, front_port, moto.port))
    nginx = start([shutil.which("nginx") or "/usr/sbin/nginx", "-c", conf, "-p", SCRATCH], name="nginx")
    wait_port(nginx_port)
    http_source = ["--source-http-base-url", "http://127.0.0.1:%d/" % nginx_port]
    s3_front = ["--source-s3-bucket", "originals", "--source-s3-endpoint", "http://127.0.0.1:%d" % front_port]

    # 1. Origin cost: the zoom mix.
    figures["zoom"] = {}
    # Tolerance 0: every URL of the mix is its own render (606 fetches of the origin), so the
    # origin's cost shows; the default tolerance serves most of them from a nearby render.
    for label, args, env, origin in [("nginx", http_source, None, nginx), ("s3", s3_source, aws, moto.process)] if "zoom" in SECTIONS else []:
        node = Node("zoom-" + label, args + ["--disk-path", os.path.join(SCRATCH, "zoom-" + label), "--tolerance", "0"], env)
        log("zoom mix from %s for %.0f s" % (label, SECONDS))
        figures["zoom"][label] = zoom(node, origin.pid)
        node.stop()
        log("  %s" % figures["zoom"][label])

    # 2. S3Source's own cost per fetch: cold renders from a directory and from the bucket, at
    # 256 px (a 1/8 shrink-on-load decode: the cheapest render, the largest share) and at the
    # zoom mix's sizes (256, 512, 768 and 1024 px in turn).
    figures["coldRenders"] = {}
    mix = [256, 512, 768, 1024]
    for label, args, env, sides in [("directory", ["--source-directory", src], None, [256]), ("http", http_source, None, [256]),
                                    ("s3", s3_source, aws, [256]), ("s3-keepalive", s3_front, aws, [256]),
                                    ("directory-mix", ["--source-directory", src], None, mix), ("http-mix", http_source, None, mix),
                                    ("s3-mix", s3_source, aws, mix), ("s3-keepalive-mix", s3_front, aws, mix)] if "cold" in SECTIONS else []:
        node = Node("cold-" + label, args, env)
        node.get("/images/%s?w=64&h=64&format=raw" % PHOTOS[4])  # the first request's set-up, untimed
        cpu0 = node.cpu()
        wall = []
        for number, key in enumerate(many):
            side = sides[number % len(sides)]
            status, headers, _, elapsed = node.get("/images/%s?w=%d&h=%d&format=raw" % (key, side, side))
            assert status == 200 and headers.get("X-Strata-Tier") == "source", (status, headers.get("X-Strata-Tier"))
            wall.append(elapsed)
        cpu = node.cpu() - cpu0
        figures["coldRenders"][label] = {"renders": len(many), "cpuMsPerRender": round(1000 * cpu / len(many), 2),
                                         "medianMs": round(1000 * percentile(wall, 0.5), 1)}
        node.stop()
        log("  cold renders from %s: %s" % (label, figures["coldRenders"][label]))
    for suffix in ("", "-mix") if "cold" in SECTIONS else ():
        d = figures["coldRenders"]["directory" + suffix]["cpuMsPerRender"]
        for origin in ("http", "s3", "s3-keepalive"):
            o = figures["coldRenders"][origin + suffix]["cpuMsPerRender"]
            figures["coldRenders"]["fetchCpuMs-" + origin + suffix] = round(o - d, 2)
            figures["coldRenders"]["fetchShareOfRender-" + origin + suffix] = round((o - d) / d, 4)

    # 3. S3Source's own cost per fetch, in one process.
    if "fetch" in SECTIONS:
        log("S3Source's cost per fetch (strata-bench s3-fetch)")
        figures["fetch"] = json.loads(subprocess.check_output(
            [STRATA_BENCH, "s3-fetch", "--endpoint", "http://127.0.0.1:%d" % front_port, "--bucket", "originals",
             "--key", many[0], "--static-endpoint", "http://127.0.0.1:%d" % nginx_port, "--json"], env=aws, text=True))
        log("  %s" % figures["fetch"])

    # 4. Render, disk hit, shared hit.
    shared = ["--shared-s3-bucket", "renders", "--shared-s3-endpoint", moto.endpoint, "--shared-s3-access-key-id", moto.key_id,
              "--shared-s3-secret-access-key", moto.secret, "--shared-timeout", "5s"]
    figures["tiers"] = {}
    for side in (256, 1024) if "tiers" in SECTIONS else ():
        paths = ["/images/%s?w=%d&h=%d&format=raw" % (key, side, side) for key in many]
        disk = os.path.join(SCRATCH, "tiers-%d" % side)
        first = Node("tiers-a", ["--source-directory", src, "--disk-path", disk] + shared)
        rendered = [first.get(p)[3] for p in paths]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and first.stats().get("shared", {}).get("uploads", 0) < len(paths):
            time.sleep(0.2)
        first.stop()
        again = Node("tiers-b", ["--source-directory", src, "--disk-path", disk] + shared)
        disk_hits = []
        for p in paths:
            status, headers, _, elapsed = again.get(p)
            assert headers.get("X-Strata-Tier") == "disk", headers.get("X-Strata-Tier")
            disk_hits.append(elapsed)
        again.stop()
        fresh = Node("tiers-c", ["--source-directory", src, "--disk-path", disk + "-fresh"] + shared)
        shared_hits = []
        for p in paths:
            status, headers, _, elapsed = fresh.get(p)
            assert headers.get("X-Strata-Tier") == "shared", headers.get("X-Strata-Tier")
            shared_hits.append(elapsed)
        fresh.stop()
        figures["tiers"][str(side)] = {
            name: {"medianMs": round(1000 * percentile(values, 0.5), 2), "p90Ms": round(1000 * percentile(values, 0.9), 2)}
            for name, values in [("render", rendered), ("disk", disk_hits), ("shared", shared_hits)]}
        log("  %d px: %s" % (side, figures["tiers"][str(side)]))
    return figures


if __name__ == "__main__":
    try:
        result = main()
        text = json.dumps(result, indent=2, sort_keys=True)
        if "--json" in sys.argv:
            with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
                f.write(text + "\n")
        print(text)
    finally:
        for process in processes:
            stop(process)
        shutil.rmtree(SCRATCH, ignore_errors=True)
