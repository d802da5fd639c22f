#!/usr/bin/env python3
"""Load for Scripts/cgroup-limit.sh: the zoom mix and a deep zoom into a big original, at once.

    load.py HOST PORT SECONDS CONNECTIONS PHOTOS BIG_KEY BIG_WIDTH BIG_HEIGHT

CONNECTIONS - 2 persistent HTTP/1.1 connections send the zoom mix (every photo at the widths
200, 210, ... 1200 px, fit in a square, JPEG, in a seeded shuffled order, over and over); 2 more
ask for the big original's info.json and then its tiles (512 px regions at every level, seeded
random order), which makes the server build its tile pyramid while it renders the mix. Each
connection sends its next request when the last is answered, until SECONDS have passed.

Prints one JSON object: requests, statuses, 503s without Retry-After, connection errors.
"""
import http.client
import json
import random
import sys
import threading
import time

host, port, seconds, connections = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
photos = sys.argv[5].split(",")
big, big_w, big_h = sys.argv[6], int(sys.argv[7]), int(sys.argv[8])

rng = random.Random(46)
zoom = [f"/images/{p}?w={w}&h={w}&format=jpeg" for p in photos for w in range(200, 1201, 10)]
rng.shuffle(zoom)
tiles = [f"/iiif/3/{big}/info.json"]
region = 512
scale = 1
while big_w // scale >= 256:
    span = region * scale
    for y in range(0, big_h, span):
        for x in range(0, big_w, span):
            w, h = min(span, big_w - x), min(span, big_h - y)
            tiles.append(f"/iiif/3/{big}/{x},{y},{w},{h}/{max(1, w // scale)},/0/default.jpg")
    scale *= 2
rest = tiles[1:]
rng.shuffle(rest)
tiles = tiles[:1] + rest

lock = threading.Lock()
totals = {"requests": 0, "statuses": {}, "shed_without_retry_after": 0, "connection_errors": 0, "error_examples": []}
deadline = time.monotonic() + seconds


def worker(urls, offset):
    conn = None
    i = offset
    while time.monotonic() < deadline:
        url = urls[i % len(urls)]
        i += 1
        try:
            if conn is None:
                conn = http.client.HTTPConnection(host, port, timeout=120)
            conn.request("GET", url)
            response = conn.getresponse()
            response.read()
            status, retry = response.status, response.getheader("Retry-After")
            if response.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except Exception as error:  # noqa: BLE001 - every failure is counted and shown
            with lock:
                totals["connection_errors"] += 1
                if len(totals["error_examples"]) < 5:
                    totals["error_examples"].append(f"{url}: {error!r}")
            if conn is not None:
                conn.close()
            conn = None
            time.sleep(0.2)
            continue
        with lock:
            totals["requests"] += 1
            totals["statuses"][str(status)] = totals["statuses"].get(str(status), 0) + 1
            if status == 503 and retry is None:
                totals["shed_without_retry_after"] += 1
            if status not in (200, 503) and len(totals["error_examples"]) < 5:
                totals["error_examples"].append(f"{url}: {status}")


threads = [threading.Thread(target=worker, args=(zoom, n * 97)) for n in range(max(1, connections - 2))]
threads += [threading.Thread(target=worker, args=(tiles, n * 31)) for n in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(totals))
