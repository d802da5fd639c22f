#!/usr/bin/env python3
"""Checks every relative link of README.md and docs/*.md: the file it names exists and, for a
`#anchor`, a heading of that file has that GitHub slug. Exits 1 listing the broken ones."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
pages = [root / "README.md"] + sorted((root / "docs").glob("*.md")) + sorted((root / "docs" / "bench").glob("*.md"))
link = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
fence = re.compile(r"^(```|~~~)")


def slugs(path: pathlib.Path) -> set[str]:
    found, inside = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if fence.match(line):
            inside = not inside
        elif not inside and (m := re.match(r"^#+ (.*)", line)):
            text = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower())
            found.add(text.replace(" ", "-"))
    return found


broken = []
for page in pages:
    inside = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if fence.match(line):
            inside = not inside
            continue
        if inside:
            continue
        for target in link.findall(line):
            if re.match(r"^[a-z]+:", target):
                broken.append(f"{page.relative_to(root)}:{number}: {target}: links outside the repository") if page.name == "README.md" else None
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(root)}:{number}: {target}: no such file")
            elif anchor and file.suffix == ".md" and anchor not in slugs(file):
                broken.append(f"{page.relative_to(root)}:{number}: {target}: no such heading")
for line in broken:
    print(line)
print(f"links: {len(pages)} pages checked, {len(broken)} broken")
sys.exit(1 if broken else 0)
