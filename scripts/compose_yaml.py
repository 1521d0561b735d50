"""The YAML scripts/gen_compose.py writes: block style, a flag a line in commands, short scalar
lists inline, comments above their keys. Written here rather than by a YAML library so that the
generated files read as a person would write them (and stay byte-stable)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any


class Folded(list[str]):
    """A command written as a folded YAML string, one flag per line; compose splits it like a
    shell would (our arguments hold no spaces or quotes, so the split is exact)."""


def command_lines(argv: Sequence[str]) -> Folded:
    """`python -m program --name N --id I ...` on the first line, then one `--set` a line."""
    lines: list[list[str]] = [[]]
    for arg in argv:
        if arg == "--set":
            lines.append([])
        lines[-1].append(arg)
    assert all(" " not in a and "'" not in a and '"' not in a for a in argv), argv
    return Folded(" ".join(line) for line in lines)


_PLAIN = re.compile(r"[A-Za-z/$_.-][\w./$:{}=@+,-]*|\d+[a-z]+")  # `3s`, `2g`: not numbers
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def scalar(value: Any, flow: bool = False) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    plain = (
        _PLAIN.fullmatch(text) is not None
        and text.lower() not in _YAML_WORDS
        and ": " not in text
        and not text.startswith("- ")
        and not (flow and any(c in text for c in ",[]{}"))
    )
    return text if plain else json.dumps(text)


def emit(
    obj: Mapping[str, Any],
    comments: Mapping[tuple[str, ...], str],
    path: tuple[str, ...] = (),
    indent: int = 0,
) -> list[str]:
    """YAML for the compose mapping: block style, short scalar lists inline, comments above."""
    pad = " " * indent
    lines: list[str] = []
    for i, key in enumerate(obj):
        value = obj[key]
        if (indent == 0 and i > 0) or path == ("services",):
            lines.append("")  # a blank line between top-level keys and between services
        comment = comments.get((*path, key))
        if comment:
            lines += [f"{pad}# {c}" for c in comment.splitlines()]
        if isinstance(value, Mapping) and value:
            lines.append(f"{pad}{key}:")
            lines += emit(value, comments, (*path, key), indent + 2)
        elif isinstance(value, Mapping):
            lines.append(f"{pad}{key}: {{}}")
        elif isinstance(value, Folded):
            lines.append(f"{pad}{key}: >-")
            lines += [f"{pad}  {line}" for line in value]
        elif isinstance(value, list) and value and isinstance(value[0], Mapping):
            lines.append(f"{pad}{key}:")  # a list of mappings (long-syntax ports): one a line
            for item in value:
                pairs = ", ".join(f"{k}: {scalar(v, flow=True)}" for k, v in item.items())
                lines.append(f"{pad}  - {{{pairs}}}")
        elif isinstance(value, list):
            flow = f"{pad}{key}: [{', '.join(scalar(v, flow=True) for v in value)}]"
            if len(flow) <= 100 and len(value) <= 8:
                lines.append(flow)
            else:
                lines.append(f"{pad}{key}:")
                lines += [f"{pad}  - {scalar(v)}" for v in value]
        else:
            lines.append(f"{pad}{key}: {scalar(value)}")
    return lines
