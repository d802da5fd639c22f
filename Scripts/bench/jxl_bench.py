"""JPEG XL against AVIF, WebP and JPEG at equal SSIM, and their encode times (Scripts/bench-jxl.sh).

Each photo of Fixtures/jpeg is rendered by the release `strata decode --size 1024x1024` (the
answer `?w=1024&h=1024` gets); that PNG is the reference. The same command with `--out F.ext
--quality Q` encodes the answer with Strata's encoders (JPEG: libjpeg-turbo; WebP: libwebp; AVIF: libavif/aom
at speed 7; JPEG XL: libjxl at JXLCodec.defaultEffort) at a grid of qualities. Each file is
decoded by its format's reference tool (Pillow for JPEG and WebP, avifdec, djxl) and compared with the
reference: SSIM of BT.601 luma, 11x11 Gaussian window sigma 1.5 (scikit-image's
structural_similarity with gaussian_weights=True, use_sample_covariance=False, data_range=255,
as Benchmarks/Sources/strata-bench/SSIM.swift computes it). Bytes at equal SSIM: the log of the
bytes interpolated linearly in SSIM between the two qualities around the target.

Encode time: CPU time (user + system, from getrusage of the child; wall clock is at the mercy
of whatever else the machine runs), median over ROUNDS interleaved runs of `strata decode` with
`--out` minus the median without (the decode and resize alone), at each format's service
default quality; the encoders are single-threaded, so this is their wall time on an idle core.
Effort: `cjxl -e E --num_threads=0` of the reference PNG at the same distances (CPU time of the
process, the PNG read included), bytes at equal SSIM by effort.
"""

import json
import math
import os
import statistics
import subprocess
import sys
import resource
import tempfile

import numpy as np
from PIL import Image
from skimage.metrics import structural_similarity

STRATA = ".build/release/strata"
PHOTOS = [
    ("path", "Fixtures/jpeg/path-2560x1600.jpg"),
    ("fallenleaf", "Fixtures/jpeg/fallenleaf-2048x1280-420.jpg"),
    ("eveningglow", "Fixtures/jpeg/eveningglow-1024x640-progressive.jpg"),
    ("coldripple", "Fixtures/jpeg/coldripple-1024x640-orientation6.jpg"),
    ("kite (gray)", "Fixtures/jpeg/kite-800x500-gray.jpg"),
]
QUALITIES = {
    "jpeg": [30, 40, 50, 60, 70, 75, 80, 85, 90, 95],
    "webp": [30, 40, 50, 60, 70, 75, 80, 85, 90, 95],
    "avif": [20, 30, 40, 50, 60, 70, 80, 90],
    "jxl": [20, 30, 40, 50, 60, 70, 75, 80, 85, 90, 95],
}
DEFAULT_QUALITY = {"jpeg": 80, "webp": 80, "avif": 60, "jxl": 80}
EFFORTS = [3, 5, 7]
TARGETS = [0.95, 0.98]


def run(args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def luma(path):
    rgb = np.asarray(Image.open(path).convert("RGB"), dtype=np.float64)
    return 0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]


def ssim(reference, path):
    return float(structural_similarity(
        reference, luma(path), gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=255))


def decoded_png(path, fmt, work):
    if fmt in ("jpeg", "webp"):
        return path
    out = os.path.join(work, "decoded.png")
    if fmt == "avif":
        run(["avifdec", "-d", "8", path, out])
    else:
        run(["djxl", path, out, "--bits_per_sample=8"])
    return out


def at_ssim(points, target):
    """Bytes at `target` SSIM from (ssim, bytes) points ordered by quality, or None."""
    for (s0, b0), (s1, b1) in zip(points, points[1:]):
        if min(s0, s1) <= target <= max(s0, s1) and s0 != s1:
            t = (target - s0) / (s1 - s0)
            return math.exp(math.log(b0) + t * (math.log(b1) - math.log(b0)))
    return None


