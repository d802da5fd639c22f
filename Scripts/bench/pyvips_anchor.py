#!/usr/bin/env python3
"""Anchor for `strata bench source`: pyvips' in-process thumbnail of the same files.

Usage: python3 Scripts/bench/pyvips_anchor.py [--runs N] [--json] FILE...
Needs `pip install pyvips` and Debian's libvips42. Reports, per file and target long side
(256, 1024), the median milliseconds of pyvips.Image.thumbnail_buffer (bytes already in memory,
the same work as Strata's thumbnail_ms) with libvips' operation cache disabled.
Like Strata by default, it never enlarges (size="down").
"""
import json, statistics, sys, time

import pyvips

def main():
    args = sys.argv[1:]
    runs, as_json, files = 21, False, []
    while args:
        a = args.pop(0)
        if a == "--runs": runs = int(args.pop(0))
        elif a == "--json": as_json = True
        else: files.append(a)
    pyvips.cache_set_max(0)
    rows = []
    for f in files:
        data = open(f, "rb").read()
        for target in (256, 1024):
            times = []
            for i in range(runs + 1):
                t0 = time.perf_counter()
                im = pyvips.Image.thumbnail_buffer(data, target, height=target, size="down")
                im.write_to_memory()
                t1 = time.perf_counter()
                if i: times.append((t1 - t0) * 1e3)
            rows.append({"file": f.split("/")[-1], "target": target, "pyvips_ms": statistics.median(times),
                         "out": f"{im.width}x{im.height}"})
    if as_json:
        print(json.dumps({"results": rows}))
    else:
        for r in rows:
            print(f"{r['file']:<40} {r['target']:>5} {r['pyvips_ms']:8.2f} ms  -> {r['out']}")

main()
