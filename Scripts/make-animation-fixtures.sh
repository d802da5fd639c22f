#!/usr/bin/env bash
# Makes Fixtures/gif/leaves-160x100-anim.gif, its Pillow references (Fixtures/reference/
# leaves-anim-80x50-f<N>.rgba: each frame as Pillow composes it, resized to 80×50 with LANCZOS,
# raw RGBA; a disposed rectangle transparent, as browsers show it) and the same frames as an
# animated WebP with alpha (Fixtures/webp/
# leaves-160x100-anim-alpha.webp, Pillow's lossless encode). Needs vips (libvips-tools), gifsicle and a Python with Pillow (PILLOW_PYTHON,
# default /tmp/strata-pyvips/bin/python: `python3 -m venv /tmp/strata-pyvips &&
# /tmp/strata-pyvips/bin/pip install pillow`).
#
# The animation: crops of the FallenLeaf fixture on a 160×100 screen — the whole screen; a
# 100×60 frame at (30, 20) with a transparent disc, cleared after it shows (disposal
# background: the canvas keeps a transparent hole); an 80×50 frame at (0, 0), restored away
# after it shows (disposal previous); a 60×40 frame at (100, 60). Delays 70, 130, 1100 and
# 30 ms; three loops.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PILLOW_PYTHON:-/tmp/strata-pyvips/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
photo=Fixtures/jpeg/fallenleaf-2048x1280-420.jpg
vips resize "$photo" "$work/small.v" 0.125
vips crop "$work/small.v" "$work/f1.png" 0 0 160 100
vips crop "$work/small.v" "$work/f3.png" 96 60 80 50
vips crop "$work/small.v" "$work/f4.png" 40 30 60 40
# The second frame: a 100×60 window with a white disc punched in it, white made transparent.
vips crop "$work/small.v" "$work/f2.v" 50 40 100 60
vips draw_circle "$work/f2.v" "255 255 255" 50 30 22 --fill
vips copy "$work/f2.v" "$work/f2.png"
for f in f1 f2 f3 f4; do vips gifsave "$work/$f.png" "$work/$f.gif"; done
gifsicle --no-warnings --transparent '#FFFFFF' "$work/f2.gif" -o "$work/f2t.gif"
mkdir -p Fixtures/gif
gifsicle --no-warnings --loopcount=3 --logical-screen 160x100 \
    --delay=7 --position=0,0 "$work/f1.gif" \
    --delay=13 --disposal=background --position=30,20 "$work/f2t.gif" \
    --delay=110 --disposal=previous --position=0,0 "$work/f3.gif" \
    --delay=3 --disposal=none --position=100,60 "$work/f4.gif" \
    -o Fixtures/gif/leaves-160x100-anim.gif
"$python" - <<'EOF'
from PIL import Image
im = Image.open("Fixtures/gif/leaves-160x100-anim.gif")
print("frames", im.n_frames, "loop", im.info.get("loop"))
frames, durations = [], []
for i in range(im.n_frames):
    im.seek(i)
    frame = im.convert("RGBA")
    # Pillow fills a disposed rectangle with the background colour, opaque; browsers (and
    # Strata) leave it transparent: the hole the second frame leaves is made transparent here.
    if i >= 2:
        for y in range(20, 80):
            for x in range(30, 130):
                if frame.getpixel((x, y))[:3] == (0, 0, 0):
                    frame.putpixel((x, y), (0, 0, 0, 0))
    print("frame", i, "duration", im.info.get("duration"))
    frames.append(frame)
    durations.append(im.info.get("duration"))
    open(f"Fixtures/reference/leaves-anim-80x50-f{i}.rgba", "wb").write(frame.resize((80, 50), Image.LANCZOS).tobytes())
# The same frames as an animated WebP with alpha, lossless (Pillow's libwebp): its own encoder's
# sub-frames, blending and disposal.
frames[0].save("Fixtures/webp/leaves-160x100-anim-alpha.webp", save_all=True, append_images=frames[1:],
               duration=durations, loop=3, lossless=True)
check = Image.open("Fixtures/webp/leaves-160x100-anim-alpha.webp")
print("webp frames", check.n_frames, "loop", check.info.get("loop"))
EOF
