"""Helpers for Scripts/loadtest.sh (runs in the load test's virtual environment).

    helper.py port                         print a free TCP port on 127.0.0.1
    helper.py urls OUTDIR IMAGE...         write the URL lists (see below) into OUTDIR
    helper.py thumbs SRC DEST IMAGE...     256 px JPEG thumbnails with Pillow (when there is no strata)
    helper.py image PATH FILE [--exact]    FILE (the answer to the thumbor URL PATH) is a whole JPEG
                                           that fits PATH's fit-in box (--exact: its longer side is
                                           the box's); prints WxH, exits 1 otherwise
    helper.py report RESULTS [--json]      the summary table, or the one JSON object

URL lists (one path per line, IMAGE is a path under the source directory, e.g. jpeg/x.jpg):
    warm-strata.txt    /images/IMAGE?w=256&h=256&mode=fit&format=jpeg&quality=Q   (also nginx's)
    warm-thumbor.txt   /unsafe/fit-in/256x256/filters:format(jpeg):quality(Q)/IMAGE
    zoom-strata.txt    every IMAGE × widths 200, 210, … 1200 (height = width, fit), shuffled
    zoom-thumbor.txt   the same requests in the same order, as thumbor URLs
The thumbor lists are also what the strata_thumbor cases send to Strata's thumbor route.
"""

import json
import os
import random
import re
import socket
import sys

THUMB = 256
QUALITY = 80
ZOOM_WIDTHS = range(200, 1201, 10)
ZOOM_SEED = 20250611
CASES = [
    ("nginx", "nginx, static 256 px files"),
    ("floor", "bare NIO (strata-floor), same answers"),
    ("strata_warm", "strata serve, warm"),
    ("thumbor_warm", "thumbor 7, warm"),
    ("strata_thumbor_warm", "strata thumbor route, warm"),
    ("strata_zoom", "strata serve, zoom mix, cold start"),
    ("thumbor_zoom", "thumbor 7, zoom mix, cold start"),
    ("strata_thumbor_zoom", "strata thumbor route, zoom mix, cold start"),
]
# The ratio lines under the table: (title, numerator case, denominator case).
RATIOS = [
    ("strata ÷ bare NIO, warm (Strata's own cost)", "strata_warm", "floor"),
    ("bare NIO ÷ nginx (the stack's cost)", "floor", "nginx"),
    ("strata ÷ nginx, warm", "strata_warm", "nginx"),
    ("strata thumbor route ÷ thumbor, warm", "strata_thumbor_warm", "thumbor_warm"),
    ("strata thumbor route ÷ thumbor, zoom", "strata_thumbor_zoom", "thumbor_zoom"),
]


def strata_url(image, size):
    return f"/images/{image}?w={size}&h={size}&mode=fit&format=jpeg&quality={QUALITY}"


def thumbor_url(image, size):
    return f"/unsafe/fit-in/{size}x{size}/filters:format(jpeg):quality({QUALITY})/{image}"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def urls(outdir, images):
    write_lines(os.path.join(outdir, "warm-strata.txt"), [strata_url(i, THUMB) for i in images])
    write_lines(os.path.join(outdir, "warm-thumbor.txt"), [thumbor_url(i, THUMB) for i in images])
    mix = [(image, width) for image in images for width in ZOOM_WIDTHS]
    random.Random(ZOOM_SEED).shuffle(mix)
    write_lines(os.path.join(outdir, "zoom-strata.txt"), [strata_url(i, w) for i, w in mix])
    write_lines(os.path.join(outdir, "zoom-thumbor.txt"), [thumbor_url(i, w) for i, w in mix])


def thumbs(src, dest, images):
    from PIL import Image, ImageOps

    for image in images:
        with Image.open(os.path.join(src, image)) as im:
            im = ImageOps.exif_transpose(im).convert("RGB")
            im.thumbnail((THUMB, THUMB), Image.Resampling.LANCZOS)
            out = os.path.join(dest, image)
            os.makedirs(os.path.dirname(out), exist_ok=True)
            im.save(out, "JPEG", quality=QUALITY)


def jpeg_size(data):
    """(width, height) of a baseline or progressive JPEG that starts with SOI and ends with EOI."""
    if data[:3] != b"\xff\xd8\xff" or data[-2:] != b"\xff\xd9":
        return None
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if i + 9 > len(data):
                return None
            height = int.from_bytes(data[i + 5 : i + 7], "big")
            width = int.from_bytes(data[i + 7 : i + 9], "big")
            return width, height
        i += 2 + length
    return None


def check_image(path, file, exact):
    box = re.search(r"/fit-in/(\d+)x(\d+)/", path)
    if not box:
        sys.exit(f"{path}: no fit-in box in the URL")
    box_w, box_h = int(box.group(1)), int(box.group(2))
    with open(file, "rb") as f:
        size = jpeg_size(f.read())
    if size is None:
        sys.exit(f"{path}: the answer is not a whole JPEG")
    w, h = size
    ok = 0 < w <= box_w and 0 < h <= box_h and (not exact or w == box_w or h == box_h)
    if not ok:
        sys.exit(f"{path}: the answer is {w}x{h}, which does not fit the box {box_w}x{box_h}"
                 + (" exactly" if exact else ""))
    print(f"{w}x{h}")


def report(results, as_json):
    rows = {}
    for key, _ in CASES:
        path = os.path.join(results, key + ".json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                rows[key] = json.load(f)
        else:
            rows[key] = None
    if as_json:
        out = {
            key: None if r is None else {"rps": r["rps"], "p99_ms": r["p99_ms"], "errors": r["errors"]}
            for key, r in rows.items()
        }
        print(json.dumps(out, separators=(",", ":")))
        return
    print(f"{'case':<44}{'req/s':>11}{'p99 ms':>10}{'errors':>8}{'requests':>10}")
    for key, title in CASES:
        r = rows[key]
        if r is None:
            print(f"{title:<44}{'(not run)':>11}")
        else:
            print(f"{title:<44}{r['rps']:>11.0f}{r['p99_ms']:>10.2f}{r['errors']:>8}{r['requests']:>10}")
    for title, num, den in RATIOS:
        a, b = rows[num], rows[den]
        if a is None or b is None:
            print(f"{title}: (not run)")
        else:
            rps = f"{a['rps'] / b['rps']:.2f}×" if b["rps"] else "—"
            p99 = f"{a['p99_ms'] / b['p99_ms']:.2f}×" if b["p99_ms"] else "—"
            print(f"{title}: req/s {rps}, p99 {p99}")


def main(argv):
    if len(argv) >= 1 and argv[0] == "port":
        print(free_port())
    elif len(argv) >= 3 and argv[0] == "urls":
        urls(argv[1], argv[2:])
    elif len(argv) >= 4 and argv[0] == "thumbs":
        thumbs(argv[1], argv[2], argv[3:])
    elif len(argv) >= 3 and argv[0] == "image":
        check_image(argv[1], argv[2], "--exact" in argv[3:])
    elif len(argv) >= 2 and argv[0] == "report":
        report(argv[1], "--json" in argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
