#!/usr/bin/env python3
"""Reference thumbnails for Strata's resampler quality target, made with Pillow.

The reference for a thumbnail of long side S is Pillow's Lanczos resize of the FULL decode:
    Image.open(f).convert("RGB").resize((w, h), Image.LANCZOS)
(Pillow's Lanczos support grows with the reduction factor, i.e. a true antialiasing filter.)

Commands:
  write   [--jpeg F] [--out DIR]           write the committed references (raw RGB, no header):
            path-lanczos-256x160.rgb              the whole 256 px thumbnail
            path-lanczos-1024x640-crop-<x>-<y>-<w>x<h>.rgb  a centre window of the 1024 px one
                                                  (the whole one would be 1.9 MB)
  psnr    CANDIDATE --size WxH [--jpeg F]   PSNR (dB, over R, G, B) of a candidate against the
                                            reference computed on the fly. CANDIDATE is raw
                                            RGB (w*h*3 bytes), raw BGRA/BGRx (w*h*4 bytes,
                                            tightly packed) or any image Pillow opens.
  sources [--jpeg F] [--out DIR]           (dev only) raw RGB of the full decode and of
                                            Pillow's draft (DCT-scaled) decodes, for scratch
                                            experiments; never commit these.
  time    [--jpeg F]                        Pillow's resize timings, as an anchor for
                                            `strata-bench resample`.
"""
import argparse
import math
import os
import sys
import timeit

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_JPEG = os.path.join(ROOT, "Fixtures", "jpeg", "path-2560x1600.jpg")
DEFAULT_OUT = os.path.join(ROOT, "Fixtures", "reference")


def fit_size(src, long_side):
    w, h = src
    s = long_side / max(w, h)
    return max(1, round(w * s)), max(1, round(h * s))


def full_decode(path):
    return Image.open(path).convert("RGB")


def reference(path, size):
    return full_decode(path).resize(size, Image.LANCZOS)


def psnr_bytes(a, b):
    assert len(a) == len(b), (len(a), len(b))
    se = sum((x - y) * (x - y) for x, y in zip(a, b))
    if se == 0:
        return math.inf
    mse = se / len(a)
    return 10 * math.log10(255 * 255 / mse)


def load_candidate(path, size):
    w, h = size
    data = open(path, "rb").read()
    if len(data) == w * h * 3:
        return data
    if len(data) == w * h * 4:  # BGRA / BGRx, tightly packed
        out = bytearray(w * h * 3)
        out[0::3] = data[2::4]
        out[1::3] = data[1::4]
        out[2::3] = data[0::4]
        return bytes(out)
    im = Image.open(path).convert("RGB")
    assert im.size == size, (im.size, size)
    return im.tobytes()


def cmd_write(args):
    os.makedirs(args.out, exist_ok=True)
    src = full_decode(args.jpeg)
    small = src.resize(fit_size(src.size, 256), Image.LANCZOS)
    name = "path-lanczos-%dx%d.rgb" % small.size
    open(os.path.join(args.out, name), "wb").write(small.tobytes())
    print("wrote", name, small.size)
    big = src.resize(fit_size(src.size, 1024), Image.LANCZOS)
    cw, ch = 384, 240
    cx, cy = (big.size[0] - cw) // 2, (big.size[1] - ch) // 2
    crop = big.crop((cx, cy, cx + cw, cy + ch))
    name = "path-lanczos-%dx%d-crop-%d-%d-%dx%d.rgb" % (big.size + (cx, cy, cw, ch))
    open(os.path.join(args.out, name), "wb").write(crop.tobytes())
    print("wrote", name)


def cmd_psnr(args):
    w, h = (int(v) for v in args.size.lower().split("x"))
    ref = reference(args.jpeg, (w, h)).tobytes()
    cand = load_candidate(args.candidate, (w, h))
    print("%.2f" % psnr_bytes(ref, cand))


def cmd_sources(args):
    os.makedirs(args.out, exist_ok=True)
    src = full_decode(args.jpeg)
    open(os.path.join(args.out, "full-%dx%d.rgb" % src.size), "wb").write(src.tobytes())
    for scale in (2, 4, 8):
        im = Image.open(args.jpeg)
        im.draft("RGB", (src.size[0] // scale, src.size[1] // scale))
        im = im.convert("RGB")
        open(os.path.join(args.out, "draft-%dx%d.rgb" % im.size), "wb").write(im.tobytes())
    for side in (256, 1024):
        ref = src.resize(fit_size(src.size, side), Image.LANCZOS)
        open(os.path.join(args.out, "ref-%dx%d.rgb" % ref.size), "wb").write(ref.tobytes())
    print("wrote sources to", args.out)


def cmd_time(args):
    src = full_decode(args.jpeg)
    rgba = src.convert("RGBA")
    quarter = rgba.resize((640, 400), Image.LANCZOS)
    cases = [("640x400 -> 256x160", quarter, (256, 160)),
             ("2560x1600 -> 256x160", rgba, (256, 160)),
             ("2560x1600 -> 1024x640", rgba, (1024, 640))]
    for label, im, size in cases:
        n = 20 if im.size[0] < 1000 else 5
        t = min(timeit.repeat(lambda: im.resize(size, Image.LANCZOS), number=n, repeat=3)) / n
        print("pillow RGBA lanczos %-22s %7.2f ms" % (label, t * 1000))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write"); w.add_argument("--jpeg", default=DEFAULT_JPEG); w.add_argument("--out", default=DEFAULT_OUT)
    q = sub.add_parser("psnr"); q.add_argument("candidate"); q.add_argument("--size", required=True); q.add_argument("--jpeg", default=DEFAULT_JPEG)
    s = sub.add_parser("sources"); s.add_argument("--jpeg", default=DEFAULT_JPEG); s.add_argument("--out", default="/tmp/strata-quality")
    t = sub.add_parser("time"); t.add_argument("--jpeg", default=DEFAULT_JPEG)
    args = p.parse_args()
    {"write": cmd_write, "psnr": cmd_psnr, "sources": cmd_sources, "time": cmd_time}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