def cpu_seconds(args):
    """The CPU time (user + system, every thread) of a child process running `args`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run(args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def strata_time(photo, out, quality):
    args = [STRATA, "decode", photo, "--size", "1024x1024"]
    if out:
        args += ["--out", out, "--quality", str(quality)]
    return cpu_seconds(args)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    output = sys.argv[2] if len(sys.argv) > 2 else None
    results = {"rounds": rounds, "ssim": "BT.601 luma, 11x11 Gaussian sigma 1.5 (scikit-image)", "photos": []}
    with tempfile.TemporaryDirectory() as work:
        for name, photo in PHOTOS:
            reference_png = os.path.join(work, "reference.png")
            run([STRATA, "decode", photo, "--size", "1024x1024", "--out", reference_png])
            reference = luma(reference_png)
            entry = {"photo": name, "size": list(Image.open(reference_png).size), "curves": {}, "efforts": {}}
            for fmt, qualities in QUALITIES.items():
                curve = []
                for q in qualities:
                    out = os.path.join(work, f"answer.{fmt}")
                    run([STRATA, "decode", photo, "--size", "1024x1024", "--out", out, "--quality", str(q)])
                    curve.append({"quality": q, "bytes": os.path.getsize(out),
                                  "ssim": ssim(reference, decoded_png(out, fmt, work))})
                entry["curves"][fmt] = curve
            for effort in EFFORTS:
                curve = []
                for q in QUALITIES["jxl"]:
                    out = os.path.join(work, "effort.jxl")
                    distance = 0.1 + (100 - q) * 0.09 if q >= 30 else 53 / 3000 * q * q - 23 / 20 * q + 25
                    seconds = cpu_seconds(
                        ["cjxl", reference_png, out, "-d", f"{distance:.4f}", "-e", str(effort), "--num_threads=0"])
                    curve.append({"quality": q, "bytes": os.path.getsize(out), "seconds": seconds,
                                  "ssim": ssim(reference, decoded_png(out, "jxl", work))})
                entry["efforts"][str(effort)] = curve
            # Encode times at the service defaults, interleaved.
            times = {fmt: [] for fmt in ["none"] + list(QUALITIES)}
            for _ in range(rounds):
                for fmt in times:
                    out = None if fmt == "none" else os.path.join(work, f"timed.{fmt}")
                    times[fmt].append(strata_time(photo, out, DEFAULT_QUALITY.get(fmt, 0)))
            base = statistics.median(times["none"])
            entry["decodeResizeSeconds"] = base
            entry["encodeSeconds"] = {fmt: statistics.median(times[fmt]) - base for fmt in QUALITIES}
            for target in TARGETS:
                key = f"bytesAtSSIM{target}"
                entry[key] = {fmt: at_ssim([(p["ssim"], p["bytes"]) for p in entry["curves"][fmt]], target) for fmt in QUALITIES}
                entry[key].update({f"jxl-e{e}": at_ssim([(p["ssim"], p["bytes"]) for p in entry["efforts"][str(e)]], target)
                                   for e in EFFORTS})
            results["photos"].append(entry)
            print(json.dumps({k: entry[k] for k in entry if k not in ("curves", "efforts")}), flush=True)

    def ratio(a, b, key):
        values = [p[key][a] / p[key][b] for p in results["photos"] if p[key][a] and p[key][b]]
        return (statistics.mean(values), len(values)) if values else (None, 0)

    summary = {}
    for target in TARGETS:
        key = f"bytesAtSSIM{target}"
        summary[key] = {
            "jxl/avif": ratio("jxl", "avif", key), "jxl/jpeg": ratio("jxl", "jpeg", key), "avif/jpeg": ratio("avif", "jpeg", key),
            "jxl/webp": ratio("jxl", "webp", key), "webp/jpeg": ratio("webp", "jpeg", key),
            "jxl-e3/jxl-e7": ratio("jxl-e3", "jxl-e7", key), "jxl-e5/jxl-e7": ratio("jxl-e5", "jxl-e7", key),
            "jxl-e3/jxl-e5": ratio("jxl-e3", "jxl-e5", key),
        }
    summary["encodeSeconds"] = {fmt: statistics.mean(p["encodeSeconds"][fmt] for p in results["photos"]) for fmt in QUALITIES}
    summary["cjxlSecondsAtQ80"] = {
        str(e): statistics.mean(next(c["seconds"] for c in p["efforts"][str(e)] if c["quality"] == 80) for p in results["photos"])
        for e in EFFORTS}
    results["summary"] = summary
    print(json.dumps(summary, indent=1))
    if output:
        with open(output, "w") as f:
            json.dump(results, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
