"""Side-by-side check of Strata's thumbor-compatible route against thumbor 7 (Scripts/thumbor-compare.sh).

Runs in .loadtest/venv (thumbor 7.8, Pillow, numpy).

    compare.py port                            print a free TCP port on 127.0.0.1
    compare.py prepare FIXTURES SRC            the photos into SRC (flat), plus wm.png, framed*.png, corrupt.jpg
    compare.py run --thumbor URL --strata URL --key KEY --urls FILE --src SRC
                   [--json FILE] [--thumbor-only] [--strata-prefix P]

`run` signs every line of FILE (Scripts/thumbor/urls.txt, whose header gives the syntax), fetches it
from thumbor, then from Strata (with --thumbor-only: from thumbor a second time), and compares:
  - status: the same on both, and thumbor's the one the line expects (`status: N`, default 200);
  - meta/ URLs: both answers JSON (the target sizes are shown, not judged);
  - images: decoded with Pillow, the same format and width x height, PSNR of Strata's pixels
    against thumbor's (RGBA composited over black and over white, the lower of the two) at least
    30 dB (or the line's `psnr: N`);
  - crops (both W and H given without fit-in, a manual crop, or smart; geometry-neutral filters
    only): each answer's offset in the original (orientation applied, scaled to the answer) by a
    coarse-to-fine search for the least mean squared difference; the two offsets within 2 % of
    the answer's width. With --thumbor-only the estimate is also checked against the crop thumbor's
    meta/ JSON reports for the same URL (within 1 %), which tests the estimator itself;
  - max_bytes(N): when thumbor's answer fits in N bytes, Strata's must too.
Lines marked `expect-differ: REASON` are reported as "differs (REASON)" and do not fail the run
(with --thumbor-only they must agree like every other line).
Output: the markdown table and a summary line on stdout; with --json FILE every measurement
(statuses, sizes, formats, bytes, PSNR, offsets, each server's wall time of the first fetch).
Exit status 0 when nothing failed, 1 otherwise.
"""

import argparse
import base64
import hashlib
import hmac
import io
import json
import math
import os
import re
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request

import numpy as np
from PIL import Image, ImageDraw, ImageOps

PSNR_DEFAULT = 30.0
CROP_TOLERANCE_PCT = 2.0
META_TOLERANCE_PCT = 1.0
FETCH_TIMEOUT_S = 120

FIXTURES = [
    "jpeg/path-2560x1600.jpg",
    "jpeg/fallenleaf-2048x1280-420.jpg",
    "jpeg/eveningglow-1024x640-progressive.jpg",
    "jpeg/kite-800x500-gray.jpg",
    "jpeg/coldripple-1024x640-orientation6.jpg",
    "webp/cups-640x400-alpha.webp",
    "png/red-8x8.png",
]

# thumbor's URL grammar (libthumbor.url.Url, 2.0.2), after the signature.
URL_RE = re.compile(
    r"/?(?:(?P<debug>debug)/)?"
    r"(?:(?P<meta>meta)/)?"
    r"(?:(?P<trim>trim(?::(?:top-left|bottom-right))?(?::\d+)?)/)?"
    r"(?:(?P<crop_left>\d+)x(?P<crop_top>\d+):(?P<crop_right>\d+)x(?P<crop_bottom>\d+)/)?"
    r"(?:(?P<adaptive>adaptive-)?(?P<full>full-)?(?P<fit_in>fit-in)/)?"
    r"(?:(?P<hflip>-)?(?P<width>(?:\d+|orig))?x(?P<vflip>-)?(?P<height>(?:\d+|orig))?/)?"
    r"(?:(?P<halign>left|right|center)/)?"
    r"(?:(?P<valign>top|bottom|middle)/)?"
    r"(?:(?P<smart>smart)/)?"
    r"(?:filters:(?P<filters>.+?\))/)?"
    r"(?P<image>.+)"
)
FILTER_RE = re.compile(r"(\w+)\((.*?)\)")
# Filters after which the answer is still a plain (scaled) crop of the original's luminance.
NEUTRAL_FILTERS = {"quality", "format", "strip_icc", "strip_exif", "focal", "no_upscale", "upscale",
                   "max_bytes", "grayscale", "max_age", "sharpen"}


