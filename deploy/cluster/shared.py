#!/usr/bin/env python3
"""The cluster over object storage (deploy/cluster/shared-test.sh starts it): nodes whose
originals are in one bucket (S3Source) and whose renders go to a shared bucket (the shared
tier), two moto servers with signature checking on, the routing nginx in front.

Phases (each prints what it expected and what it measured; a failed check exits 1):
  1. Re-shard, twice — without the shared tier, then with it: three nodes are warmed with K keys
     (each rendered once), a fourth node joins and node-1 is stopped, and every key is asked
     again through the router. Renders after the change (Σ of the live nodes' `served.source`)
     are counted; with the shared tier they must fall by >= 90 % against the run without it.
  2. Faults, with the shared tier: a fifth node joins (its keys are in neither its memory nor
     its disk) and clients ask it for them while the shared store is frozen (SIGSTOP) for a few
     seconds: no request fails, and the slowest answers are bounded by shared.timeout plus a
     render; when the store is resumed (SIGCONT) its hits return.
Writes the figures as JSON to $SHARED_JSON when set. Python's standard library only.
"""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
CLUSTER = os.path.join(HERE, "cluster.sh")
STATE = os.environ["CLUSTER_DIR"]
PORT = int(os.environ["CLUSTER_PORT"])
KEYS = int(os.environ.get("SHARED_KEYS", "120"))
SIDE = 256
FIXTURE = os.environ.get("SHARED_FIXTURE", "jpeg/fallenleaf-2048x1280-420.jpg")
SHARED_TIMEOUT_MS = int(os.environ.get("SHARED_TIMEOUT_MS", "300"))
FAULT_SIDES = [SIDE, 180, 128, 90, 64, 45]

failures = []
figures = {}
STARTED = time.monotonic()


def phase(title):
    print("\n[%5.1f s] %s" % (time.monotonic() - STARTED, title), flush=True)


