#!/usr/bin/env python3
"""Anchor for the HEIC render figure (Scripts/bench-heic.sh): pillow-heif's decode + resize of
the same files, in process, from bytes already in memory.

Usage: python3 Scripts/bench/pillow_heif_anchor.py [--runs N] [--target PX] FILE...
Needs `pip install pillow-heif pillow` (a venv: PyPI's wheels bundle their own libheif and
libde265). Reports, per file, the median milliseconds of:
- resize: open, decode the primary image, Image.resize to the target's fit with LANCZOS;
- thumbnail: open, decode the primary image, Image.thumbnail (Pillow's own fast path: a box
  reduce to within 2x, then the filter), the call most Pillow code makes;
- thumb+resize: the smallest embedded thumbnail whose sides are at least twice the target's fit
  (the same rule as Strata's renderer, headroom 2), decoded and resized with LANCZOS; absent
  when the file has none that large.
"""
import io, statistics, sys, time

import pillow_heif
from PIL import Image


def fit(size, target):
    w, h = size
    s = min(1.0, target / max(w, h))
    return max(1, round(w * s)), max(1, round(h * s))


def timed(runs, body):
    times = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        out = body()
        t1 = time.perf_counter()
        if i:
            times.append((t1 - t0) * 1e3)
    return statistics.median(times), out


def main():
    args = sys.argv[1:]
    runs, target, files = 15, 1024, []
    while args:
        a = args.pop(0)
        if a == "--runs": runs = int(args.pop(0))
        elif a == "--target": target = int(args.pop(0))
        else: files.append(a)
    print(f"pillow-heif {pillow_heif.__version__} (libheif {pillow_heif.libheif_info()['libheif']}), Pillow {Image.__version__}")
    for f in files:
        data = open(f, "rb").read()

        def resize():
            heif = pillow_heif.open_heif(io.BytesIO(data))
            im = heif.to_pillow()
            return im.resize(fit(im.size, target), Image.LANCZOS)

        def thumbnail():
            heif = pillow_heif.open_heif(io.BytesIO(data))
            im = heif.to_pillow()
            im.thumbnail((target, target), Image.LANCZOS)
            return im

        heif = pillow_heif.open_heif(io.BytesIO(data))
        out = fit(heif.size, target)
        boxes = sorted(heif[0].info.get("thumbnails", []))
        index = {b: i for i, b in enumerate(heif[0].info.get("thumbnails", []))}
        usable = [b for b in boxes if b >= 2 * max(out)]

        def thumb_resize():
            heif = pillow_heif.open_heif(io.BytesIO(data))
            im = heif[0].get_thumbnail(index[usable[0]]).to_pillow()
            return im.resize(out, Image.LANCZOS)

        rows = [("resize", resize), ("thumbnail", thumbnail)]
        if usable:
            rows.append((f"thumb{usable[0]}+resize", thumb_resize))
        for name, body in rows:
            ms, im = timed(runs, body)
            print(f"  {f}: pillow-heif {name:18s} {ms:8.2f} ms  -> {im.size[0]}x{im.size[1]}")


if __name__ == "__main__":
    main()
