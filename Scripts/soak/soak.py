"""The soak of Scripts/soak.sh (runs in the soak's virtual environment, Pillow 13).

    soak.py originals CACHE            make the originals once into CACHE (kept between runs)
    soak.py port                       print a free TCP port on 127.0.0.1
    soak.py run SETTINGS.json          the load, the oracle, the samples and the verdict
    soak.py plot REPORT.json OUT.png   RSS, open descriptors and p99 over time

Originals (see docs/Reliability.md, "Soak"): every key's pixels are one flat colour, a code of
4096 (16 levels per channel, 8 + 16·i) that no other key or version has, so whatever an answer
is (any size, fill crop, IIIF tile, JPEG/WebP/AVIF/PNG), its mean colour names the key and the
version it was made from, and a spread across its pixels shows a torn or mixed image.
"""

import asyncio
import bisect
import io
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import time

LEVELS = 16
STEP = 16
SEED = 20261126
# Keys per format, and the sizes their originals are drawn from (w, h).
FORMATS = [
    ("jpeg", "jpg", 1000),
    ("png", "png", 400),
    ("webp", "webp", 500),
    ("gif", "gif", 250),
    ("avif", "avif", 200),
    ("heic", "heic", 100),
]
SIZES = [(320, 240), (480, 640), (640, 480), (800, 800), (1024, 768), (1200, 900), (1600, 1200)]
SMALL_SIZES = [(320, 240), (480, 360), (512, 512), (640, 480)]  # AVIF and HEIC: slow encoders
LARGE = [(2048, 1536), (1536, 2048)]  # IIIF keys: several tiles at several levels
IIIF_KEYS = 120
# Broken originals (1 % of requests): each must answer 422 undecodable (docs/HTTP.md).
BROKEN = [
    "broken/truncated-baseline.jpg",
    "broken/truncated-progressive.jpg",
    "broken/corrupt-entropy.jpg",
    "broken/jpeg-header-only.jpg",
    "broken/truncated.webp",
    "broken/garbage.bin",
]
CORRUPT_COPIES = 5  # each broken fixture under this many keys, plus truncated copies of ours


def level(i):
    return 8 + STEP * i


