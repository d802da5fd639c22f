#!/usr/bin/env python3
"""Interleaved rounds of `strata-bench memory` for one or more builds, with per-round ratios.

Usage: python3 Scripts/bench/memory_rounds.py [--rounds N] [--entries N] [--json] STRATA_BENCH...

Single runs of the memory-tier timings move by ±50 % on a shared 2-core VM, and the noise comes
in phases that slow a whole run. So each round runs every build given (release binaries of
`strata-bench`, from the Benchmarks/ package, e.g. one copied aside before a change and one
after) once with 1 and 2 threads and once with one stripe, then the bare Lock + Dictionary
floor, back to back; the report gives, per
build, the medians over rounds of:
  - the single-thread hit (default stripes and one stripe) and insert+evict, in ns;
  - hit ÷ floor, taken within each round (the floor measured in that round);
  - 2-thread hits per second, and ÷ 1-thread, taken within each run.
The floor comes from the first build given (it does not depend on the cache).
"""
import json, statistics, subprocess, sys


def run(binary, entries, *args):
    out = subprocess.run(
        [binary, "memory", "--json", "--skip-traces", "--entries", str(entries), *args],
        check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    args = sys.argv[1:]
    rounds, entries, as_json, binaries = 12, 100_000, False, []
    while args:
        a = args.pop(0)
        if a == "--rounds":
            rounds = int(args.pop(0))
        elif a == "--entries":
            entries = int(args.pop(0))
        elif a == "--json":
            as_json = True
        elif a.startswith("-"):
            sys.exit(__doc__)
        else:
            binaries.append(a)
    if not binaries or rounds < 1:
        sys.exit(__doc__)
    rows = {b: {"hit": [], "exact_hit": [], "insert": [], "hit_over_floor": [], "exact_over_floor": [],
                "two_over_one": [], "two_thread_mhits": []} for b in binaries}
    floors = []
    for r in range(rounds):
        measured = {}
        for b in binaries:
            striped = run(b, entries, "--threads", "1", "2", "--only", "strata")["ops"]
            one = next(o for o in striped if o["threads"] == 1)
            two = next(o for o in striped if o["threads"] == 2)
            exact = run(b, entries, "--threads", "1", "--only", "exact")["ops"][0]
            measured[b] = (one, two, exact)
        floor = run(binaries[0], entries, "--threads", "1", "--only", "floor")["floors"][0]["hit_ns"]
        floors.append(floor)
        for b, (one, two, exact) in measured.items():
            row = rows[b]
            row["hit"].append(one["hit_ns"])
            row["exact_hit"].append(exact["hit_ns"])
            row["insert"].append(one["insert_ns"])
            row["hit_over_floor"].append(one["hit_ns"] / floor)
            row["exact_over_floor"].append(exact["hit_ns"] / floor)
            row["two_over_one"].append(two["hits_per_s"] / one["hits_per_s"])
            row["two_thread_mhits"].append(two["hits_per_s"] / 1e6)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    report = {"entries": entries, "rounds": rounds, "floor_hit_ns": statistics.median(floors), "builds": {}}
    for b, row in rows.items():
        report["builds"][b] = {k: round(statistics.median(v), 3) for k, v in row.items()}
        report["builds"][b]["two_over_one_per_round"] = [round(x, 2) for x in row["two_over_one"]]
    if as_json:
        print(json.dumps(report))
        return
    print(f"{entries} entries, {rounds} interleaved rounds, medians; floor hit {report['floor_hit_ns']:.1f} ns")
    for b, m in report["builds"].items():
        print(f"{b}:")
        print(f"  hit {m['hit']:.1f} ns ({m['hit_over_floor']:.2f}× floor), one stripe {m['exact_hit']:.1f} ns "
              f"({m['exact_over_floor']:.2f}×), insert+evict {m['insert']:.1f} ns")
        print(f"  2 threads: {m['two_thread_mhits']:.2f} M hits/s; 2-thread ÷ 1-thread hits/s {m['two_over_one']:.2f} (per round: "
              f"{' '.join(f'{x:.2f}' for x in m['two_over_one_per_round'])})")


if __name__ == "__main__":
    main()
