"""`ssl.principal.mapping.rules` (KIP-371, Kafka's SslPrincipalMapper): how a client
certificate's distinguished name becomes a principal name. Rules in order, the first that
matches wins: `RULE:<regex>/<replacement>/[L|U]` (the regex must match the whole DN; `$1` in
the replacement is its first group; L or U folds the case) or `DEFAULT` (the DN as it is).
No rule matching is an error (the connection is refused, as Kafka's NoMatchingRule)."""

from __future__ import annotations

import re
from dataclasses import dataclass


class NoMatchingRule(ValueError):
    pass


@dataclass(frozen=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        out = m.expand(re.sub(r"\$(\d)", r"\\\1", self.replacement))
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def _until_slash(text: str, i: int) -> tuple[str, int]:
    """The text from `i` to the next unescaped "/", and the index after that "/"."""
    out = []
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append(text[i : i + 2])
            i += 2
            continue
        if c == "/":
            return "".join(out).replace("\\/", "/"), i + 1
        out.append(c)
        i += 1
    raise ValueError("a RULE needs the form RULE:pattern/replacement/[LU]")


def parse_rules(text: str) -> tuple[MappingRule, ...]:
    """ValueError with the reason for text that is not a list of rules."""
    rules: list[MappingRule] = []
    i = 0
    while i < len(text):
        if text[i] in ", \t\n":
            i += 1
        elif text.startswith("DEFAULT", i):
            rules.append(MappingRule(None))
            i += len("DEFAULT")
        elif text.startswith("RULE:", i):
            pattern, i = _until_slash(text, i + len("RULE:"))
            replacement, i = _until_slash(text, i)
            case = text[i] if i < len(text) and text[i] in "LU" else ""
            i += len(case)
            try:
                rules.append(MappingRule(re.compile(pattern), replacement, case))
            except re.error as exc:
                raise ValueError(f"bad pattern {pattern!r}: {exc}") from None
        else:
            raise ValueError(f"expected RULE:... or DEFAULT at {text[i : i + 20]!r}")
    return tuple(rules) or (MappingRule(None),)


def map_principal(rules: tuple[MappingRule, ...], dn: str) -> str:
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return name
    raise NoMatchingRule(f"no ssl.principal.mapping.rules rule matches {dn!r}")