# ---------------------------------------------------------------- small commands

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare(fixtures, src):
    """The scratch source directory both servers read: flat copies of the fixture photos and three
    made files (wm.png, framed.png, framed-dark.png, corrupt.jpg)."""
    os.makedirs(src, exist_ok=True)
    for f in FIXTURES:
        shutil.copyfile(os.path.join(fixtures, f), os.path.join(src, os.path.basename(f)))
    # A watermark with alpha: a white disc (alpha 200) with a black ring, a translucent blue square.
    wm = Image.new("RGBA", (160, 80), (0, 0, 0, 0))
    d = ImageDraw.Draw(wm)
    d.ellipse((4, 4, 76, 76), fill=(255, 255, 255, 200), outline=(0, 0, 0, 255), width=4)
    d.rectangle((84, 10, 154, 70), fill=(20, 60, 220, 140))
    wm.save(os.path.join(src, "wm.png"))
    # For trim (thumbor cuts to the bounding box of the pixels that differ from the top-left or
    # bottom-right pixel's colour by more than the tolerance):
    # framed.png: a photo inside a pale band (244) inside an uneven white margin. trim cuts the
    # white (to the band, 760x490 at 60,50), trim:top-left:30 the band too (the photo, 680x425 at
    # 100,80).
    with Image.open(os.path.join(fixtures, "jpeg/eveningglow-1024x640-progressive.jpg")) as photo:
        photo = photo.convert("RGB").resize((680, 425), Image.Resampling.LANCZOS)
    canvas = Image.new("RGB", (900, 600), (255, 255, 255))
    ImageDraw.Draw(canvas).rectangle((60, 50, 819, 539), fill=(244, 244, 244))
    canvas.paste(photo, (100, 80))
    canvas.save(os.path.join(src, "framed.png"))
    # framed-dark.png: the photo in an uneven black margin, with a white 2x2 square in the top-left
    # corner. trim (top-left: white) keeps everything; trim:bottom-right (black) cuts the right and
    # bottom margins only (810x495 at 0,0).
    canvas = Image.new("RGB", (900, 600), (0, 0, 0))
    ImageDraw.Draw(canvas).rectangle((0, 0, 1, 1), fill=(255, 255, 255))
    canvas.paste(photo, (130, 70))
    canvas.save(os.path.join(src, "framed-dark.png"))
    # Not an image: a JPEG start and a fixed run of garbage.
    with open(os.path.join(src, "corrupt.jpg"), "wb") as f:
        f.write(b"\xff\xd8\xff\xe0" + bytes((i * 37 + 11) % 256 for i in range(4000)))


# ---------------------------------------------------------------- the URL list

def parse_urls(path):
    cases, group = [], ""
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if not line:
                continue
            if line.startswith("#"):
                m = re.match(r"#\s*-+\s*(.+)$", line)
                if m:
                    group = m.group(1).strip()
                continue
            notes = {}
            if " #" in line:
                line, comment = line.split(" #", 1)
                line = line.strip()
                for item in comment.split(";"):
                    if ":" in item:
                        k, v = item.split(":", 1)
                        notes[k.strip().lower()] = v.strip()
            mode = "signed"
            if line.startswith("@"):
                mode, line = line[1:].split(None, 1)
                if mode not in ("unsafe", "badsig", "nosig", "raw"):
                    raise SystemExit(f"{path}:{number}: unknown directive @{mode}")
            cases.append({
                "line": number,
                "group": group,
                "mode": mode,
                "path": line if mode == "raw" else line.lstrip("/"),
                "expect_status": int(notes.get("status", 200)),
                "psnr_min": float(notes.get("psnr", PSNR_DEFAULT)),
                "expect_differ": notes.get("expect-differ"),
            })
    return cases


def sign(key, path):
    return base64.urlsafe_b64encode(hmac.new(key.encode(), path.encode(), hashlib.sha1).digest()).decode()


def request_path(case, key):
    p, mode = case["path"], case["mode"]
    if mode == "signed":
        return f"/{sign(key, p)}/{p}"
    if mode == "unsafe":
        return f"/unsafe/{p}"
    if mode == "badsig":
        return f"/{sign(key, p + '#wrong')}/{p}"
    if mode == "nosig":
        return f"/{p}"
    return p  # raw


# ---------------------------------------------------------------- fetching and decoding

