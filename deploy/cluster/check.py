#!/usr/bin/env python3
"""The checks of deploy/cluster/test.sh, against a cluster that cluster.sh starts and stops.

Each check prints what it expected and what it measured; any failed check makes the exit
status 1. Python's standard library only.

Workload: K keys (K names of one 160×96 JPEG fixture, served by the origin nginx), each asked
at its own size — raw BGRA, 61 440 bytes in the memory tier, no resampling: the debug build CI
runs resamples slowly, and placement and hit ratios do not depend on it.
A node's memory tier holds M = K/3 of them (memory.fileMappingShare 1: a disk hit mapped
into memory costs its bytes too), so the working set is three times one node's memory.

Phases:
  1. one node with 3·M (the reference) and one node with M: hit ratio under uniform random
     requests after a warm-up; with uniform requests a cache's hit ratio is the share of the
     keys it holds, so the prediction is min(1, C/N).
  2. three nodes with M each behind the router: each key always on the same node; the
     cluster's hit ratio against Σ share_i · min(1, C/(share_i·K)) (within 0.06), and that
     prediction against the reference (within 0.2: the ring's shares vary with the ports).
  3. node-2 is stopped (SIGTERM) while requests are in flight: they finish; afterwards only
     node-2's keys move (nginx retries them on the next node: none fails); the other nodes
     keep their keys and their hit ratio.
  4. node-2 is started again with its disk directory: its keys come back to it, each
     answered from its disk tier on the first request.
  5. a fourth node joins: only keys that move to it move, about 1/4 of them.
  6. node-3 is killed (SIGKILL) while requests are in flight: nginx retries them on the next
     node, none fails; restarted, node-3 serves its keys from the disk files it had published.
  7. per-node cost figures from /stats: bytes per cached image in memory and on disk.
"""

import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "cluster.sh")
STATE = os.environ["CLUSTER_DIR"]
ORIGINALS = os.environ["CLUSTER_ORIGIN_ROOT"]
PORT = int(os.environ.get("CLUSTER_PORT", "18400"))
KEYS = int(os.environ.get("CHECK_KEYS", "180"))
RANDOM_REQUESTS = int(os.environ.get("CHECK_REQUESTS", "900"))
WIDTH, HEIGHT = 160, 96
IMAGE_BYTES = WIDTH * HEIGHT * 4
PER_NODE = KEYS // 3  # images one node's memory tier holds
FIXTURES = ["jpeg/orientation-reference-160x96.jpg"]

failures = []


STARTED = time.monotonic()


def phase(title):
    print("\n[%5.1f s] %s" % (time.monotonic() - STARTED, title), flush=True)


def check(ok, what):
    print(("  ok    " if ok else "  FAIL  ") + what, flush=True)
    if not ok:
        failures.append(what)