def code_rgb(code):
    return (level(code // 256), level((code // 16) % 16), level(code % 16))


def rgb_code(rgb):
    idx = [min(LEVELS - 1, max(0, round((c - 8) / STEP))) for c in rgb]
    residual = max(abs(c - level(i)) for c, i in zip(rgb, idx))
    return idx[0] * 256 + idx[1] * 16 + idx[2], residual


def encode(fmt, size, rgb, path):
    """Writes a flat image of `rgb` at `size` in `fmt` to `path` (atomically: a hidden temporary
    name beside it, then a rename)."""
    from PIL import Image

    tmp = os.path.join(os.path.dirname(path), f".tmp-{os.getpid()}-{os.path.basename(path)}")
    image = Image.new("RGB", size, rgb)
    if fmt == "jpeg":
        image.save(tmp, "JPEG", quality=92)
    elif fmt == "png":
        image.save(tmp, "PNG")
    elif fmt == "webp":
        image.save(tmp, "WEBP", quality=92)
    elif fmt == "gif":
        image.save(tmp, "GIF")
    elif fmt == "avif":
        image.save(tmp, "AVIF", quality=90, speed=8)
    elif fmt == "heic":
        png = tmp + ".png"
        image.save(png, "PNG")
        subprocess.run(["heif-enc", "-q", "90", "-o", tmp, png], check=True, capture_output=True)
        os.unlink(png)
    else:
        raise ValueError(fmt)
    os.replace(tmp, path)


def plan():
    """The keys, deterministic: (key, format, size, code), in Zipf rank order, and the broken keys."""
    rng = random.Random(SEED)
    codes = list(range(LEVELS**3))
    rng.shuffle(codes)
    keys = []
    for fmt, ext, count in FORMATS:
        for i in range(count):
            if fmt == "jpeg" and i < IIIF_KEYS:
                size = LARGE[i % 2]
            elif fmt in ("avif", "heic"):
                size = rng.choice(SMALL_SIZES)
            else:
                size = rng.choice(SIZES)
            keys.append([f"{fmt}/{i:04d}.{ext}", fmt, list(size), codes.pop()])
    rng.shuffle(keys)  # Zipf ranks mix the formats
    return keys, codes  # the codes left are the replacements'


def make_originals(cache):
    """Makes every original into CACHE/src (skipped when CACHE/plan.json exists)."""
    from concurrent.futures import ProcessPoolExecutor

    if os.path.exists(os.path.join(cache, "plan.json")):
        return
    keys, _ = plan()
    src = os.path.join(cache, "src")
    for fmt, _, _ in FORMATS:
        os.makedirs(os.path.join(src, fmt), exist_ok=True)
    os.makedirs(os.path.join(src, "broken"), exist_ok=True)
    started = time.monotonic()
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        jobs = [pool.submit(encode, fmt, tuple(size), code_rgb(code), os.path.join(src, key)) for key, fmt, size, code in keys]
        for job in jobs:
            job.result()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Fixtures")
    broken = []
    for name in BROKEN:
        with open(os.path.join(root, name), "rb") as f:
            data = f.read()
        base, ext = os.path.splitext(os.path.basename(name))
        ext = ".png" if ext == ".bin" else ext  # garbage under an image's name
        for c in range(CORRUPT_COPIES):
            key = f"broken/{base}-{c}{ext}"
            with open(os.path.join(src, key), "wb") as f:
                f.write(data)
            broken.append(key)
    # Our own originals cut in half (PNG, GIF, AVIF, HEIC): truncated → 422 too.
    for fmt in ("png", "gif", "avif", "heic"):
        for key, f2, _, _ in keys:
            if f2 == fmt:
                with open(os.path.join(src, key), "rb") as f:
                    data = f.read()
                name = f"broken/half-{os.path.basename(key)}"
                with open(os.path.join(src, name), "wb") as f:
                    f.write(data[: len(data) // 2])
                broken.append(name)
                break
    with open(os.path.join(cache, "plan.json"), "w") as f:
        json.dump({"keys": keys, "broken": broken}, f)
    print(f"[soak] {len(keys)} originals and {len(broken)} broken ones made in {time.monotonic() - started:.0f} s", file=sys.stderr)


# ---------------------------------------------------------------- HTTP/1.1 over one connection


# The fixed overhead the soak allows above the configured bytes (docs/Reliability.md, "Memory").
OVERHEAD_BYTES = 96 << 20


def size_bytes(text):
    """'48MiB' → bytes (the units the soak's configuration uses)."""
    text = str(text)
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * (1 << shift))
    return int(text)


def memory_bound(values):
    """The anonymous RSS the configuration allows, or None when render.memoryLimit is not set."""
    if "render.memoryLimit" not in values:
        return None
    # The reloader switches memory.costLimit between 40 and 48 MiB: the higher one.
    caches = max(size_bytes(values["memory.costLimit"]), 48 << 20) + size_bytes(values["http.encodedCacheSize"])
    caches += size_bytes(values.get("render.bufferCacheSize", "64MiB"))
    in_flight = size_bytes(values["render.memoryLimit"])
    return {"caches_bytes": caches, "in_flight_bytes": in_flight, "overhead_bytes": OVERHEAD_BYTES,
            "bound_bytes": caches + in_flight + OVERHEAD_BYTES}


class Connection:
    def __init__(self, port):
        self.port = port
        self.reader = self.writer = None

    async def close(self):
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except Exception:
                pass
        self.reader = self.writer = None

    async def request(self, method, path, headers=None, timeout=60):
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for k, v in (headers or {}).items():
            head += f"{k}: {v}\r\n"
        self.writer.write((head + "\r\n").encode())
        try:
            return await asyncio.wait_for(self._response(method), timeout)
        except BaseException:
            await self.close()
            raise

    async def _response(self, method):
        line = await self.reader.readline()
        if not line:
            raise ConnectionError("connection closed")
        status = int(line.split()[1])
        headers = {}
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        body = b""
        if method != "HEAD" and status not in (204, 304):
            if "content-length" in headers:
                body = await self.reader.readexactly(int(headers["content-length"]))
            elif headers.get("transfer-encoding", "").lower() == "chunked":
                parts = []
                while True:
                    n = int((await self.reader.readline()).split(b";")[0], 16)
                    if n == 0:
                        await self.reader.readline()
                        break
                    parts.append(await self.reader.readexactly(n))
                    await self.reader.readline()
                body = b"".join(parts)
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return status, headers, body


# ---------------------------------------------------------------- the soak


def percentile(values, p):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(math.ceil(p / 100 * len(s))) - 1)]


def proc_sample(pid):
    """RSS, its anonymous and file-backed parts (the disk tier maps files of 256 KiB and more),
    open descriptors and threads of the process."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile", "Threads"):
                fields[name] = int(value.split()[0])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return fields["VmRSS"] * 1024, fields.get("RssAnon", 0) * 1024, fields.get("RssFile", 0) * 1024, fds, fields["Threads"]


def smaps_anonymous(pid):
    """Where the process's anonymous memory is, from /proc/PID/smaps: bytes of `Anonymous:` per
    kind of mapping ([heap], [stack], thread stacks and other unnamed mappings, file mappings'
    private copies), the unnamed ones also by size, so that an overhead can be named."""
    kinds, unnamed = {}, []
    current = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if not head:
                continue
            if "-" in head[0] and not head[0].endswith(":"):
                start, end = (int(x, 16) for x in head[0].split("-"))
                name = head[5] if len(head) > 5 else ""
                kind = name if name.startswith("[") else ("unnamed" if not name else "file")
                current = (kind, end - start)
            elif head[0] == "Anonymous:" and current:
                anon = int(head[1]) * 1024
                kinds[current[0]] = kinds.get(current[0], 0) + anon
                if current[0] == "unnamed" and anon:
                    unnamed.append((current[1], anon))
    by_size = {}
    for size, anon in unnamed:
        bucket = "≥ 64 MiB" if size >= 64 << 20 else "1–64 MiB" if size >= 1 << 20 else "< 1 MiB"
        by_size[bucket] = by_size.get(bucket, 0) + anon
    return {"by_kind": kinds, "unnamed_by_mapping_size": by_size, "unnamed_mappings": len(unnamed)}


def disk_usage(path):
    """(apparent bytes of the published files, of the temporary files being written, bytes
    allocated as du counts them, published files)."""
    published = temporary = allocated = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                st = os.lstat(os.path.join(root, name))
            except FileNotFoundError:
                continue
            allocated += st.st_blocks * 512
            if name.startswith(".strata-tmp-"):
                temporary += st.st_size
            else:
                published += st.st_size
                files += 1
    return published, temporary, allocated, files


class Soak:
    def __init__(self, s):
        self.s = s
        self.port = s["port"]
        self.pid = s["pid"]
        self.minutes = s["minutes"]
        self.duration = self.minutes * 60
        # Sampling: once a minute from 10 minutes on; shorter runs sample six times (3 min: 30 s).
        self.interval = 60 if self.minutes >= 10 else max(10, self.duration / 6)
        # Warm-up: the samples before max(one interval, half the run, at most 10 min) are not
        # judged (RSS climbs while the allocator's arenas reach their peaks).
        self.warmup = max(self.interval, min(600, 0.5 * self.duration))
        self.reload_every = min(60, self.interval)
        self.replace_every = 3.0
        self.revalidate_after = s["revalidate_after_s"]
        self.grace = 10.0
        self.connections = s["connections"]
        self.check_share = 0.25
        self.rng = random.Random(SEED + 1)
        with open(os.path.join(s["cache"], "plan.json")) as f:
            p = json.load(f)
        self.keys = [tuple(k[:2]) + (tuple(k[2]), k[3]) for k in p["keys"]]
        self.broken = p["broken"]
        _, self.spare_codes = plan()
        self.code_owner = {}  # code → (key, version index)
        self.versions = {}  # key → [{code, t0, t1, purge, p1}]
        for key, _, _, code in self.keys:
            self.versions[key] = [{"code": code, "t0": -1e9, "t1": -1e9, "purge": False, "p1": None}]
            self.code_owner[code] = (key, 0)
        self.fmt = {k: f for k, f, _, _ in self.keys}
        self.size = {k: sz for k, _, sz, _ in self.keys}
        # Zipf (s = 1) over the keys in plan order.
        weights = [1 / (r + 1) for r in range(len(self.keys))]
        total = 0.0
        self.cum = []
        for w in weights:
            total += w
            self.cum.append(total)
        self.iiif_keys = [k for k, f, sz, _ in self.keys if max(sz) >= 1536]
        # Replaced while served: the 50 hottest JPEG, PNG, WebP and GIF keys.
        self.replace_pool = [k for k, f, _, _ in self.keys if f in ("jpeg", "png", "webp", "gif")][:50]
        self.late = {}  # (key, version index) → t_recv of the first answer after its window
        self.etag_version = {}  # (key, etag version) → version index
        self.reset_counters()
        self.totals = {
            "requests": 0,
            "by_status": {},
            "unexpected": 0,
            "unexpected_examples": [],
            "checked": 0,
            "wrong": 0,
            "wrong_examples": [],
            "checked_replaced_keys": 0,
            "answers_by_version_age": {},  # "0": the newest version, "1": the one before, …
            "oracle_errors": 0,
            "stale_in_window": 0,
            "stale_late_revalidated": 0,
            "max_residual": 0,
            "max_spread": 0,
            "replacements": 0,
            "purges": 0,
            "reloads": 0,
            "reloads_confirmed": 0,
            "reload_confirm_s_max": 0.0,
            "warm_runs": 0,
            "warm_exit_codes": {},
            "warm_failed_images": 0,
            "warm_unexpected": 0,
            "warm_unexpected_examples": [],
        }
        self.samples = []
        self.stop = False

    def reset_counters(self):
        self.lat = []
        self.n = 0
        self.unexpected_n = 0
        self.wrong_n = 0

    # -------------------------------------------------- requests

    def pick_key(self):
        return self.keys[bisect.bisect_left(self.cum, self.rng.random() * self.cum[-1])][0]

    def next_request(self):
        """(path, headers, expected status, key or None, kind)."""
        r = self.rng.random()
        if r < 0.05:
            return f"/images/missing/{self.rng.randrange(20000):05d}.jpg?w=256", {}, 404, None, "missing"
        if r < 0.06:
            return f"/images/{self.rng.choice(self.broken)}?w=320&h=320", {}, 422, None, "corrupt"
        if r < 0.16:
            key = self.rng.choice(self.iiif_keys)
            return self.iiif_request(key) + (200, key, "iiif")
        key = self.pick_key()
        sizes = [64, 100, 128, 160, 200, 256, 300, 400, 512, 640, 800, 1024]
        w = self.rng.choice(sizes)
        q = self.rng.random()
        if q < 0.3:
            query = f"w={w}&h={self.rng.choice(sizes)}&mode=fill"
        elif q < 0.5:
            query = f"w={w}"
        else:
            query = f"w={w}&h={self.rng.choice(sizes)}"
        f = self.rng.random()
        headers = {}
        if f < 0.3:
            query += "&format=png"
        elif f < 0.55:
            query += "&format=jpeg"
        elif f < 0.75:
            query += "&format=webp"
        elif f < 0.8:
            query += "&format=avif"
        else:
            headers["Accept"] = self.rng.choice(["image/webp,image/*", "image/avif,image/webp,*/*", "*/*"])
        return f"/images/{key}?{query}", headers, 200, key, "images"

    def iiif_request(self, key):
        from urllib.parse import quote

        width, height = self.size[key]
        ident = quote(key, safe="")
        if self.rng.random() < 0.05:
            return f"/iiif/3/{ident}/info.json", {}
        s = self.rng.choice([1, 2, 4])
        side = 512 * s
        tx = self.rng.randrange(math.ceil(width / side))
        ty = self.rng.randrange(math.ceil(height / side))
        x, y = tx * side, ty * side
        rw, rh = min(side, width - x), min(side, height - y)
        ext = self.rng.choice(["jpg", "png", "webp"])
        return f"/iiif/3/{ident}/{x},{y},{rw},{rh}/{math.ceil(rw / s)},/0/default.{ext}", {}

    # -------------------------------------------------- the oracle

    def wrong(self, what, path, detail):
        self.totals["wrong"] += 1
        self.wrong_n += 1
        if len(self.totals["wrong_examples"]) < 20:
            self.totals["wrong_examples"].append({"what": what, "path": path, "detail": detail})
        log(f"WRONG {what}: {path} {detail}")

    def check(self, key, path, headers, body, t_send, t_recv):
        from PIL import Image, ImageStat

        self.totals["checked"] += 1
        try:
            image = Image.open(io.BytesIO(body))
            image.load()
        except Exception as e:
            return self.wrong("undecodable answer", path, str(e))
        if "x-strata-width" in headers and (str(image.width), str(image.height)) != (headers["x-strata-width"], headers.get("x-strata-height")):
            self.wrong("size headers", path, f"{image.size} vs {headers['x-strata-width']}x{headers.get('x-strata-height')}")
        rgb = image.convert("RGB")
        spread = max(hi - lo for lo, hi in rgb.getextrema())
        mean = ImageStat.Stat(rgb).mean
        code, residual = rgb_code(mean)
        self.totals["max_residual"] = max(self.totals["max_residual"], round(residual, 2))
        self.totals["max_spread"] = max(self.totals["max_spread"], spread)
        if spread > 12 or residual > 6:
            return self.wrong("torn or unknown pixels", path, f"mean {[round(m, 1) for m in mean]} spread {spread}")
        owner = self.code_owner.get(code)
        if owner is None:
            return self.wrong("an image no key ever had", path, f"code {code}")
        if owner[0] != key:
            return self.wrong("another key's image", path, f"pixels of {owner[0]} v{owner[1]}")
        v = owner[1]
        versions = self.versions[key]
        etag = headers.get("etag", "").strip('"').split("-")[0]
        if etag:
            seen = self.etag_version.setdefault((key, etag), v)
            if seen != v:
                self.wrong("ETag names another version", path, f"ETag version {etag} was v{seen}, pixels v{v}")
        if len(versions) > 1:
            self.totals["checked_replaced_keys"] += 1
            self.totals["answers_by_version_age"][str(len(versions) - 1 - v)] = self.totals["answers_by_version_age"].get(str(len(versions) - 1 - v), 0) + 1
        if versions[v]["t0"] > t_recv:
            return self.wrong("a version not yet published", path, f"v{v}")
        if v + 1 < len(versions):
            nxt = versions[v + 1]
            if t_recv < nxt["t0"]:  # answered before the replacement began: v was current
                return
            # The replacement's window: renders in flight when the file was renamed or the key purged,
            # then one revalidation period.
            start = nxt["p1"] if nxt["purge"] else nxt["t1"]
            if start is None:  # the new file or its purge is still under way
                self.totals["stale_in_window"] += 1
                return
            end = start + self.revalidate_after + self.grace
            if t_send < end:
                self.totals["stale_in_window"] += 1
                return
            # Later: stale-while-revalidate (a variant read back from disk is young again) may
            # serve it for one more revalidation period from its first late answer, never after.
            first = self.late.setdefault((key, v), t_recv)
            if t_send < first + self.revalidate_after + self.grace:
                self.totals["stale_late_revalidated"] += 1
                return
            self.wrong("an old version after its window", path, f"v{v} of {len(versions) - 1}, {t_send - start:.1f} s after the replacement")

    # -------------------------------------------------- tasks

    async def worker(self, wid):
        conn = Connection(self.port)
        while not self.stop:
            path, headers, expected, key, kind = self.next_request()
            t_send = time.monotonic()
            try:
                status, h, body = await conn.request("GET", path, headers)
            except Exception as e:
                status, h, body = f"error:{type(e).__name__}", {}, b""
            t_recv = time.monotonic()
            self.lat.append(t_recv - t_send)
            self.n += 1
            self.totals["requests"] += 1
            sk = f"{kind}:{status}"
            self.totals["by_status"][sk] = self.totals["by_status"].get(sk, 0) + 1
            if status != expected:
                self.totals["unexpected"] += 1
                self.unexpected_n += 1
                if len(self.totals["unexpected_examples"]) < 20:
                    self.totals["unexpected_examples"].append({"path": path, "status": status, "expected": expected, "body": body[:200].decode("latin-1")})
                log(f"unexpected {status} (expected {expected}): {path} {body[:160]!r}")
                continue
            if status == 200 and key is not None and not path.endswith("info.json"):
                if key in self.replaced or self.rng.random() < self.check_share:
                    try:
                        self.check(key, path, h, body, t_send, t_recv)
                    except Exception as e:  # the oracle's own failure fails the run, never a worker
                        self.totals["oracle_errors"] += 1
                        log(f"oracle error on {path}: {type(e).__name__}: {e}")
        await conn.close()

    async def replacer(self):
        conn = Connection(self.port)
        loop = asyncio.get_running_loop()
        n = 0
        while not self.stop:
            await asyncio.sleep(self.replace_every)
            if self.stop or not self.spare_codes:
                break
            key = self.rng.choice(self.replace_pool)
            code = self.spare_codes.pop()
            versions = self.versions[key]
            purge = n % 2 == 0
            n += 1
            record = {"code": code, "t0": time.monotonic(), "t1": None, "purge": purge, "p1": None}
            self.code_owner[code] = (key, len(versions))
            self.replaced.add(key)
            versions.append(record)  # t0 is set: the oracle allows the new version from now on
            path = os.path.join(self.s["src"], key)
            await loop.run_in_executor(None, encode, self.fmt[key], tuple(self.size[key]), code_rgb(code), path)
            record["t1"] = time.monotonic()
            self.totals["replacements"] += 1
            if purge:
                status, _, _ = await conn.request("DELETE", f"/images/{key}", {"Authorization": f"Bearer {self.s['admin_token']}"})
                if status != 200:
                    self.totals["unexpected"] += 1
                    log(f"purge of {key} answered {status}")
                record["p1"] = time.monotonic()
                self.totals["purges"] += 1
        await conn.close()

    async def stats(self):
        conn = Connection(self.port)
        try:
            status, _, body = await conn.request("GET", "/stats")
        finally:
            await conn.close()
        return json.loads(body) if status == 200 else None

    async def reloader(self):
        """memory.costLimit switched in the configuration file; each switch must show in /stats
        (the file is polled every 5 s) within 30 s. No switch starts in the last 35 s."""
        limits = ["48MiB", "40MiB"]
        n = 0
        while not self.stop:
            await asyncio.sleep(self.reload_every)
            if self.stop or time.monotonic() - self.start > self.duration - 35:
                break
            n += 1
            value = limits[n % 2]
            write_config(self.s["config"], self.s["config_values"] | {"memory.costLimit": value})
            self.totals["reloads"] += 1
            want = parse_size(value)
            t = time.monotonic()
            while time.monotonic() - t < 30:
                stats = await self.stats()
                if stats and find_cost_limit(stats) == want:
                    self.totals["reloads_confirmed"] += 1
                    self.totals["reload_confirm_s_max"] = max(self.totals["reload_confirm_s_max"], round(time.monotonic() - t, 1))
                    break
                await asyncio.sleep(0.5)
            else:
                log(f"reload to memory.costLimit {value} not seen in /stats within 30 s")

    async def warmer(self):
        """`strata warm` beside the server, over the same source and disk directory, again and
        again until the end."""
        sizes = [["--size", "256x256"], ["--size", "512x512", "--mode", "fill"], ["--size", "128x128", "--size", "800x800"]]
        n = 0
        while not self.stop:
            args = [self.s["strata"], "warm", self.s["src"], "--config", self.s["warm_config"], "--in-flight", "2"] + sizes[n % len(sizes)]
            n += 1
            sizes_in_run = args.count("--size")
            proc = await asyncio.create_subprocess_exec(*args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
            self.warm_proc = proc
            report = asyncio.ensure_future(proc.stdout.read())
            while proc.returncode is None and not self.stop:
                try:
                    await asyncio.wait_for(proc.wait(), 1)
                except asyncio.TimeoutError:
                    pass
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                await proc.wait()
                report.cancel()
                break
            self.totals["warm_runs"] += 1
            code = str(proc.returncode)
            self.totals["warm_exit_codes"][code] = self.totals["warm_exit_codes"].get(code, 0) + 1
            self.judge_warm_report((await report).decode(errors="replace"), proc.returncode, sizes_in_run)
            await asyncio.sleep(2)

    def judge_warm_report(self, text, code, sizes_in_run):
        """`strata warm` exits 1 when any image failed: here only the broken originals may, each
        once per size asked. Failures it names outside broken/, more failures than that, or an
        exit status other than 0 or 1 count as unexpected warm failures."""
        failed = 0
        named = []
        for line in text.splitlines():
            if line.startswith("failed:"):
                failed = int(line.split()[1])
            elif line.startswith('  "'):
                named.append(line[3:line.index('"', 3)])
        self.totals["warm_failed_images"] += failed
        unexpected = [name for name in named if not name.startswith("broken/")]
        bound = len(self.broken) * sizes_in_run
        if code not in (0, 1) or unexpected or failed > bound:
            self.totals["warm_unexpected"] += 1
            if len(self.totals["warm_unexpected_examples"]) < 5:
                self.totals["warm_unexpected_examples"].append(
                    {"exit": code, "failed": failed, "bound": bound, "names": unexpected[:3] or named[:3]})

    async def rss_poller(self):
        """RSS every 2 s: each sample's interval median is the level the RSS check judges (one
        reading at the minute is as much the renders in flight at that instant as the memory
        kept: 383-515 MiB over a 60-minute run)."""
        while not self.stop:
            try:
                self.rss_window.append(proc_sample(self.pid)[0])
            except OSError:
                pass
            await asyncio.sleep(2)

    async def sampler(self):
        start = self.start
        k = 0
        while True:
            k += 1
            target = start + k * self.interval
            await asyncio.sleep(max(0, target - time.monotonic()))
            rss, anon, filed, fds, threads = proc_sample(self.pid)
            window = sorted(self.rss_window + [rss])
            self.rss_window = []
            apparent, temporary, allocated, files = disk_usage(self.s["disk"])
            over_first = None
            if apparent > self.s["disk_limit"]:
                # A file strata warm published waits for the server's watcher to see it and evict
                # (milliseconds): over the limit only if it still is a second later.
                over_first = apparent
                await asyncio.sleep(1)
                apparent, temporary, allocated, files = disk_usage(self.s["disk"])
            stats = await self.stats()
            lat = self.lat
            sample = {
                "t_s": round(time.monotonic() - start, 1),
                "warmup": time.monotonic() - start < self.warmup - 0.5,
                "rss_bytes": rss,
                # Over the interval (readings every 2 s and this one): what the RSS check judges.
                "rss_median_bytes": window[len(window) // 2],
                "rss_min_bytes": window[0],
                "rss_max_bytes": window[-1],
                "rss_anon_bytes": anon,
                "rss_file_bytes": filed,
                "fds": fds,
                "threads": threads,
                "disk_bytes": apparent,
                "disk_temporary_bytes": temporary,
                "disk_allocated_bytes": allocated,
                "disk_bytes_first_look": over_first,  # when the first look was over the limit
                "disk_files": files,
                "requests": self.n,
                "rps": round(self.n / self.interval, 1),
                "p50_ms": round(percentile(lat, 50) * 1000, 2) if lat else None,
                "p99_ms": round(percentile(lat, 99) * 1000, 2) if lat else None,
                "unexpected": self.unexpected_n,
                "wrong": self.wrong_n,
                "checked_total": self.totals["checked"],
                "replacements_total": self.totals["replacements"],
                "reloads_total": self.totals["reloads"],
                "memory_cost_limit": find_cost_limit(stats) if stats else None,
                # What the server's disk index holds, beside what the directory holds.
                "disk_index_files": ((stats or {}).get("tiers", {}).get("disk") or {}).get("entries"),
                "disk_index_bytes": ((stats or {}).get("tiers", {}).get("disk") or {}).get("bytes"),
                # The server's own account of its memory by part (builds that report it).
                "memory_use": (stats or {}).get("memoryUse"),
            }
            self.reset_counters()
            self.samples.append(sample)
            log(
                f"t={sample['t_s']:.0f}s rss={rss / 2**20:.1f}MiB (median {window[len(window) // 2] / 2**20:.1f}) fds={fds} threads={threads} disk={apparent / 2**20:.1f}MiB "
                f"rps={sample['rps']} p50={sample['p50_ms']}ms p99={sample['p99_ms']}ms unexpected={sample['unexpected']} "
                f"wrong={sample['wrong']} checked={self.totals['checked']}"
                + (" (warm-up)" if sample["warmup"] else "")
            )
            if k * self.interval >= self.duration - 0.5:
                self.stop = True
                return

    async def main(self):
        self.replaced = set()
        self.warm_proc = None
        self.rss_window = []
        self.start = time.monotonic()
        log(
            f"{self.minutes} min, {self.connections} connections, samples every {self.interval:.0f} s, warm-up {self.warmup:.0f} s, "
            f"a replacement every {self.replace_every:.0f} s, a reload every {self.reload_every:.0f} s"
        )
        workers = [asyncio.create_task(self.worker(i)) for i in range(self.connections)]
        side = [asyncio.create_task(t) for t in (self.replacer(), self.reloader(), self.rss_poller())]
        warmer = asyncio.create_task(self.warmer() if self.s.get("warm", True) else asyncio.sleep(0))
        await self.sampler()
        for result in await asyncio.gather(*workers, return_exceptions=True):
            if isinstance(result, BaseException):
                self.totals["oracle_errors"] += 1
                log(f"a worker died: {type(result).__name__}: {result}")
        for t in side:
            t.cancel()
        await asyncio.gather(*side, warmer, return_exceptions=True)
        # Settled: the load and strata warm stopped 5 s ago; the directory against the server's index.
        await asyncio.sleep(5)
        apparent, temporary, _, files = disk_usage(self.s["disk"])
        stats = await self.stats() or {}
        disk = (stats.get("tiers", {}).get("disk") or {})
        try:
            self.smaps = smaps_anonymous(self.pid)
        except OSError:
            self.smaps = None
        self.settled = {"disk_bytes": apparent, "disk_files": files, "disk_temporary_bytes": temporary,
                        "disk_index_bytes": disk.get("bytes"), "disk_index_files": disk.get("entries")}
        log(f"settled: directory {apparent} bytes in {files} files, the server's index {disk.get('bytes')} bytes in {disk.get('entries')}")
        return self.report()

    def report(self):
        s = self.s
        judged = [x for x in self.samples if not x["warmup"]]
        checks = {}
        if judged:
            base = judged[0]
            # The interval medians: the level of RSS, not one reading's renders in flight. A leak
            # raises the level of the last third of the judged intervals over the first third's;
            # one interval's renders and encodes in flight do not (with pixel buffers returned
            # to the kernel, an interval's median moves by the work in flight: ±20 MiB).
            medians = [x["rss_median_bytes"] for x in judged]
            third = max(1, len(medians) // 3)
            first_level = sorted(medians[:third])[third // 2]
            last_level = sorted(medians[-third:])[third // 2]
            rss_max = max(medians)
            limit_pct = self.s.get("rss_growth_pct", 10)
            checks["rss_within_10pct" if limit_pct == 10 else f"rss_within_{limit_pct:g}pct"] = {
                "pass": last_level <= first_level * (1 + limit_pct / 100),
                "of": "the median of the last third of the interval medians against the first third's",
                "first_third_bytes": first_level,
                "last_third_bytes": last_level,
                "growth_pct": round(100 * (last_level / first_level - 1), 2),
                "first_bytes": base["rss_median_bytes"],
                "max_bytes": rss_max,
                "max_growth_pct": round(100 * (rss_max / base["rss_median_bytes"] - 1), 2),
                "single_readings_growth_pct": round(100 * (max(x["rss_bytes"] for x in judged) / base["rss_bytes"] - 1), 2),
            }
            fd_max = max(x["fds"] for x in judged)
            checks["fds_flat"] = {"pass": fd_max <= base["fds"] + FD_SLACK, "first": base["fds"], "max": fd_max, "slack": FD_SLACK}
            bound = memory_bound(s["config_values"])
            if bound is not None:
                anon = sorted(x["rss_anon_bytes"] for x in judged)
                median = anon[len(anon) // 2]
                checks["anon_rss_within_configuration"] = {
                    "pass": median <= bound["bound_bytes"], "anon_median_bytes": median, "anon_max_bytes": anon[-1], **bound}
            # Threads against the most seen up to the first judged sample: the pools start
            # threads on demand and one instant's count moves by a few (a 3-minute run read
            # 14, 13, 12, 13, 15, 13 with no trend); a leak keeps growing past that.
            th_base = max([x["threads"] for x in self.samples if x["warmup"]] + [base["threads"]])
            th_max = max(x["threads"] for x in judged)
            checks["threads_flat"] = {"pass": th_max <= th_base + THREAD_SLACK, "first": th_base, "max": th_max, "slack": THREAD_SLACK}
        else:
            checks["samples_after_warmup"] = {"pass": False}
        disk_max = max((x["disk_bytes"] for x in self.samples), default=0)
        checks["disk_within_limit"] = {"pass": disk_max <= s["disk_limit"], "limit_bytes": s["disk_limit"], "max_bytes": disk_max}
        checks["no_unexpected_status"] = {"pass": self.totals["unexpected"] == 0, "count": self.totals["unexpected"]}
        checks["no_wrong_image"] = {"pass": self.totals["wrong"] == 0, "count": self.totals["wrong"], "checked": self.totals["checked"]}
        # Every interval after warm-up carried load (a stalled server or generator is no pass),
        # and the oracle itself never failed.
        checks["load_every_interval"] = {"pass": all(x["requests"] > 0 for x in self.samples), "min_requests": min((x["requests"] for x in self.samples), default=0)}
        checks["oracle_ran"] = {"pass": self.totals["oracle_errors"] == 0, "errors": self.totals["oracle_errors"]}
        checks["warm_fails_only_broken_originals"] = {
            "pass": self.totals["warm_runs"] > 0 and self.totals["warm_unexpected"] == 0,
            "runs": self.totals["warm_runs"], "unexpected_runs": self.totals["warm_unexpected"],
            "failed_images": self.totals["warm_failed_images"]}
        checks["reloads_applied"] = {"pass": self.totals["reloads_confirmed"] == self.totals["reloads"], "reloads": self.totals["reloads"], "confirmed": self.totals["reloads_confirmed"]}
        lat_all = [x["p99_ms"] for x in self.samples if x["p99_ms"] is not None]
        return {
            "minutes": self.minutes,
            "date": time.strftime("%Y-%m-%d"),
            "machine": {"cores": os.cpu_count(), "load_average_at_end": os.getloadavg()},
            "settings": {
                "connections": self.connections,
                "sample_interval_s": self.interval,
                "warmup_s": self.warmup,
                "reload_every_s": self.reload_every,
                "replace_every_s": self.replace_every,
                "revalidate_after_s": self.revalidate_after,
                "grace_s": self.grace,
                "check_share": self.check_share,
                "keys": len(self.keys),
                "broken_keys": len(self.broken),
                "server": s["config_values"],
            },
            "totals": self.totals,
            "samples": self.samples,
            "settled": self.settled,
            # The anonymous memory by kind of mapping at the end (/proc/PID/smaps).
            "smaps_anonymous": getattr(self, "smaps", None),
            "p99_ms_max": max(lat_all) if lat_all else None,
            "checks": checks,
            "pass": all(c["pass"] for c in checks.values()),
            # Hook for Scripts/abuse.sh --json (connection limits: http.idleTimeout,
            # http.headerTimeout, http.maxConnections), added by that work; null until then.
            "abuse": None,
        }


FD_SLACK = 16
THREAD_SLACK = 2


def log(msg):
    print(f"[soak] {msg}", file=sys.stderr, flush=True)


def parse_size(text):
    units = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
    for u, m in units.items():
        if text.endswith(u):
            return int(float(text[: -len(u)]) * m)
    return int(text)


def find_cost_limit(stats):
    memory = stats.get("memory") if isinstance(stats, dict) else None
    if isinstance(memory, dict):
        return memory.get("costLimit")
    return None


def write_config(path, values):
    """A nested YAML file of dotted keys (JSON is YAML), replaced atomically."""
    tree = {}
    for key, value in values.items():
        node = tree
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(tree, f, indent=2)
    os.replace(tmp, path)


def run(settings_path):
    with open(settings_path) as f:
        s = json.load(f)
    report = asyncio.run(Soak(s).main())
    with open(s["report"], "w") as f:
        json.dump(report, f, indent=1)
    failed = [name for name, c in report["checks"].items() if not c["pass"]]
    log("PASS" if report["pass"] else f"FAIL: {', '.join(failed)}")
    return 0 if report["pass"] else 1


def plot(report_path, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(report_path) as f:
        r = json.load(f)
    xs = [x["t_s"] / 60 for x in r["samples"]]
    fig, axes = plt.subplots(3, 1, figsize=(8, 6.5), sharex=True)
    series = [
        ("RSS, interval median (MiB)", [x.get("rss_median_bytes", x["rss_bytes"]) / 2**20 for x in r["samples"]]),
        ("open descriptors", [x["fds"] for x in r["samples"]]),
        ("p99 latency (ms)", [x["p99_ms"] for x in r["samples"]]),
    ]
    if all("rss_min_bytes" in x for x in r["samples"]):
        axes[0].fill_between(
            xs, [x["rss_min_bytes"] / 2**20 for x in r["samples"]], [x["rss_max_bytes"] / 2**20 for x in r["samples"]],
            color="tab:blue", alpha=0.15, label="each interval's range (a reading every 2 s)")
    for ax, (label, ys) in zip(axes, series):
        ax.plot(xs, ys, marker="o", markersize=3)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.axvspan(0, r["settings"]["warmup_s"] / 60, color="0.9", label="warm-up")
        ax.set_ylim(0, max([y for y in ys if y is not None] + [1]) * 1.2)
    judged = [x for x in r["samples"] if not x["warmup"]]
    growth = r.get("checks", {}).get("rss_within_10pct", {})
    if judged and "first_third_bytes" in growth:
        axes[0].axhline(growth["first_third_bytes"] / 2**20 * 1.1, color="tab:red", linestyle="--", linewidth=1,
                        label="+10 % of the first third's level (the last third's must stay below)")
    elif judged:
        first = judged[0].get("rss_median_bytes", judged[0]["rss_bytes"])
        axes[0].axhline(first / 2**20 * 1.1, color="tab:red", linestyle="--", linewidth=1, label="+10 % of the first judged median")
    if all("rss_anon_bytes" in x for x in r["samples"]):
        axes[0].plot(xs, [x["rss_anon_bytes"] / 2**20 for x in r["samples"]], color="tab:green", marker=".", markersize=3,
                     label="anonymous RSS")
    bound = r.get("checks", {}).get("anon_rss_within_configuration")
    if bound:
        axes[0].axhline(bound["bound_bytes"] / 2**20, color="tab:purple", linestyle=":", linewidth=1.2,
                        label="configured caches + render.memoryLimit + 96 MiB")
        axes[0].set_ylim(0, max(axes[0].get_ylim()[1], bound["bound_bytes"] / 2**20 * 1.2))
    axes[0].legend(loc="lower right", fontsize="small")
    axes[-1].set_xlabel("minutes")
    verdict = "pass" if r["pass"] else "FAIL"
    fig.suptitle(f"strata serve soak, {r['minutes']} min, {r['totals']['requests']} requests, {r['totals']['checked']} answers checked: {verdict}")
    fig.tight_layout()
    fig.savefig(out, dpi=90)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "originals":
        make_originals(sys.argv[2])
    elif cmd == "port":
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            print(sock.getsockname()[1])
    elif cmd == "run":
        sys.exit(run(sys.argv[2]))
    elif cmd == "plot":
        plot(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown command {cmd}")