def fetch(url):
    start = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT_S) as r:
            status, body, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        status, body, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
    except (urllib.error.URLError, OSError) as e:
        return {"status": 0, "error": str(e), "body": b"", "ctype": "", "ms": (time.monotonic() - start) * 1000}
    return {"status": status, "body": body, "ctype": ctype or "", "ms": (time.monotonic() - start) * 1000}


def decode(body):
    try:
        im = Image.open(io.BytesIO(body))
        im.load()
        return im
    except Exception:  # noqa: BLE001 - anything undecodable is reported as such
        return None


def composite(im, background):
    rgba = np.asarray(im.convert("RGBA"), dtype=np.float64)
    alpha = rgba[..., 3:4] / 255.0
    return rgba[..., :3] * alpha + np.array(background, dtype=np.float64) * (1 - alpha)


def psnr(a, b):
    """The lower PSNR (dB) of b against a composited over black and over white; inf when equal."""
    worst = math.inf
    for bg in ((0, 0, 0), (255, 255, 255)):
        mse = float(np.mean((composite(a, bg) - composite(b, bg)) ** 2))
        value = math.inf if mse == 0 else 10 * math.log10(255.0 ** 2 / mse)
        worst = min(worst, value)
    return worst


# ---------------------------------------------------------------- crop offsets

def parse_thumbor(path):
    m = URL_RE.match(path)
    return m.groupdict() if m else None


def filters_of(parts):
    return [name for name, _ in FILTER_RE.findall(parts.get("filters") or "")]


def crop_geometry(parts, src):
    """When the answer to these URL parts is a scaled crop of the original, the base image it is
    cut from (the original with orientation applied, cut to the manual crop), as a luminance array
    with its box in the original; else None."""
    if parts is None or parts["meta"] or parts["trim"] or parts["fit_in"] or parts["hflip"] or parts["vflip"]:
        return None
    names = filters_of(parts)
    if any(n not in NEUTRAL_FILTERS for n in names):
        return None
    manual = parts["crop_left"] is not None
    w, h = parts["width"], parts["height"]
    both = w not in (None, "orig", "0") and h not in (None, "orig", "0")
    if not (both or manual or parts["smart"]):
        return None
    path = os.path.join(src, parts["image"])
    if not os.path.isfile(path):
        return None
    with Image.open(path) as im:
        im = ImageOps.exif_transpose(im)
        if im.mode in ("RGBA", "LA", "PA") or "transparency" in im.info:
            im = Image.alpha_composite(Image.new("RGBA", im.size, (255, 255, 255, 255)), im.convert("RGBA"))
        base = im.convert("L")
    box = (0, 0, base.width, base.height)
    if manual:
        l, t, r, b = (int(parts[k]) for k in ("crop_left", "crop_top", "crop_right", "crop_bottom"))
        l, r = max(0, min(l, base.width)), max(0, min(r, base.width))
        t, b = max(0, min(t, base.height)), max(0, min(b, base.height))
        if r - l < 8 or b - t < 8:
            return None
        box = (l, t, r, b)
        base = base.crop(box)
    if min(base.size) < 16:
        return None
    return {"base": base, "box": box}


def luminance(im):
    if im.mode in ("RGBA", "LA", "PA") or "transparency" in im.info:
        im = Image.alpha_composite(Image.new("RGBA", im.size, (255, 255, 255, 255)), im.convert("RGBA"))
    return np.asarray(im.convert("L"), dtype=np.float32)


def best_offset(hay, needle, xs, ys):
    """The (mse, x, y) among the candidate offsets with the least mean squared difference."""
    nh, nw = needle.shape
    best = (math.inf, 0, 0)
    for y in ys:
        for x in xs:
            d = hay[y:y + nh, x:x + nw] - needle
            mse = float(np.mean(d * d))
            if mse < best[0]:
                best = (mse, x, y)
    return best


