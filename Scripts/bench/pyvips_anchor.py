#!/usr/bin/env python3
"""Anchor for `strata-bench source`: pyvips' in-process thumbnail of the same files.

Usage: python3 Scripts/bench/pyvips_anchor.py [--runs N] [--json] FILE...
Needs `pip install pyvips` and Debian's libvips42. Reports, per file and target long side
(256, 1024), the median milliseconds of pyvips.Image.thumbnail_buffer (bytes already in memory,
the same work as Strata's thumbnail_ms) with libvips' operation cache disabled.
Like Strata by default, it never enlarges (size="down").
It also reports resize_ms: the resampler alone, as `strata-bench resample` times it at DCT 1/1
(the full decode, already in memory, reduced to the same long side): Image.resize with
kernel lanczos3 into memory, libvips' own pipeline (its box pre-shrink included). The decoded
image has the file's bands (3 for an opaque JPEG; Strata resamples 4-byte pixels).
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
            thumb_ms, out = statistics.median(times), f"{im.width}x{im.height}"
            full = pyvips.Image.new_from_buffer(data, "").copy_memory()
            scale = min(1.0, target / max(full.width, full.height))
            times = []
            for i in range(runs + 1):
                t0 = time.perf_counter()
                small = full.resize(scale, kernel="lanczos3")
                small.write_to_memory()
                t1 = time.perf_counter()
                if i: times.append((t1 - t0) * 1e3)
            rows.append({"file": f.split("/")[-1], "target": target, "pyvips_ms": thumb_ms, "out": out,
                         "resize_ms": statistics.median(times), "resize_out": f"{small.width}x{small.height}",
                         "bands": full.bands})
    if as_json:
        print(json.dumps({"results": rows}))
    else:
        for r in rows:
            print(f"{r['file']:<40} {r['target']:>5} thumbnail {r['pyvips_ms']:8.2f} ms -> {r['out']:<10}"
                  f" resize {r['resize_ms']:8.2f} ms -> {r['resize_out']} ({r['bands']} bands)")

main()
