"""Draws docs/benchmarks.png from benchmark JSON files.

    python Scripts/plot-benchmarks.py [--dir docs/bench] [--out docs/benchmarks.png]

Reads every *.json in the folder and sorts them by what they hold:
  - a load test (`Scripts/loadtest.sh --json`): {"nginx": {"rps", "p99_ms", "errors"}, "strata_warm": …,
    "thumbor_warm": …, "strata_zoom": …, "thumbor_zoom": …} (a case may be null);
  - an engine bench (`strata-bench engine --json`): {"zoom": [{"tolerance", "requests",
    "source_decodes", "p99_ms", …}, …], "burst": {"requests", "decodes"}, "overhead": {…}}.
Where a folder holds several of one kind, the last by file name is drawn (name them by date).
The left panel: requests/s of the five load-test cases (log scale, each bar labelled with its
figure, p99 and errors). The right panel, when an engine bench is there: its ratios against
their targets.
"""

import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LOAD_CASES = [
    ("nginx", "nginx\nstatic files", "#7f7f7f"),
    ("strata_warm", "Strata\nwarm", "#1f77b4"),
    ("thumbor_warm", "thumbor 7\nwarm", "#ff7f0e"),
    ("strata_zoom", "Strata\nzoom mix", "#1f77b4"),
    ("thumbor_zoom", "thumbor 7\nzoom mix", "#ff7f0e"),
]


def load(folder):
    loadtests, engines = [], []
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(folder, name)
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as error:
                sys.exit(f"{path}: not JSON ({error})")
        if isinstance(data, dict) and "nginx" in data:
            loadtests.append((name, data))
        elif isinstance(data, dict) and "zoom" in data and "overhead" in data:
            engines.append((name, data))
        else:
            print(f"skipping {path}: neither a load test nor an engine bench", file=sys.stderr)
    return (loadtests[-1] if loadtests else None), (engines[-1] if engines else None)


def engine_ratios(data):
    """(label, value, target, lower is better) for each ratio the engine bench has."""
    ratios = []
    by_tolerance = {round(z["tolerance"], 2): z for z in data.get("zoom", [])}
    exact, loose = by_tolerance.get(0.0), by_tolerance.get(0.2)
    if exact and loose and exact["source_decodes"] > 0:
        ratios.append(
            (
                "zoom trace: renders\nat tolerance 0.2 ÷ at 0",
                loose["source_decodes"] / exact["source_decodes"],
                0.2,
            )
        )
    if exact and loose and exact["p99_ms"] > 0:
        ratios.append(("zoom trace: p99\nat tolerance 0.2 ÷ at 0", loose["p99_ms"] / exact["p99_ms"], 0.2))
    burst = data.get("burst")
    if burst and burst.get("requests"):
        ratios.append(
            (
                f"burst: renders ÷ {burst['requests']}\nidentical requests",
                burst["decodes"] / burst["requests"],
                1 / burst["requests"],
            )
        )
    o = data.get("overhead", {})
    if o.get("bare_memory_hit_ns"):
        ratios.append(
            (
                "memory hit:\nimage(for:) ÷ bare tier",
                o["memory_hit_ns"] / o["bare_memory_hit_ns"],
                (o["bare_memory_hit_ns"] + 400) / o["bare_memory_hit_ns"],
            )
        )
        ratios.append(
            (
                "memory hit:\ncachedImage(for:) ÷ bare tier",
                o["cached_image_ns"] / o["bare_memory_hit_ns"],
                (o["bare_memory_hit_ns"] + 100) / o["bare_memory_hit_ns"],
            )
        )
    if o.get("bare_disk_hit_us"):
        ratios.append(("disk hit:\nimage(for:) ÷ bare tier", o["disk_hit_us"] / o["bare_disk_hit_us"], 1.15))
    return ratios


def draw_loadtest(ax, name, data):
    cases = [(key, label, colour, data.get(key)) for key, label, colour in LOAD_CASES]
    xs = range(len(cases))
    values = [c[3]["rps"] if c[3] else 0 for c in cases]
    bars = ax.bar(xs, [v if v > 0 else math.nan for v in values], color=[c[2] for c in cases], width=0.65)
    for i in (3, 4):  # the zoom mix: hatched, to set it apart from the warm runs
        bars[i].set_hatch("//")
        bars[i].set_edgecolor("white")
    ax.set_yscale("log")
    present = [v for v in values if v > 0]
    top = max(present) if present else 10
    bottom = min(present) if present else 1
    ax.set_ylim(10 ** math.floor(math.log10(bottom) - 0.3), 10 ** (math.log10(top) + 0.6))
    for x, (_, _, _, row) in zip(xs, cases):
        if row:
            text = f"{row['rps']:,.0f}\np99 {row['p99_ms']:.1f} ms"
            if row["errors"]:
                text += f"\n{row['errors']} errors"
            ax.text(x, row["rps"] * 1.12, text, ha="center", va="bottom", fontsize=9)
        else:
            ax.text(x, ax.get_ylim()[0] * 1.5, "not run", ha="center", va="bottom", fontsize=9, color="#999999")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([c[1] for c in cases], fontsize=9)
    ax.set_ylabel("requests/s (log scale)")
    ax.set_title(f"Load test: 256 px JPEG thumbnails, wrk 2 threads × 32 connections\n({name})", fontsize=10)
    ax.grid(axis="y", which="major", alpha=0.3)


def draw_engine(ax, name, data):
    ratios = engine_ratios(data)
    ys = list(range(len(ratios)))[::-1]
    values = [r[1] for r in ratios]
    colours = ["#2ca02c" if value <= target else "#d62728" for _, value, target in ratios]
    ax.barh(ys, values, color=colours, height=0.55)
    for y, (_, value, target) in zip(ys, ratios):
        ax.plot([target, target], [y - 0.38, y + 0.38], color="black", linewidth=1.5)
        ax.text(max(value, target) * 1.12, y, f"{value:.3g}  (target ≤ {target:.3g})", va="center", fontsize=8.5)
    ax.set_xscale("log")
    low = min(min(values), min(r[2] for r in ratios))
    high = max(max(values), max(r[2] for r in ratios))
    ax.set_xlim(10 ** (math.log10(low) - 0.5), 10 ** (math.log10(high) + 0.9))
    ax.axvline(1, color="#999999", linewidth=0.8, linestyle=":")
    ax.set_yticks(ys)
    ax.set_yticklabels([r[0] for r in ratios], fontsize=8.5)
    ax.set_xlabel("ratio (log scale; black tick = target, green = met, red = missed)")
    ax.set_title(f"strata-bench engine: ratios\n({name})", fontsize=10)
    ax.grid(axis="x", which="major", alpha=0.3)


def main():
    parser = argparse.ArgumentParser(description="Draws the benchmark figure from JSON files.")
    parser.add_argument("--dir", default="docs/bench", help="folder of benchmark JSON files (default docs/bench)")
    parser.add_argument("--out", default="docs/benchmarks.png", help="the PNG to write (default docs/benchmarks.png)")
    args = parser.parse_args()
    loadtest, engine = load(args.dir)
    if not loadtest and not engine:
        sys.exit(f"no load test or engine bench JSON in {args.dir}")
    panels = [p for p in (loadtest, engine) if p]
    fig, axes = plt.subplots(1, len(panels), figsize=(7.5 * len(panels), 5.8), squeeze=False)
    column = 0
    if loadtest:
        draw_loadtest(axes[0][column], *loadtest)
        column += 1
    if engine:
        draw_engine(axes[0][column], *engine)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}" + "".join(f" (from {p[0]})" for p in panels))


if __name__ == "__main__":
    main()
