#!/usr/bin/env python3
"""Anchor for `strata-bench operations`: the same operations in pyvips, in process.

Usage: python3 Scripts/bench/pyvips_operations.py [--runs N] [--json] FILE
Needs `pip install pyvips` and Debian's libvips42. The photo is decoded once into memory
(copy_memory, 3 bands: libvips keeps an opaque JPEG as RGB, where Strata holds 4-byte pixels);
each operation is then run --runs times into memory with libvips' operation cache disabled and
its default concurrency (the machine's cores), and the median reported:
gaussblur (sigma 2 and 5, min_ampl 0.01: the 3-sigma kernel Strata uses), sharpen (sigma 1,
its default curve), find_trim (threshold 10, the background the corner's colour) of the photo
framed in a 64-pixel border, gravity centre to 3000x2000 (embed), composite2 of
Fixtures/webp/cups-640x400-alpha.webp over the bottom-right corner in scRGB (linear light, as
Strata composites) encoded back to sRGB, rot d90 and flip horizontal.
"""
import json, statistics, sys, time

import pyvips

def main():
    args = sys.argv[1:]
    runs, as_json, files = 15, False, []
    while args:
        a = args.pop(0)
        if a == "--runs": runs = int(args.pop(0))
        elif a == "--json": as_json = True
        else: files.append(a)
    pyvips.cache_set_max(0)
    photo = pyvips.Image.new_from_file(files[0]).copy_memory()
    framed = photo.embed(64, 64, photo.width + 128, photo.height + 128,
                         extend="background", background=[250, 250, 250]).copy_memory()
    import os
    mark = pyvips.Image.new_from_file(os.path.join(os.path.dirname(files[0]), "..", "webp", "cups-640x400-alpha.webp")).copy_memory()
    def watermark():
        linear = photo.composite2(mark, "over", x=photo.width - mark.width - 16, y=photo.height - mark.height - 16,
                                  compositing_space="scrgb")
        return linear.colourspace("srgb")
    def trim():
        framed.find_trim(threshold=10, background=[250, 250, 250])
        return None
    operations = [
        ("blur_2", lambda: photo.gaussblur(2, min_ampl=0.01)),
        ("blur_5", lambda: photo.gaussblur(5, min_ampl=0.01)),
        ("sharpen_1", lambda: photo.sharpen(sigma=1)),
        ("trim", trim),
        ("pad", lambda: photo.gravity("centre", 3000, 2000, extend="background")),
        ("watermark", watermark),
        ("turn", lambda: photo.rot("d90")),
        ("flip", lambda: photo.flip("horizontal")),
    ]
    results = {}
    for name, op in operations:
        times = []
        for i in range(runs + 1):
            t0 = time.perf_counter()
            out = op()
            if out is not None:
                out.write_to_memory()
            t1 = time.perf_counter()
            if i: times.append((t1 - t0) * 1e3)
        results[name] = statistics.median(times)
    if as_json:
        print(json.dumps({"file": files[0].split("/")[-1], "bands": photo.bands, "runs": runs, "ms": results}))
    else:
        for name, _ in operations:
            print(f"{name:<12} {results[name]:8.2f} ms")

main()
