#!/usr/bin/env python3
"""Regenerates the derived files under Fixtures/ from the KDE wallpaper photographs.

Source photos: Debian's plasma-workspace-wallpapers package, unpacked so that
`<WALLPAPERS>/<Name>/contents/images/2560x1600.jpg` exists (default WALLPAPERS:
/tmp/wp/x/usr/share/wallpapers; override with the first argument).

    apt-get download plasma-workspace-wallpapers && dpkg-deb -x plasma-workspace-wallpapers_*.deb /tmp/wp/x
    python3 Scripts/make-fixtures.py [WALLPAPERS]

Needs Pillow (with WebP), numpy, and libturbojpeg.so.0 (for the YCCK file, via ctypes).
Every file is checked after it is written (decoded back and compared) so that a fixture
means what Fixtures/README.md says it means. The output is deterministic for a given
Pillow/libwebp/libjpeg-turbo version (no random seeds without a fixed value).
"""
import ctypes
import io
import os
import struct
import sys

import numpy as np
from PIL import Image, ImageChops, ImageDraw, ImageFilter, ImageOps

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Fixtures")
WALL = sys.argv[1] if len(sys.argv) > 1 else "/tmp/wp/x/usr/share/wallpapers"


def photo(name):
    return Image.open(os.path.join(WALL, name, "contents/images/2560x1600.jpg")).convert("RGB")