def check(ok, what):
    print(("  ok    " if ok else "  FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


class Moto:
    """A moto server on 127.0.0.1 with signature checking, its user's key and `buckets`."""

    def __init__(self, port, buckets):
        server, python = subprocess.check_output([os.path.join(REPO, "Scripts", "moto.sh")], text=True).split()
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3")
        self.port = port
        self.log = open(os.path.join(STATE, "logs", "moto-%d.log" % port), "w")
        self.process = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], env=env, stdout=self.log, stderr=self.log)
        self.python = python
        for _ in range(600):
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=1).connect()
                break
            except OSError:
                time.sleep(0.1)
        key = json.loads(subprocess.check_output(
            [python, os.path.join(REPO, "Tests", "moto", "setup.py"), self.endpoint, *buckets], text=True))
        self.key_id, self.secret = key["accessKeyID"], key["secretAccessKey"]

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def upload(self, bucket, names, path):
        script = ("import boto3,sys\n"
                  "s3=boto3.client('s3',endpoint_url=sys.argv[1],region_name='us-east-1',"
                  "aws_access_key_id=sys.argv[2],aws_secret_access_key=sys.argv[3])\n"
                  "data=open(sys.argv[5],'rb').read()\n"
                  "for name in sys.argv[6:]: s3.put_object(Bucket=sys.argv[4],Key=name,Body=data)\n")
        subprocess.run([self.python, "-c", script, self.endpoint, self.key_id, self.secret, bucket, path, *names], check=True)

    def cpu_seconds(self):
        with open("/proc/%d/stat" % self.process.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.process.send_signal(signal.SIGCONT)
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def get(port, path, timeout=60):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
        return response.status, response.headers, body
    finally:
        connection.close()


def key_name(index):
    return "photos/k%03d.jpg" % index


def image_path(index, side=SIDE):
    return "/images/%s?w=%d&h=%d&format=jpeg" % (key_name(index), side, side)


def stats(port):
    return json.loads(get(port, "/stats")[2])


def node_port(number):
    return PORT + 10 + number


def cluster(*args, env=None):
    subprocess.run([CLUSTER, *args], check=True, env=env, stdout=subprocess.DEVNULL)


def renders(numbers):
    return sum(stats(node_port(n))["engine"]["served"].get("source", 0) for n in numbers)


def wait_uploads(numbers, expected, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done = sum(stats(node_port(n)).get("shared", {}).get("uploads", 0) for n in numbers)
        queued = sum(stats(node_port(n)).get("shared", {}).get("queuedBytes", 0) for n in numbers)
        if done >= expected and queued == 0:
            return done
        time.sleep(0.2)
    return done


def reshard(env, shared, label):
    """Warm 3 nodes, add node-4, stop node-1, ask every key again: renders after the change."""
    state = os.path.join(STATE, label)
    run_env = dict(env, CLUSTER_DIR=state)
    os.makedirs(state, exist_ok=True)
    cluster("start", "3", env=run_env)
    try:
        placement = {}
        for index in range(KEYS):
            status, headers, _ = get(PORT, image_path(index))
            check_quiet(status == 200, "%s: %d" % (key_name(index), status))
            placement[index] = headers.get("X-Strata-Node")
        warmed = renders([1, 2, 3])
        if shared:
            uploads = wait_uploads([1, 2, 3], warmed)
            check(uploads >= warmed, "%s: the %d renders are in the shared bucket (%d uploads)" % (label, warmed, uploads))
        cluster("add-node", env=run_env)
        cluster("stop-node", "1", env=run_env)
        before = renders([2, 3, 4])
        moved, tiers, failed = 0, {}, 0
        for index in range(KEYS):
            status, headers, _ = get(PORT, image_path(index))
            failed += status != 200
            node, tier = headers.get("X-Strata-Node"), headers.get("X-Strata-Tier")
            tiers[tier] = tiers.get(tier, 0) + 1
            moved += node != placement[index]
        after = renders([2, 3, 4]) - before
        print("  %s: %d keys warmed on 3 nodes (%d renders); node-4 joined and node-1 stopped: %d keys moved, "
              "%d renders; answers by tier: %s" % (label, KEYS, warmed, moved, after,
                                                    ", ".join("%s %d" % kv for kv in sorted(tiers.items()))))
        check(failed == 0, "%s: every key answered after the change (%d failed)" % (label, failed))
        return {"keys": KEYS, "warmRenders": warmed, "moved": moved, "rendersAfter": after, "tiers": tiers}
    finally:
        cluster("stop", env=run_env)


quiet_failures = []


def check_quiet(ok, what):
    if not ok:
        quiet_failures.append(what)
        check(False, what)


def faults(env, store):
    """A fifth node's cold keys asked while the shared store is frozen, then resumed."""
    state = os.path.join(STATE, "faults")
    run_env = dict(env, CLUSTER_DIR=state)
    os.makedirs(state, exist_ok=True)
    cluster("start", "1", env=run_env)
    try:
        # Node-1 renders every key once: they are all in the bucket.
        for index in range(KEYS):
            get(PORT, image_path(index))
        wait_uploads([1], KEYS)
        cluster("add-node", env=run_env)
        cluster("stop-node", "1", env=run_env)  # node-2 now has every key, none local
        # Each key at its warmed size (in the bucket) and at smaller ones beyond the tolerance
        # (not in it: a lookup, a miss, a render), so that the shared tier is asked throughout.
        work = [(index, side) for side in FAULT_SIDES for index in range(KEYS)]
        latencies, statuses, lock = [], [], threading.Lock()
        next_index = [0]

        def client():
            while True:
                with lock:
                    position = next_index[0]
                    next_index[0] += 1
                if position >= len(work):
                    return
                index, side = work[position]
                started = time.monotonic()
                status, headers, _ = get(PORT, image_path(index, side))
                with lock:
                    latencies.append((time.monotonic() - started, headers.get("X-Strata-Tier"), index))
                    statuses.append(status)

        threads = [threading.Thread(target=client) for _ in range(4)]
        for thread in threads:
            thread.start()
        time.sleep(float(os.environ.get("SHARED_FREEZE_AFTER", "2")))
        store.process.send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        time.sleep(float(os.environ.get("SHARED_FREEZE_SECONDS", "4")))
        store.process.send_signal(signal.SIGCONT)
        resumed_at = time.monotonic()
        for thread in threads:
            thread.join()
        node = stats(node_port(2))
        shared = node.get("shared", {})
        times = sorted(t for t, _, _ in latencies)
        p99 = times[int(len(times) * 0.99) - 1] if times else 0
        by_tier = {}
        for _, tier, _ in latencies:
            by_tier[tier] = by_tier.get(tier, 0) + 1
        print("  %d requests with the store frozen for %.1f s: statuses %s, tiers %s, p50 %.0f ms, p99 %.0f ms, max %.0f ms; "
              "shared tier: %d hits, %d errors, %d skipped" % (
                  len(statuses), resumed_at - frozen_at, sorted(set(statuses)), by_tier,
                  1000 * times[len(times) // 2], 1000 * p99, 1000 * times[-1],
                  shared.get("hits", 0), shared.get("errors", 0), shared.get("skipped", 0)))
        check(all(s == 200 for s in statuses), "no request failed while the store was frozen")
        check(shared.get("errors", 0) >= 1, "the frozen store's timeouts were counted (%d)" % shared.get("errors", 0))
        # Bounded: a lookup waits shared.timeout at most, then renders (a few hundred ms here).
        bound = SHARED_TIMEOUT_MS / 1000 + float(os.environ.get("SHARED_RENDER_BOUND", "3"))
        check(p99 <= bound, "p99 %.2f s within shared.timeout + a render (%.2f s)" % (p99, bound))
        # Resumed: after the pause, lookups go to the store again and hit.
        time.sleep(6)
        hits_before = shared.get("hits", 0)
        cluster("add-node", env=run_env)  # node-3: cold again
        cluster("stop-node", "2", env=run_env)
        back = 0
        for index in range(KEYS):
            status, headers, _ = get(PORT, image_path(index))
            back += headers.get("X-Strata-Tier") == "shared"
        check(back >= KEYS * 0.9, "after the store resumed, a cold node's answers come from it again (%d of %d)" % (back, KEYS))
        return {"requests": len(statuses), "frozenSeconds": round(resumed_at - frozen_at, 2), "p50Ms": round(1000 * times[len(times) // 2]),
                "p99Ms": round(1000 * p99), "maxMs": round(1000 * times[-1]), "byTier": by_tier,
                "sharedErrors": shared.get("errors", 0), "sharedSkipped": shared.get("skipped", 0),
                "sharedHitsDuringFreeze": hits_before, "sharedAnswersAfterResume": back}
    finally:
        cluster("stop", env=run_env)


def main():
    os.makedirs(os.path.join(STATE, "logs"), exist_ok=True)
    originals = Moto(PORT + 2, ["originals"])
    renders_store = Moto(PORT + 3, ["renders"])
    try:
        phase("0. %d originals (%s) in the originals bucket" % (KEYS, FIXTURE))
        originals.upload("originals", [key_name(i) for i in range(KEYS)], os.path.join(REPO, "Fixtures", FIXTURE))
        env = dict(os.environ, AWS_ACCESS_KEY_ID=originals.key_id, AWS_SECRET_ACCESS_KEY=originals.secret,
                   CLUSTER_SOURCE_ARGS="--source-s3-bucket originals --source-s3-endpoint %s" % originals.endpoint)
        shared_args = ("--shared-s3-bucket renders --shared-s3-endpoint %s --shared-s3-access-key-id %s "
                       "--shared-s3-secret-access-key %s --shared-timeout %dms" % (
                           renders_store.endpoint, renders_store.key_id, renders_store.secret, SHARED_TIMEOUT_MS))
        node_args = os.environ.get("CLUSTER_NODE_ARGS", "")
        phase("1a. re-shard without the shared tier")
        without = reshard(dict(env, CLUSTER_NODE_ARGS=node_args), False, "without")
        phase("1b. re-shard with the shared tier")
        moto_cpu = renders_store.cpu_seconds()
        with_shared = reshard(dict(env, CLUSTER_NODE_ARGS=(node_args + " " + shared_args).strip()), True, "with")
        figures["reshard"] = {"without": without, "with": with_shared,
                              "sharedStoreCpuSeconds": round(renders_store.cpu_seconds() - moto_cpu, 2)}
        fall = 1 - with_shared["rendersAfter"] / max(1, without["rendersAfter"])
        figures["reshard"]["renderReduction"] = round(fall, 3)
        check(without["rendersAfter"] > 0, "without the shared tier the moved keys are rendered again (%d renders)" % without["rendersAfter"])
        check(fall >= 0.9, "with it, renders after the change fall by %.0f %% (%d against %d; at least 90 %%)" % (
            100 * fall, with_shared["rendersAfter"], without["rendersAfter"]))
        phase("2. the shared store frozen under load, then resumed")
        figures["faults"] = faults(dict(env, CLUSTER_NODE_ARGS=(node_args + " " + shared_args).strip()), renders_store)
    finally:
        originals.stop()
        renders_store.stop()
    if os.environ.get("SHARED_JSON"):
        with open(os.environ["SHARED_JSON"], "w") as f:
            json.dump(figures, f, indent=2, sort_keys=True)
    print("\n%d checks failed" % len(failures) if failures else "\nevery check passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
