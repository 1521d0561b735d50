"""The README's layout section names folders that exist (shared/style.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_path_in_the_layout_section_exists() -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    paths = [m.group(1) for m in re.finditer(r"^\s*([\w./-]+/?)\s", block, re.M)]
    assert len(paths) >= 10
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"README layout names missing paths: {missing}"


def test_readme_gives_the_two_fresh_machine_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert "bash scripts/demo.sh" in text
    assert "bash scripts/test.sh" in text
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/test.sh" in ci