def out(rel):
    path = os.path.join(ROOT, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


def write(rel, data):
    with open(out(rel), "wb") as f:
        f.write(data)
    print(f"{rel}: {len(data)} bytes")


def jpeg_bytes(img, **kw):
    buf = io.BytesIO()
    img.save(buf, "JPEG", **kw)
    return buf.getvalue()


def webp_bytes(img, **kw):
    buf = io.BytesIO()
    img.save(buf, "WEBP", **kw)
    return buf.getvalue()


def mad(a, b):
    return float(np.abs(np.asarray(a, dtype=np.int16) - np.asarray(b, dtype=np.int16)).mean())


def markers(data):
    """(marker, offset, length) of the JPEG segments before SOS."""
    i, found = 2, []
    while i + 4 <= len(data):
        assert data[i] == 0xFF
        m = data[i + 1]
        n = struct.unpack(">H", data[i + 2:i + 4])[0]
        found.append((m, i, n))
        if m == 0xDA:
            break
        i += 2 + n
    return found


def strip_app14(data):
    for m, i, n in markers(data):
        if m == 0xEE:
            return data[:i] + data[i + 2 + n:]
    raise AssertionError("no APP14 segment")


def main():
    # --- JPEG -------------------------------------------------------------------------
    leaf = photo("FallenLeaf").resize((2048, 1280), Image.LANCZOS)
    data = jpeg_bytes(leaf, quality=85, subsampling="4:2:0")
    write("jpeg/fallenleaf-2048x1280-420.jpg", data)
    chk = Image.open(io.BytesIO(data))
    assert chk.size == (2048, 1280) and not chk.info.get("progressive")
    assert chk.layer[0][1:3] == (2, 2), chk.layer  # 4:2:0: luma sampled 2x2

    glow = photo("EveningGlow").resize((1024, 640), Image.LANCZOS)
    data = jpeg_bytes(glow, quality=85, progressive=True, subsampling="4:2:0")
    write("jpeg/eveningglow-1024x640-progressive.jpg", data)
    assert Image.open(io.BytesIO(data)).info.get("progressive")

    kite = photo("Kite").resize((800, 500), Image.LANCZOS)
    data = jpeg_bytes(kite.convert("L"), quality=85)
    write("jpeg/kite-800x500-gray.jpg", data)
    assert Image.open(io.BytesIO(data)).mode == "L"

    # CMYK: one crop of ColorfulCups, stored three ways, plus its RGB reference (q95 4:4:4).
    cups = photo("ColorfulCups").crop((800, 400, 1440, 800)).resize((320, 200), Image.LANCZOS)
    write("jpeg/cups-320x200-rgb-reference.jpg", jpeg_bytes(cups, quality=95, subsampling="4:4:4"))
    cmyk = cups.convert("CMYK")  # naive: C = 255 - R, ..., K = 0
    # Rebuild K so that all four channels carry information (UCR): K = min(C, M, Y).
    c, m, y, _ = [np.asarray(ch, dtype=np.int16) for ch in cmyk.split()]
    k = np.minimum(np.minimum(c, m), y)
    # C' = (C - K) / (1 - K): keeps (255 - C')(255 - K)/255 == 255 - C
    def ucr(x):
        den = np.maximum(255 - k, 1)
        return np.clip(np.round((x - k) * 255.0 / den), 0, 255).astype(np.uint8)
    cmyk = Image.merge("CMYK", [Image.fromarray(ucr(c)), Image.fromarray(ucr(m)), Image.fromarray(ucr(y)),
                                Image.fromarray(k.astype(np.uint8))])

    # (1) Pillow's CMYK JPEG: Adobe APP14 (transform 0) and inverted values (Photoshop polarity).
    data = jpeg_bytes(cmyk, quality=95)
    assert any(mk == 0xEE for mk, _, _ in markers(data))
    write("jpeg/cups-320x200-cmyk-adobe-inverted.jpg", data)
    assert mad(Image.open(io.BytesIO(data)).convert("RGB"), cups) < 4

    # (2) Plain CMYK: straight (non-inverted) values and no APP14 marker.
    #     Pillow inverts on save, so hand it inverted values and strip the marker.
    plain = strip_app14(jpeg_bytes(ImageChops.invert(cmyk), quality=95))
    assert not any(mk == 0xEE for mk, _, _ in markers(plain))
    write("jpeg/cups-320x200-cmyk-plain.jpg", plain)
    # (Pillow assumes Adobe polarity for every CMYK JPEG, so it decodes this one inverted.)
    assert mad(ImageChops.invert(Image.open(io.BytesIO(plain)).convert("CMYK")).convert("RGB"), cups) < 4

    # (3) YCCK (Adobe APP14 transform 2), inverted values, written by TurboJPEG.
    tj = ctypes.CDLL("libturbojpeg.so.0")
    tj.tjInitCompress.restype = ctypes.c_void_p
    tj.tjCompress2.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                               ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_ulong),
                               ctypes.c_int, ctypes.c_int, ctypes.c_int]
    tj.tjFree.argtypes = [ctypes.c_void_p]
    tj.tjDestroy.argtypes = [ctypes.c_void_p]
    handle = tj.tjInitCompress()
    inverted = ImageChops.invert(cmyk).tobytes()
    buf, size = ctypes.c_void_p(), ctypes.c_ulong(0)
    TJPF_CMYK, TJSAMP_444 = 11, 0
    rc = tj.tjCompress2(handle, inverted, 320, 0, 200, TJPF_CMYK, ctypes.byref(buf), ctypes.byref(size),
                        TJSAMP_444, 95, 0)
    assert rc == 0
    data = ctypes.string_at(buf, size.value)
    tj.tjFree(buf)
    tj.tjDestroy(handle)
    app14 = [(i, n) for mk, i, n in markers(data) if mk == 0xEE]
    assert app14 and data[app14[0][0] + 15] == 2, "expected Adobe transform 2 (YCCK)"
    write("jpeg/cups-320x200-ycck-adobe.jpg", data)
    assert mad(Image.open(io.BytesIO(data)).convert("RGB"), cups) < 4

    # Orientation: one upright 160x96 crop, stored transformed with EXIF Orientation 1...8.
    # Sides are multiples of 16 and quality is 100 (4:4:4), so every file decodes (after its
    # orientation is applied) to almost exactly the upright pixels.
    upright = photo("OneStandsOut").crop((1000, 500, 1640, 884)).resize((160, 96), Image.LANCZOS)
    write("jpeg/orientation-reference-160x96.jpg", jpeg_bytes(upright, quality=100, subsampling="4:4:4"))
    # Transform that turns the *upright* image into the stored one (inverse of the EXIF fix-up).
    to_stored = {1: None, 2: Image.FLIP_LEFT_RIGHT, 3: Image.ROTATE_180, 4: Image.FLIP_TOP_BOTTOM,
                 5: Image.TRANSPOSE, 6: Image.ROTATE_90, 7: Image.TRANSVERSE, 8: Image.ROTATE_270}
    for n in range(1, 9):
        stored = upright if to_stored[n] is None else upright.transpose(to_stored[n])
        exif = Image.Exif()
        exif[0x0112] = n
        data = jpeg_bytes(stored, quality=100, subsampling="4:4:4", exif=exif.tobytes())
        write(f"jpeg/orientation-{n}.jpg", data)
        fixed = ImageOps.exif_transpose(Image.open(io.BytesIO(data)))
        assert fixed.size == (160, 96) and mad(fixed.convert("RGB"), upright) < 1.5, n

    # Grayscale with an orientation (gray JPEGs take their own path through the decoder).
    gray = upright.convert("L")
    write("jpeg/orientation-gray-reference-160x96.jpg", jpeg_bytes(gray, quality=100))
    exif = Image.Exif()
    exif[0x0112] = 8
    data = jpeg_bytes(gray.transpose(to_stored[8]), quality=100, exif=exif.tobytes())
    write("jpeg/orientation-gray-8.jpg", data)
    assert mad(ImageOps.exif_transpose(Image.open(io.BytesIO(data))), gray) < 1.5

    # A larger photo with orientation 6 (stored 640x1024 portrait-rotated), for scaled decodes.
    rot = photo("ColdRipple").resize((1024, 640), Image.LANCZOS)
    exif = Image.Exif()
    exif[0x0112] = 6
    data = jpeg_bytes(rot.transpose(Image.ROTATE_90), quality=85, exif=exif.tobytes())
    write("jpeg/coldripple-1024x640-orientation6.jpg", data)
    assert Image.open(io.BytesIO(data)).size == (640, 1024)

    # --- WebP -------------------------------------------------------------------------
    write("webp/kite-320x200-lossless.webp", webp_bytes(kite.resize((320, 200), Image.LANCZOS), lossless=True))
    write("webp/kite-320x200-lossless-reference.png", (lambda b: (kite.resize((320, 200), Image.LANCZOS).save(b, "PNG"), b.getvalue())[1])(io.BytesIO()))

    # Alpha: a photo crop with a soft elliptical mask (fully transparent corners, opaque centre).
    cup = photo("ColorfulCups").resize((640, 400), Image.LANCZOS)
    mask = Image.new("L", (640, 400), 0)
    ImageDraw.Draw(mask).ellipse((60, 40, 580, 360), fill=255)
    mask = mask.filter(ImageFilter.GaussianBlur(12))
    rgba = cup.copy()
    rgba.putalpha(mask)
    data = webp_bytes(rgba, quality=85, alpha_quality=100)
    write("webp/cups-640x400-alpha.webp", data)
    back = Image.open(io.BytesIO(data))
    assert back.mode == "RGBA" and back.getpixel((0, 0))[3] == 0 and back.getpixel((320, 200))[3] == 255

    # WebP with an EXIF chunk (Orientation 6): the orientation crop stored rotated, lossless.
    exif = Image.Exif()
    exif[0x0112] = 6
    data = webp_bytes(upright.transpose(to_stored[6]), lossless=True, exif=exif.tobytes())
    write("webp/orientation-6-lossless.webp", data)
    assert b"EXIF" in data and Image.open(io.BytesIO(data)).size == (96, 160)
    assert mad(ImageOps.exif_transpose(Image.open(io.BytesIO(data))).convert("RGB"), upright) == 0

    # Animated: three 96x64 frames (different crops), 100 ms each.
    frames = [photo(n).resize((96, 64), Image.LANCZOS) for n in ("Path", "Kite", "FallenLeaf")]
    buf = io.BytesIO()
    frames[0].save(buf, "WEBP", save_all=True, append_images=frames[1:], duration=100, loop=0, quality=90)
    data = buf.getvalue()
    write("webp/animated-96x64-3frames.webp", data)
    assert getattr(Image.open(io.BytesIO(data)), "n_frames", 1) == 3
    write("webp/animated-first-frame-reference.png", (lambda b: (frames[0].save(b, "PNG"), b.getvalue())[1])(io.BytesIO()))

    # --- Broken files -------------------------------------------------------------------
    small = jpeg_bytes(kite, quality=85)
    write("broken/truncated-baseline.jpg", small[: len(small) * 6 // 10])
    prog = open(out("jpeg/eveningglow-1024x640-progressive.jpg"), "rb").read()
    write("broken/truncated-progressive.jpg", prog[: len(prog) // 2])
    # Corrupted entropy-coded data: 64 bytes in the middle of the scan overwritten with a
    # fixed pattern (no 0xFF, so no fake markers); the file keeps its length and its EOI.
    sos = [i for mk, i, n in markers(small) if mk == 0xDA][0]
    mid = sos + (len(small) - sos) // 2
    pattern = bytes((i * 37 + 11) % 255 for i in range(64))
    write("broken/corrupt-entropy.jpg", small[:mid] + pattern + small[mid + 64:])
    wsmall = webp_bytes(kite, quality=80)
    write("broken/truncated.webp", wsmall[: len(wsmall) * 6 // 10])
    write("broken/empty.bin", b"")
    write("broken/garbage.bin", bytes((i * 7919 + 13) % 256 for i in range(4096)))
    write("png/red-8x8.png", (lambda b: (Image.new("RGB", (8, 8), (255, 0, 0)).save(b, "PNG"), b.getvalue())[1])(io.BytesIO()))
    write("broken/jpeg-header-only.jpg", small[:sos])

    # Pixel bombs: valid files whose headers claim a huge size.
    tiny = jpeg_bytes(Image.new("RGB", (16, 16), (90, 120, 200)), quality=90)
    sof = [(i, n) for mk, i, n in markers(tiny) if mk in (0xC0, 0xC2)][0][0]
    bomb = bytearray(tiny)
    struct.pack_into(">HH", bomb, sof + 5, 65000, 65000)  # height, width
    write("broken/bomb-65000x65000.jpg", bytes(bomb))
    wtiny = bytearray(webp_bytes(Image.new("RGB", (16, 16), (90, 120, 200)), quality=90))
    assert wtiny[12:16] == b"VP8 ", wtiny[12:16]
    # VP8 key frame: chunk payload at 20, 3-byte frame tag, start code 9d 01 2a, then 14-bit sizes.
    assert wtiny[23:26] == b"\x9d\x01\x2a"
    struct.pack_into("<HH", wtiny, 26, 16383, 16383)
    write("broken/bomb-16383x16383.webp", bytes(wtiny))
    # PNG: IHDR claims 65000x65000 (CRC recomputed so that the header itself is valid).
    import zlib
    ptiny = bytearray((lambda b: (Image.new("RGB", (16, 16), (90, 120, 200)).save(b, "PNG"), b.getvalue())[1])(io.BytesIO()))
    assert ptiny[12:16] == b"IHDR"
    struct.pack_into(">II", ptiny, 16, 65000, 65000)
    struct.pack_into(">I", ptiny, 29, zlib.crc32(bytes(ptiny[12:29])) & 0xFFFFFFFF)
    write("broken/bomb-65000x65000.png", bytes(ptiny))


if __name__ == "__main__":
    main()
