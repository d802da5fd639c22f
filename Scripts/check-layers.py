#!/usr/bin/env python3
"""Refuses an import that breaks Strata's layers (docs/Architecture.md, "Layers").

Each target of Sources/ may import only the Strata targets below it, as LAYERS says, and the
C targets C_TARGETS gives its layer; Package.swift's target dependencies (read with `swift
package dump-package`) must point the same way. Run by `make lint`; `--self-test` copies one
target, adds an import from above, and expects a refusal. (The build itself refuses an import
of a target that is not a declared dependency: `--explicit-target-dependency-import-check
error` in `make test`.)

    Scripts/check-layers.py [--self-test] [--no-manifest]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Each Strata target and the Strata targets it may import (directly; the lower ones' own
# imports are theirs).
LAYERS = {
    "StrataBase": [],
    "StrataCodecs": ["StrataBase"],
    "StrataTiers": ["StrataBase", "StrataCodecs"],
    "StrataEngine": ["StrataBase", "StrataCodecs", "StrataTiers"],
    "Strata": ["StrataBase", "StrataCodecs", "StrataTiers", "StrataEngine"],
    "StrataHTTPOrigin": ["Strata"],
    "StrataS3": ["Strata", "StrataHTTPOrigin"],
    "StrataConfiguration": ["Strata", "StrataHTTPOrigin", "StrataS3"],
    "StrataService": ["Strata", "StrataConfiguration"],
    "strata": ["Strata", "StrataConfiguration", "StrataService"],
}
# Modules that are neither Strata's layers nor outside packages: the C targets, each allowed
# where its layer needs it.
C_TARGETS = {
    "StrataBase": {"CStrataLinux", "CStrataSIMD", "CXXHash"},
    "StrataCodecs": {"CTurboJPEG", "CJPEG", "CStrataJPEG", "CWebP", "CPNG", "CStrataPNG", "CAVIF", "CHeif",
                     "CDe265", "CStrataHEIF", "CGIF", "CTIFF", "CStrataTIFF", "CJXL", "CLCMS2", "CZlib", "CStrataSIMD"},
    "StrataTiers": {"CStrataLinux", "CXXHash"},
    "StrataEngine": {"CStrataLinux", "CStrataSIMD"},
    "strata": {"CStrataLinux"},
}
ALL_C = set().union(*C_TARGETS.values()) | {"CStrataLinux", "CStrataSIMD"}
IMPORT = re.compile(r"^\s*(?:@[\w(). ]+\s+)*import\s+(?:(?:struct|class|enum|protocol|func|var|typealias)\s+)?([A-Za-z_]\w*)", re.M)


def check(root):
    problems = []
    sources = os.path.join(root, "Sources")
    strata_targets = set(LAYERS)
    for target in sorted(os.listdir(sources)):
        path = os.path.join(sources, target)
        if not os.path.isdir(path) or target.startswith("C"):
            continue
        if target not in LAYERS:
            problems.append(f"Sources/{target}: a target with no layer (add it to LAYERS in Scripts/check-layers.py)")
            continue
        allowed = set(LAYERS[target]) | C_TARGETS.get(target, set())
        for directory, _, files in os.walk(path):
            for name in sorted(files):
                if not name.endswith(".swift"):
                    continue
                file = os.path.join(directory, name)
                text = open(file, encoding="utf-8").read()
                for match in IMPORT.finditer(text):
                    module = match.group(1)
                    line = text.count("\n", 0, match.start()) + 1
                    rel = os.path.relpath(file, root)
                    if module in strata_targets and module not in allowed:
                        problems.append(f"{rel}:{line}: {target} imports {module}, which is not below it")
                    elif module in ALL_C and module not in allowed:
                        problems.append(f"{rel}:{line}: {target} imports the C target {module}, which is not among its layer's")
    return problems


def check_manifest(root):
    """The manifest's own arrows: each Strata target depends only on the targets below it."""
    try:
        dump = subprocess.run(["swift", "package", "dump-package"], cwd=root, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as error:
        return [f"Package.swift: swift package dump-package failed: {error}"]
    problems = []
    for target in json.loads(dump.stdout)["targets"]:
        name = target["name"]
        if name not in LAYERS:
            continue
        for dependency in target.get("dependencies", []):
            if "byName" in dependency:
                other = dependency["byName"][0]
            elif "target" in dependency:
                other = dependency["target"][0]
            else:
                continue
            if other in LAYERS and other not in LAYERS[name]:
                problems.append(f"Package.swift: {name} depends on {other}, which is not below it")
    return problems


def self_test(root):
    with tempfile.TemporaryDirectory() as scratch:
        shutil.copytree(os.path.join(root, "Sources", "StrataBase"), os.path.join(scratch, "Sources", "StrataBase"))
        bad = os.path.join(scratch, "Sources", "StrataBase", "BadImport.swift")
        with open(bad, "w") as f:
            f.write("import StrataEngine\n")
        problems = check(scratch)
        if not any("StrataBase imports StrataEngine" in p for p in problems):
            print("check-layers: self-test FAILED: an upward import was not refused", file=sys.stderr)
            return 1
        print(f"check-layers: self-test: refused as expected: {problems[0]}", flush=True)
    return 0


def main():
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if "--self-test" in sys.argv:
        return self_test(root)
    problems = check(root)
    if "--no-manifest" not in sys.argv:
        problems += check_manifest(root)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check-layers: {len(problems)} import(s) break the layers", file=sys.stderr)
        return 1
    print("check-layers: every import follows the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
