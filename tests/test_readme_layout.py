"""The README's layout table names every module of the project (and no module that is gone)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("flight_server", "spark_reader", "producers", "flight_cli", "chaos", "scripts")


def _layout_rows() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Layout\n"):]
    section = section[:section.index("\n## ", 1)]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) >= 2:
            rows.append((cells[0], "|".join(cells[1:])))
    return rows


def _named(rows: list[tuple[str, str]]) -> set[str]:
    """Every path a row names: its first cell's paths (later ones beside the first), and for a
    directory row (`dir/` or `dir/prefix*`) every file of that directory its text names."""
    named = set()
    for first, rest in rows:
        paths = re.findall(r"`([^`]+)`", first)
        base = paths[0].rsplit("/", 1)[0] if "/" in paths[0] else ""
        for i, p in enumerate(paths):
            named.add(p if i == 0 or "/" in p else f"{base}/{p}")
        if paths[0].endswith("/") or paths[0].endswith("*"):
            for name in re.findall(r"`([^`/ ]+)`", rest):
                named.add(f"{base}/{name}")
    return named


def _modules() -> set[str]:
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*"):
            rel = path.relative_to(ROOT).as_posix()
            if "node_modules" in rel or "_generated" in rel or "__pycache__" in rel or not path.is_file():
                continue
            if path.suffix in (".py", ".js") or (package == "scripts" and path.parent.name == "scripts"
                                                 and not path.suffix):
                found.add(rel)
    return found


def test_layout_names_every_module():
    named = _named(_layout_rows())
    # a package's row (`dir/`) covers its __init__.py; every other module is named itself
    missing = sorted(m for m in _modules() if m not in named
                     and not (m.endswith("/__init__.py") and m.removesuffix("__init__.py") in named))
    assert not missing, f"README's layout table leaves out {missing}"


def test_layout_names_no_module_that_is_gone():
    gone = sorted(p for p in _named(_layout_rows())
                  if p.endswith((".py", ".js")) and "*" not in p and not (ROOT / p).exists())
    assert not gone, f"README's layout table names modules that are gone: {gone}"