def estimate_offset(geometry, answer):
    """The answer's top-left corner in the base image scaled to the answer's scale (answer pixels),
    by a coarse search on images reduced to about 48 px on the short side, then a fine search at
    full size around the coarse minimum. Returns a dict, or None when the answer cannot be a crop."""
    base = geometry["base"]
    w, h = answer.size
    bw, bh = base.size
    scale = max(w / bw, h / bh)
    rw, rh = max(w, round(bw * scale)), max(h, round(bh * scale))
    hay_full = np.asarray(base.resize((rw, rh), Image.Resampling.LANCZOS), dtype=np.float32)
    needle_full = luminance(answer)
    f = max(1, min(w, h) // 48)
    if f > 1:
        hay = np.asarray(Image.fromarray(hay_full).resize((rw // f, rh // f), Image.Resampling.BOX), dtype=np.float32)
        needle = np.asarray(Image.fromarray(needle_full).resize((w // f, h // f), Image.Resampling.BOX), dtype=np.float32)
    else:
        hay, needle = hay_full, needle_full
    mx, my = hay.shape[1] - needle.shape[1], hay.shape[0] - needle.shape[0]
    _, cx, cy = best_offset(hay, needle, range(0, mx + 1), range(0, my + 1))
    mx, my = rw - w, rh - h
    xs = range(max(0, cx * f - 2 * f), min(mx, cx * f + 2 * f) + 1)
    ys = range(max(0, cy * f - 2 * f), min(my, cy * f + 2 * f) + 1)
    mse, x, y = best_offset(hay_full, needle_full, xs, ys)
    return {"x": x, "y": y, "scale": scale, "rmse": math.sqrt(mse), "room": [rw - w, rh - h]}


def meta_offset(meta, geometry, answer_size):
    """The offset of the answer in the scaled base image according to thumbor's meta/ JSON."""
    try:
        ops = meta["thumbor"]["operations"]
    except (KeyError, TypeError):
        return None
    left = top = 0.0
    cur_w, cur_h = geometry["box"][2] - geometry["box"][0], geometry["box"][3] - geometry["box"][1]
    scale = 1.0
    for op in ops:
        if op.get("type") == "crop":
            left += op["left"] / scale
            top += op["top"] / scale
            cur_w, cur_h = op["right"] - op["left"], op["bottom"] - op["top"]
        elif op.get("type") == "resize":
            scale *= float(op["width"]) / cur_w if cur_w else 1.0
            cur_w, cur_h = float(op["width"]), float(op["height"])
        elif op.get("type") in ("flip_horizontally", "flip_vertically", "rotate"):
            return None
    # A manual crop is reported as the first crop, in the original's pixels: the base starts there.
    if geometry["box"][:2] != (0, 0):
        left -= geometry["box"][0]
        top -= geometry["box"][1]
    s = max(answer_size[0] / (geometry["box"][2] - geometry["box"][0]),
            answer_size[1] / (geometry["box"][3] - geometry["box"][1]))
    return {"x": left * s, "y": top * s}


# ---------------------------------------------------------------- the comparison

def short_url(path, mode):
    s = path
    for name in ("path-2560x1600.jpg", "fallenleaf-2048x1280-420.jpg", "eveningglow-1024x640-progressive.jpg",
                 "kite-800x500-gray.jpg", "coldripple-1024x640-orientation6.jpg", "cups-640x400-alpha.webp",
                 "red-8x8.png"):
        stem, ext = name.split("-", 1)[0], name.rsplit(".", 1)[1]
        s = s.replace(name, f"{stem}.{ext}")
    if mode != "signed":
        s = f"{mode}: {s}"
    if len(s) > 72:
        s = s[:69] + "..."
    return s


def describe(answer):
    if answer.get("image") is not None:
        im = answer["image"]
        return f"{im.width}×{im.height} {(im.format or '?').lower()}"
    if answer.get("json") is not None:
        try:
            t = answer["json"]["thumbor"]["target"]
            return f"json {t['width']:g}×{t['height']:g}"
        except (KeyError, TypeError, ValueError):
            return "json"
    if answer["status"] == 200:
        return f"? {answer['ctype'] or 'no type'}"
    return "–"


def interpret(answer, is_meta):
    answer["image"] = answer["json"] = None
    if answer["status"] != 200:
        return
    if is_meta:
        try:
            answer["json"] = json.loads(answer["body"])
        except ValueError:
            pass
    else:
        answer["image"] = decode(answer["body"])


def compare_case(case, args, meta_cache):
    path = request_path(case, args.key)
    t = fetch(args.thumbor + path)
    s = fetch(args.thumbor + path) if args.thumbor_only else fetch(args.strata + args.strata_prefix + path)
    parts = parse_thumbor(case["path"]) if case["mode"] == "signed" else None
    is_meta = bool(parts and parts["meta"])
    interpret(t, is_meta)
    interpret(s, is_meta)
    rec = {
        "line": case["line"], "group": case["group"], "mode": case["mode"], "path": case["path"],
        "request": path, "expect_status": case["expect_status"], "expect_differ": case["expect_differ"],
        "thumbor": {"status": t["status"], "ms": round(t["ms"], 1), "bytes": len(t["body"]), "type": t["ctype"]},
        "strata": {"status": s["status"], "ms": round(s["ms"], 1), "bytes": len(s["body"]), "type": s["ctype"]},
        "size_thumbor": describe(t), "size_strata": describe(s),
        "psnr": None, "psnr_min": case["psnr_min"], "crop": None, "problems": [],
    }
    if t.get("error"):
        rec["thumbor"]["error"] = t["error"]
    if s.get("error"):
        rec["strata"]["error"] = s["error"]
    problems = rec["problems"]
    if t["status"] != case["expect_status"]:
        problems.append(f"thumbor answered {t['status']}, urls.txt expects {case['expect_status']}")
    if t["status"] != s["status"]:
        problems.append(f"status {t['status']} vs {s['status']}")
    elif t["status"] == 200 and is_meta:
        if t["json"] is None or s["json"] is None:
            problems.append("meta/ answer is not JSON")
    elif t["status"] == 200:
        ti, si = t["image"], s["image"]
        if ti is None or si is None:
            problems.append("an answer does not decode as an image")
        else:
            for who, im in (("thumbor", ti), ("strata", si)):
                rec[who].update({"format": (im.format or "").lower(), "width": im.width, "height": im.height,
                                 "mode": im.mode})
            if (ti.format or "") != (si.format or ""):
                problems.append(f"format {ti.format} vs {si.format}")
            if ti.size != si.size:
                problems.append(f"size {ti.width}x{ti.height} vs {si.width}x{si.height}")
            else:
                value = psnr(ti, si)
                rec["psnr"] = None if math.isinf(value) else round(value, 2)
                rec["identical_pixels"] = math.isinf(value)
                if value < case["psnr_min"]:
                    problems.append(f"PSNR {value:.1f} < {case['psnr_min']:g} dB")
            mb = re.search(r"max_bytes\((\d+)\)", case["path"])
            if mb and len(t["body"]) <= int(mb.group(1)) < len(s["body"]):
                problems.append(f"max_bytes: {len(s['body'])} B > {mb.group(1)}")
            geometry = crop_geometry(parts, args.src)
            if geometry is not None and ti.size == si.size:
                crop = {"thumbor": estimate_offset(geometry, ti), "strata": estimate_offset(geometry, si)}
                d = max(abs(crop["thumbor"]["x"] - crop["strata"]["x"]), abs(crop["thumbor"]["y"] - crop["strata"]["y"]))
                crop["delta_pct"] = round(100.0 * d / ti.width, 2)
                if crop["delta_pct"] > CROP_TOLERANCE_PCT:
                    problems.append(f"crop offset differs by {crop['delta_pct']:.1f} % of the width")
                if args.thumbor_only:
                    meta = thumbor_meta(args, case["path"], meta_cache)
                    mo = meta_offset(meta, geometry, ti.size) if meta else None
                    if mo is not None:
                        dm = max(abs(mo["x"] - crop["thumbor"]["x"]), abs(mo["y"] - crop["thumbor"]["y"]))
                        crop["meta"] = {"x": round(mo["x"], 1), "y": round(mo["y"], 1),
                                        "delta_pct": round(100.0 * dm / ti.width, 2)}
                        if crop["meta"]["delta_pct"] > META_TOLERANCE_PCT:
                            problems.append(f"estimated offset ({crop['thumbor']['x']},{crop['thumbor']['y']}) is "
                                            f"{crop['meta']['delta_pct']:.1f} % off thumbor's meta "
                                            f"({mo['x']:.0f},{mo['y']:.0f})")
                rec["crop"] = crop
    thumbor_wrong = bool(problems) and problems[0].startswith("thumbor answered")
    rec["checks_pass"] = not problems
    if case["expect_differ"] and not args.thumbor_only and not thumbor_wrong:
        rec["verdict"] = "differs"
    else:
        rec["verdict"] = "pass" if not problems else "fail"
    return rec


def thumbor_meta(args, path, cache):
    meta_path = "meta/" + path
    if meta_path not in cache:
        r = fetch(args.thumbor + f"/{sign(args.key, meta_path)}/{meta_path}")
        try:
            cache[meta_path] = json.loads(r["body"]) if r["status"] == 200 else None
        except ValueError:
            cache[meta_path] = None
    return cache[meta_path]


def md(text):
    return str(text).replace("|", "\\|")


def table(records, args):
    lines = [
        f"| # | URL | status T/S | size T/S | PSNR dB | crop Δ% | {'verdict'} |",
        "|---:|---|---|---|---:|---:|---|",
    ]
    group = None
    for i, r in enumerate(records, 1):
        if r["group"] != group:
            group = r["group"]
            lines.append(f"| | **{md(group)}** | | | | | |")
        st = f"{r['thumbor']['status']}/{r['strata']['status']}"
        size = r["size_thumbor"] if r["size_thumbor"] == r["size_strata"] else f"{r['size_thumbor']} / {r['size_strata']}"
        if r["psnr"] is not None:
            p = f"{r['psnr']:.1f}"
        elif r.get("identical_pixels"):
            p = "∞"
        else:
            p = ""
        c = f"{r['crop']['delta_pct']:.1f}" if r["crop"] else ""
        if r["verdict"] == "differs":
            v = f"differs ({r['expect_differ']})" + (" — but agreed in this run" if r["checks_pass"] else "")
        elif r["verdict"] == "fail":
            v = "**fail**: " + "; ".join(r["problems"])
        else:
            v = "pass"
        lines.append(f"| {i} | `{md(short_url(r['path'], r['mode']))}` | {st} | {md(size)} | {p} | {c} | {md(v)} |")
    n = len(records)
    passed = sum(r["verdict"] == "pass" for r in records)
    differ = sum(r["verdict"] == "differs" for r in records)
    failed = sum(r["verdict"] == "fail" for r in records)
    summary = f"{n} URLs, {passed} pass, {differ} expected-differ, {failed} fail"
    if args.thumbor_only:
        summary += " (thumbor against itself)"
    return "\n".join(lines), summary, failed


def run(args):
    cases = parse_urls(args.urls)
    records, meta_cache = [], {}
    for n, case in enumerate(cases, 1):
        rec = compare_case(case, args, meta_cache)
        records.append(rec)
        note = "" if rec["verdict"] != "fail" else "  FAIL: " + "; ".join(rec["problems"])
        print(f"[compare] {n}/{len(cases)} {rec['thumbor']['status']}/{rec['strata']['status']} "
              f"{rec['verdict']:<7} {case['path']}{note}", file=sys.stderr)
    text, summary, failed = table(records, args)
    print(text)
    print()
    print(summary)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({
                "thumbor": args.thumbor, "strata": None if args.thumbor_only else args.strata + args.strata_prefix,
                "thumbor_only": args.thumbor_only, "psnr_default_db": PSNR_DEFAULT,
                "crop_tolerance_pct": CROP_TOLERANCE_PCT, "summary": summary, "results": records,
            }, f, indent=1, ensure_ascii=False)
            f.write("\n")
    return 1 if failed else 0


def main(argv):
    if argv[:1] == ["port"]:
        print(free_port())
        return 0
    if argv[:1] == ["prepare"] and len(argv) == 3:
        prepare(argv[1], argv[2])
        return 0
    if argv[:1] == ["run"]:
        p = argparse.ArgumentParser(prog="compare.py run")
        p.add_argument("--thumbor", required=True, help="thumbor's base URL, http://127.0.0.1:PORT")
        p.add_argument("--strata", default="", help="strata serve's base URL")
        p.add_argument("--strata-prefix", default="", help="a path before Strata's thumbor URLs (default none)")
        p.add_argument("--key", required=True, help="the security key of both")
        p.add_argument("--urls", required=True)
        p.add_argument("--src", required=True, help="the source directory both read (for the crop offsets)")
        p.add_argument("--json")
        p.add_argument("--thumbor-only", action="store_true", help="compare thumbor with itself (fetched twice)")
        args = p.parse_args(argv[1:])
        if not args.thumbor_only and not args.strata:
            p.error("--strata is required without --thumbor-only")
        args.strata_prefix = "/" + args.strata_prefix.strip("/") if args.strata_prefix.strip("/") else ""
        return run(args)
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
