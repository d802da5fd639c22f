"""Helpers for Scripts/loadtest.sh (runs in the load test's virtual environment).

    helper.py port                         print a free TCP port on 127.0.0.1
    helper.py urls OUTDIR IMAGE...         write the URL lists (see below) into OUTDIR
    helper.py thumbs SRC DEST IMAGE...     256 px JPEG thumbnails with Pillow (when there is no strata)
    helper.py report RESULTS [--json]      the summary table, or the one JSON object

URL lists (one path per line, IMAGE is a path under the source directory, e.g. jpeg/x.jpg):
    warm-strata.txt    /images/IMAGE?w=256&h=256&mode=fit&format=jpeg&quality=Q   (also nginx's)
    warm-thumbor.txt   /unsafe/fit-in/256x256/filters:format(jpeg):quality(Q)/IMAGE
    zoom-strata.txt    every IMAGE × widths 200, 210, … 1200 (height = width, fit), shuffled
    zoom-thumbor.txt   the same requests in the same order, as thumbor URLs
"""

import json
import os
import random
import socket
import sys

THUMB = 256
QUALITY = 80
ZOOM_WIDTHS = range(200, 1201, 10)
ZOOM_SEED = 20250611
CASES = [
    ("nginx", "nginx, static 256 px files"),
    ("strata_warm", "strata serve, warm"),
    ("thumbor_warm", "thumbor 7, warm"),
    ("strata_zoom", "strata serve, zoom mix, cold start"),
    ("thumbor_zoom", "thumbor 7, zoom mix, cold start"),
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
    print(f"{'case':<38}{'req/s':>11}{'p99 ms':>10}{'errors':>8}{'requests':>10}")
    for key, title in CASES:
        r = rows[key]
        if r is None:
            print(f"{title:<38}{'(not run)':>11}")
        else:
            print(f"{title:<38}{r['rps']:>11.0f}{r['p99_ms']:>10.2f}{r['errors']:>8}{r['requests']:>10}")


def main(argv):
    if len(argv) >= 1 and argv[0] == "port":
        print(free_port())
    elif len(argv) >= 3 and argv[0] == "urls":
        urls(argv[1], argv[2:])
    elif len(argv) >= 4 and argv[0] == "thumbs":
        thumbs(argv[1], argv[2], argv[3:])
    elif len(argv) >= 2 and argv[0] == "report":
        report(argv[1], "--json" in argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
