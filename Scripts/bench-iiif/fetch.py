#!/usr/bin/env python3
"""Fetches a list of paths from one HTTP server with a few concurrent keep-alive connections,
like a browser filling a screen of tiles, and prints `ms=<wall> ok=<n> errors=<n> max_ms=<slowest>`
(the slowest single request, from its send to the end of its body).

Usage: fetch.py HOST PORT WORKERS PATHS-FILE [FIRST-PATH]
FIRST-PATH (e.g. the info.json) is fetched alone before the list, inside the timing.
"""
import http.client
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

host, port, workers, paths_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
first = sys.argv[5] if len(sys.argv) > 5 else None
with open(paths_file) as handle:
    paths = [line.strip() for line in handle if line.strip()]
local = threading.local()


slowest = [0.0]


def get(path):
    began = time.perf_counter()
    try:
        return fetch(path)
    finally:
        slowest[0] = max(slowest[0], (time.perf_counter() - began) * 1000)


def fetch(path):
    for attempt in range(2):
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = http.client.HTTPConnection(host, port, timeout=120)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            return 200 <= response.status < 300
        except (http.client.HTTPException, OSError):
            connection.close()
            local.connection = None
            if attempt:
                return False
    return False


start = time.perf_counter()
results = []
if first:
    results.append(get(first))
with ThreadPoolExecutor(max_workers=workers) as pool:
    results.extend(pool.map(get, paths))
elapsed = (time.perf_counter() - start) * 1000
print(f"ms={elapsed:.1f} ok={sum(results)} errors={len(results) - sum(results)} max_ms={slowest[0]:.1f}")