def cluster(*args, env_extra=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    subprocess.run([CLUSTER, *args], check=True, env=env, stdout=subprocess.DEVNULL)


class Client:
    """One keep-alive connection. With `retry`, a request whose connection the peer had closed
    (the router's workers close idle connections when it reloads) is sent once more on a new
    one, and counted in `reconnects`; without, that is an error like any other."""

    reconnects = 0

    def __init__(self, port, retry=True):
        self.port = port
        self.retry = retry
        self.connection = None

    def get(self, path):
        for attempt in range(2 if self.retry else 1):
            try:
                if self.connection is None:
                    self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                self.connection.request("GET", path)
                response = self.connection.getresponse()
                body = response.read()
                return response.status, response.headers, body
            except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
                self.connection = None
                if attempt == 1 or not self.retry:
                    raise
                Client.reconnects += 1
        raise AssertionError("unreachable")


def key_name(index):
    return "k%03d-%s" % (index, os.path.basename(FIXTURES[index % len(FIXTURES)]))


def image_path(index, size=None, exact=False):
    width, height = (WIDTH, HEIGHT) if size is None else (size, size)
    path = "/images/%s?w=%d&h=%d&format=raw" % (key_name(index), width, height)
    return path + "&exact=1" if exact else path


def make_origin():
    """K names in the origin's directory, each a link to one of the fixtures."""
    root = ORIGINALS
    os.makedirs(root, exist_ok=True)
    fixtures = os.path.abspath(os.path.join(HERE, "..", "..", "Fixtures"))
    for index in range(KEYS):
        link = os.path.join(root, key_name(index))
        if not os.path.lexists(link):
            os.symlink(os.path.join(fixtures, FIXTURES[index % len(FIXTURES)]), link)
    return root


def fetch(client, index, **kwargs):
    status, headers, body = client.get(image_path(index, **kwargs))
    return status, headers.get("X-Strata-Node"), headers.get("X-Strata-Tier"), len(body)


def warm(client):
    """Every key once, in order; returns {key index: node}."""
    nodes = {}
    for index in range(KEYS):
        status, node, _, size = fetch(client, index)
        check_quiet(status == 200 and size == IMAGE_BYTES, "warm-up %s: status %d, %d bytes" % (key_name(index), status, size))
        nodes[index] = node
    return nodes


quiet_failures = []


def check_quiet(ok, what):
    """A per-request check: only failures are printed (the first ten)."""
    if not ok:
        quiet_failures.append(what)
        if len(quiet_failures) <= 10:
            print("  FAIL  " + what, flush=True)
        failures.append(what)


def random_requests(client, seed, count=RANDOM_REQUESTS, keys=None):
    """Uniform random requests; returns [(index, node, tier)]."""
    rng = random.Random(seed)
    keys = list(range(KEYS)) if keys is None else keys
    answers = []
    for _ in range(count):
        index = rng.choice(keys)
        status, node, tier, size = fetch(client, index)
        check_quiet(status == 200 and size == IMAGE_BYTES, "%s: status %d, %d bytes" % (key_name(index), status, size))
        answers.append((index, node, tier))
    return answers


def hit_ratio(answers):
    return sum(1 for _, _, tier in answers if tier == "memory") / max(1, len(answers))


def stats(port):
    status, _, body = Client(port).get("/stats")
    return json.loads(body)


def node_port(number):
    return PORT + 10 + number


def memory_args(images):
    return {"CLUSTER_NODE_ARGS": "--memory-cost-limit %d --memory-file-mapping-share 1" % (images * IMAGE_BYTES)}


def single_node(images, seed):
    """One node whose memory holds `images` images: its hit ratio under uniform requests."""
    cluster("start", "1", env_extra=memory_args(images))
    try:
        client = Client(PORT)
        warm(client)
        random_requests(client, seed, count=RANDOM_REQUESTS // 3)  # settle
        answers = random_requests(client, seed + 1)
        memory = stats(node_port(1))["tiers"]["memory"]
        return hit_ratio(answers), memory
    finally:
        cluster("stop")
        subprocess.run(["rm", "-rf", os.path.join(STATE, "node-1")], check=True)


def stop_under_traffic(number, keys, sig):
    """Sends `sig` to node `number` while four clients ask it for cold renders (exact sizes not
    asked before: a resample each, tens of milliseconds in the debug build) of `keys`, so that
    some are in flight when the signal lands; no new request is sent after it. Waits until the
    node has exited. Returns (errors, [(node, answered after the signal)])."""
    errors = []
    finished = []
    stop = threading.Event()
    signalled = [float("inf")]

    def traffic(seed):
        rng = random.Random(seed)
        mine = Client(PORT, retry=False)  # a dropped connection is a failed request here
        while not stop.is_set():
            index = rng.choice(keys)
            try:
                status, node, _, _ = fetch(mine, index, size=rng.randrange(100, 150), exact=True)
                finished.append((node, time.monotonic() > signalled[0]))
                if status != 200:
                    errors.append("%s: status %d" % (key_name(index), status))
            except Exception as error:  # noqa: BLE001 - any failure is the finding
                errors.append("%s: %r" % (key_name(index), error))

    threads = [threading.Thread(target=traffic, args=(seed + 10 * number,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    with open(os.path.join(STATE, "pids", "node-%d.pid" % number)) as pidfile:
        pid = int(pidfile.read())
    signalled[0] = time.monotonic()
    os.kill(pid, sig)
    stop.set()
    cluster("stop-node", str(number))  # waits until the node has exited
    for thread in threads:
        thread.join()
    return errors, finished


def come_back(number, keys):
    """Asks for `keys` (those of node `number`, just restarted) through the router until node
    `number` answers each of them. nginx sends a node traffic again once `fail_timeout` has
    passed since its last failure; a connection that failed with the old process (SIGKILL) can
    restart that clock, so a key answered by another node meanwhile is asked again after
    another `fail_timeout` (at most three rounds). Returns (answered by the node, rounds, tiers
    of each key's first answer from the node)."""
    name = "node-%d" % number
    waiting = list(keys)
    tiers = {}
    rounds = 0
    client = Client(PORT)
    while waiting and rounds < 3:
        rounds += 1
        time.sleep(3.5)  # the router's fail_timeout (3s)
        left = []
        for index in waiting:
            status, node, tier, _ = fetch(client, index)
            if status == 200 and node == name:
                tiers[tier] = tiers.get(tier, 0) + 1
            else:
                left.append(index)
        waiting = left
    return len(keys) - len(waiting), rounds, tiers


def main():
    make_origin()
    print("Workload: %d keys, one 160x96 variant each (%d bytes raw); a node's memory tier holds %d of them "
          "(memory.costLimit %d, memory.fileMappingShare 1)" % (KEYS, IMAGE_BYTES, PER_NODE, PER_NODE * IMAGE_BYTES))

    phase("1. One node: the reference (3x memory) and one node's memory alone")
    reference, reference_memory = single_node(3 * PER_NODE, seed=1)
    check(reference_memory["bytes"] <= 3 * PER_NODE * IMAGE_BYTES,
          "the memory tier stays within its limit: %d bytes in %d images" % (reference_memory["bytes"], reference_memory["entries"]))
    print("  one node, 3x memory (%d images): hit ratio %.3f (predicted min(1, %d/%d) = 1.000)"
          % (3 * PER_NODE, reference, 3 * PER_NODE, KEYS))
    alone, _ = single_node(PER_NODE, seed=1)
    print("  one node, 1x memory (%d images): hit ratio %.3f (predicted %d/%d = %.3f)"
          % (PER_NODE, alone, PER_NODE, KEYS, PER_NODE / KEYS))
    check(reference >= 0.95, "one node holding the whole working set hits >= 0.95 (%.3f)" % reference)
    check(abs(alone - PER_NODE / KEYS) <= 0.08, "one node with 1x memory hits about 1/3 (%.3f)" % alone)

    phase("2. Three nodes behind nginx's consistent hash, 1x memory each")
    cluster("start", "3", env_extra=memory_args(PER_NODE))
    client = Client(PORT)
    owner = warm(client)
    second = warm(client)
    check(owner == second, "a second pass finds every key on the same node")
    shares = {}
    for node in owner.values():
        shares[node] = shares.get(node, 0) + 1
    print("  keys per node: %s" % ", ".join("%s %d" % kv for kv in sorted(shares.items())))
    check(sorted(shares) == ["node-1", "node-2", "node-3"], "every node owns keys")
    random_requests(client, 2, count=RANDOM_REQUESTS // 3)  # settle
    answers = random_requests(client, 3)
    moved = [a for a in answers if a[1] != owner[a[0]]]
    check(not moved, "%d random requests: every key served by its node (%d elsewhere)" % (len(answers), len(moved)))
    predicted = sum(count / KEYS * min(1.0, PER_NODE / count) for count in shares.values())
    measured = hit_ratio(answers)
    by_node = {}
    for node in shares:
        mine = [a for a in answers if a[1] == node]
        by_node[node] = hit_ratio(mine)
        print("  %s: %d keys, hit ratio %.3f (predicted min(1, %d/%d) = %.3f)"
              % (node, shares[node], by_node[node], PER_NODE, shares[node], min(1.0, PER_NODE / shares[node])))
    print("  cluster hit ratio %.3f; predicted from the shares %.3f; one node with 3x memory %.3f; one node alone %.3f"
          % (measured, predicted, reference, alone))
    check(abs(measured - predicted) <= 0.06, "the cluster's hit ratio is the prediction within 0.06")
    # The ring's shares depend on the nodes' addresses, and test.sh picks random ports: with three
    # nodes ketama gives each about 1/3 ± 0.1 of the keys, and a node given more than it holds
    # costs the cluster exactly its excess (the prediction above). So the comparison with the
    # reference is made on the shares, with room for that spread (a fixed 0.12 failed when a
    # node drew 83 of the 180 keys: predicted and measured 0.872).
    check(predicted >= reference - 0.2,
          "the ring's shares leave the cluster within 0.2 of one node with three times the memory (%.3f)" % predicted)

    phase("3. node-2 stops (SIGTERM) with requests in flight")
    node2_keys = [i for i, n in owner.items() if n == "node-2"]
    other_keys = [i for i, n in owner.items() if n != "node-2"]
    errors, finished = stop_under_traffic(2, node2_keys, signal.SIGTERM)
    drained = sum(1 for node, late in finished if late and node == "node-2")
    check(not errors, "%d requests, %d failed%s" % (len(finished), len(errors), (": " + errors[0]) if errors else ""))
    check(drained >= 1, "%d request(s) in flight on node-2 at SIGTERM finished there with 200" % drained)
    order = other_keys[:]
    random.Random(4).shuffle(order)
    stayed = 0
    for index in order:
        status, node, _, _ = fetch(client, index)
        check_quiet(status == 200, "%s after the stop: status %d" % (key_name(index), status))
        stayed += node == owner[index]
    check(stayed == len(other_keys), "node-1's and node-3's %d keys stay where they were (%d did)" % (len(other_keys), stayed))
    after = random_requests(client, 5, count=2 * RANDOM_REQUESTS // 3, keys=other_keys)
    for node in ("node-1", "node-3"):
        ratio = hit_ratio([a for a in after if a[1] == node])
        check(ratio >= by_node[node] - 0.08, "%s's hit ratio stays: %.3f before, %.3f after" % (node, by_node[node], ratio))
    refused = 0
    went = {}
    for index in node2_keys:
        status, node, _, _ = fetch(client, index)
        if status != 200:
            refused += 1
        went[node] = went.get(node, 0) + 1
    check(refused == 0 and "node-2" not in went,
          "node-2's %d keys are served by the others (%s), %d failed"
          % (len(node2_keys), ", ".join("%s %d" % kv for kv in sorted(went.items())), refused))

    phase("4. node-2 starts again with its disk directory")
    started = time.monotonic()
    cluster("start-node", "2", env_extra=memory_args(PER_NODE))
    up = time.monotonic() - started
    back, rounds, tiers = come_back(2, node2_keys)
    check(back == len(node2_keys), "node-2's %d keys are served by node-2 again (%d, in %d round(s))" % (len(node2_keys), back, rounds))
    check(tiers.get("disk", 0) == len(node2_keys),
          "each answered from node-2's disk on its first request (%s); node-2 answered /healthz %.2f s after its start"
          % (", ".join("%s %d" % kv for kv in sorted(tiers.items())), up))

    phase("5. node-4 joins")
    cluster("add-node", env_extra=memory_args(PER_NODE))
    now = {}
    for index in range(KEYS):
        status, node, _, _ = fetch(client, index)
        check_quiet(status == 200, "%s after the join: status %d" % (key_name(index), status))
        now[index] = node
    moved = [i for i in range(KEYS) if now[i] != owner[i]]
    to_new = [i for i in moved if now[i] == "node-4"]
    print("  %d of %d keys moved (%.3f; 1/4 = 0.250), %d of them to node-4" % (len(moved), KEYS, len(moved) / KEYS, len(to_new)))
    check(len(to_new) == len(moved), "every key that moved went to the new node")
    check(0.12 <= len(moved) / KEYS <= 0.40, "about 1/4 of the keys moved")
    # node-4 now holds only the workload's images: their cost per tier.
    joined = stats(node_port(4))["tiers"]
    per_image = {tier: joined[tier]["bytes"] // max(1, joined[tier]["entries"]) for tier in ("memory", "disk")}

    phase("6. node-3 crashes (SIGKILL) with requests in flight, and starts again")
    node3_keys = [i for i, n in now.items() if n == "node-3"]
    errors, finished = stop_under_traffic(3, node3_keys, signal.SIGKILL)
    retried = sum(1 for node, late in finished if late and node != "node-3")
    check(not errors, "%d requests, %d failed%s; %d answered after the kill by another node (nginx's retry)"
          % (len(finished), len(errors), (": " + errors[0]) if errors else "", retried))
    cluster("start-node", "3", env_extra=memory_args(PER_NODE))
    back, rounds, tiers = come_back(3, node3_keys)
    check(back == len(node3_keys) and tiers.get("disk", 0) == len(node3_keys),
          "after the crash node-3 serves its %d keys again (%d, in %d round(s)), each from its disk on its first request (%s)"
          % (len(node3_keys), back, rounds, ", ".join("%s %d" % kv for kv in sorted(tiers.items()))))

    phase("7. Per-node figures")
    for number in (1, 2, 3, 4):
        s = stats(node_port(number))
        memory = s["tiers"]["memory"]
        disk = s["tiers"].get("disk", {"entries": 0, "bytes": 0})
        print("  node-%d (/stats node %s): memory %d images, %d bytes; disk %d files, %d bytes"
              % (number, s["node"], memory["entries"], memory["bytes"], disk["entries"], disk["bytes"]))
        check(s["node"] == "node-%d" % number, "node-%d's /stats names it" % number)
    print("  per cached %dx%d image (node-4 after it joined, holding only these): memory %d bytes, disk %d bytes (pixels %d)"
          % (WIDTH, HEIGHT, per_image["memory"], per_image["disk"], IMAGE_BYTES))
    _, _, metrics = Client(node_port(1)).get("/metrics")
    check(b'node="node-1"' in metrics, "node-1's /metrics series carry node=\"node-1\"")

    print("\nrequests sent again on a new connection after the router closed an idle one: %d" % Client.reconnects)
    print("\n%d check(s) failed" % len(failures) if failures else "\nall checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        code = main()
    finally:
        subprocess.run([CLUSTER, "stop"], env=dict(os.environ), stdout=subprocess.DEVNULL)
    sys.exit(code)
