"""Strongly connected components of a directed graph (Tarjan's algorithm, iterative): the one
cycle finder the import-cycle check (tests/unit/test_structure.py) and the history checker's
dependency cycles (minibroker/history/txn_rules.py) share. Pure."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet


def components(graph: Mapping[str, AbstractSet[str] | list[str]]) -> list[list[str]]:
    """The components of two or more nodes, each sorted; nodes only named as targets count."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> tuple[str, Iterator[str]]:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        return node, iter(sorted(graph.get(node, ())))

    for start in sorted(graph):
        if start in index:
            continue
        work = [visit(start)]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    work.append(visit(child))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found
