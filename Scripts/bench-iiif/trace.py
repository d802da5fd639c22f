#!/usr/bin/env python3
"""OpenSeadragon-style deep-zoom tile trace for the IIIF benchmark (Scripts/bench-iiif.sh).

Usage: trace.py TILE VIEW_W VIEW_H PAN_STEPS NAME:WIDTHxHEIGHT ...

For each photo a 1024×768 viewer (by default) opens at the home zoom (whole image fitted),
then zooms in on the centre by factors of two down to full resolution, then pans a few
steps at full resolution. At each zoom it requests, like OpenSeadragon, the tiles of every
level from the coarsest (the whole image in one tile) down to the level whose resolution
covers the screen, restricted to the visible region; a tile already fetched for that photo
is not fetched again (the browser keeps it). Levels are power-of-two scale factors s; a
tile of level s covers TILE·s image pixels, clipped at the edges, and is asked for as
`/{x},{y},{w},{h}/{ceil(w/s)},/0/default.jpg`.

Writes `NAME<TAB>PATH-SUFFIX<TAB>KIND` lines to stdout, KIND being `home` for the tiles of
the first screen (the home level of the first zoom) and `zoom` otherwise.
"""
import math
import sys


def level_tiles(width, height, tile, s, left, top, right, bottom):
    span = tile * s
    x0, y0 = max(0, int(left // span)), max(0, int(top // span))
    x1 = min(math.ceil(width / span) - 1, int((right - 1) // span))
    y1 = min(math.ceil(height / span) - 1, int((bottom - 1) // span))
    for ty in range(y0, y1 + 1):
        for tx in range(x0, x1 + 1):
            x, y = tx * span, ty * span
            w, h = min(span, width - x), min(span, height - y)
            yield f"{x},{y},{w},{h}/{math.ceil(w / s)},/0/default.jpg"


def trace(width, height, tile, view_w, view_h, pan_steps):
    coarsest = 1
    while max(width, height) / coarsest > tile:
        coarsest *= 2
    home = min(view_w / width, view_h / height)
    zooms = []
    z = home
    while z < 1:
        zooms.append(z)
        z *= 2
    zooms.append(1.0)
    cx, cy = width / 2, height / 2
    views = [(z, cx, cy) for z in zooms]
    # Pan at full resolution: half a screen right and down, then back left past the centre.
    moves = [(view_w / 2, view_h / 2), (-view_w, 0), (0, -view_h), (view_w, 0)]
    for i in range(pan_steps):
        dx, dy = moves[i % len(moves)]
        cx = min(max(cx + dx, view_w / 2), width - view_w / 2)
        cy = min(max(cy + dy, view_h / 2), height - view_h / 2)
        views.append((1.0, cx, cy))
    seen = set()
    for index, (z, vx, vy) in enumerate(views):
        half_w, half_h = view_w / z / 2, view_h / z / 2
        left, top = max(0, vx - half_w), max(0, vy - half_h)
        right, bottom = min(width, vx + half_w), min(height, vy + half_h)
        finest = 1
        while finest * 2 <= 1 / z:
            finest *= 2
        s = coarsest
        while s >= finest:
            for path in level_tiles(width, height, tile, s, left, top, right, bottom):
                if path not in seen:
                    seen.add(path)
                    yield path, ("home" if index == 0 and s == finest else "zoom")
            s //= 2


def main():
    tile, view_w, view_h, pan_steps = (int(a) for a in sys.argv[1:5])
    for spec in sys.argv[5:]:
        name, size = spec.rsplit(":", 1)
        width, height = (int(v) for v in size.split("x"))
        for path, kind in trace(width, height, tile, view_w, view_h, pan_steps):
            print(f"{name}\t{path}\t{kind}")


if __name__ == "__main__":
    main()
