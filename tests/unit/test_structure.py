"""The structure the code keeps (issue 15 part 5; ARCHITECTURE.md): no import cycles, rooms that
lean on narrow interfaces rather than on their owner, CLIs as leaves, and small modules.

Imports are read with `ast`, so those inside functions and under TYPE_CHECKING count too: a
cycle that only typing or a late import hides is still a cycle in the design.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

from minibroker.core.graph import components

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ["minibroker", "broker", "controller", "loadgen", "bench"]
GENERATED = ("minibroker/rpc/",)
MAX_LINES = 400  # tests/ are exempt: a test module may hold a long table of cases

# The broker's rooms that must not reach into the replica manager.
NARROW = [
    "broker.fetch.fetcher",
    "broker.fetch.fetcher_manager",
    "broker.isr_tasks",
    "broker.role_changes",
    "broker.partition_opener",
    "broker.partition_table",
]
# Command-line modules: only other command-line modules may import them.
# Command lines: leaves that nothing else imports. Kafka's tools by their names
# (minibroker/kafkatools) are command lines too, and run `minibroker acls`' and
# `minibroker topics reassign`' code where it is the same.
CLI_MODULES = ("minibroker.cli", "minibroker.kafkatools", "loadgen.cli", "loadgen.__main__")


def is_cli(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in CLI_MODULES)


def module_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(GENERATED):
                continue
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `name` imports; `from pkg import sub` imports the submodule."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            subs = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in known]
            targets = subs if len(subs) == len(node.names) else [module, *subs]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph(root: Path, packages: Iterable[str]) -> dict[str, set[str]]:
    files = module_files(root, packages)
    return {name: imports_of(name, path, set(files)) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module."""
    return components(graph)


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(ROOT, PACKAGES)


def test_the_project_has_no_import_cycles(graph: dict[str, set[str]]) -> None:
    assert len(graph) > 150, "the walk found too few modules to mean anything"
    assert cycles(graph) == []


def test_the_cycle_check_catches_a_cycle_hidden_in_a_function(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def late():\n    from pkg.c import x\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n"
    )
    (pkg / "d.py").write_text("from pkg import a\n")
    assert cycles(import_graph(tmp_path, ["pkg"])) == [["pkg.a", "pkg.b", "pkg.c"]]


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module `start` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


@pytest.mark.parametrize("module", NARROW)
def test_broker_rooms_lean_on_narrow_pieces_not_the_replica_manager(
    graph: dict[str, set[str]], module: str
) -> None:
    # Through another module too: a room that reached the manager by a detour still leans on it.
    assert module in graph
    assert "broker.replica_manager" not in reachable(graph, module)
    assert "broker.replica_manager" in reachable(graph, "broker.servicers")  # the walk sees it


def test_command_lines_are_leaves_nothing_else_imports(graph: dict[str, set[str]]) -> None:
    wrong = sorted(
        f"{importer} imports {target}"
        for importer, targets in graph.items()
        for target in targets
        if is_cli(target) and not is_cli(importer)
    )
    assert wrong == []
    assert any(is_cli(t) for t in graph["minibroker.cli.main"])  # the check sees CLI imports


def test_every_module_fits_in_400_lines() -> None:
    files = module_files(ROOT, PACKAGES)
    long = {
        path.relative_to(ROOT).as_posix(): n
        for path in files.values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def wait_for_calls(source: str) -> list[int]:
    """Lines calling `asyncio.wait_for` (or a bare `wait_for` imported from asyncio)."""
    tree = ast.parse(source)
    from_asyncio = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "asyncio"
        for alias in node.names
        if alias.name == "wait_for"
    }
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (
            isinstance(f, ast.Attribute)
            and f.attr == "wait_for"
            and isinstance(f.value, ast.Name)
            and f.value.id == "asyncio"
        ) or (isinstance(f, ast.Name) and f.id in from_asyncio):
            lines.append(node.lineno)
    return lines


def test_no_program_awaits_with_asyncio_wait_for() -> None:
    """On Python 3.11 asyncio.wait_for can swallow a cancellation (minibroker/runtime/
    deadlines.py): a broker's fetcher that lost one never stopped. Deadlines use
    asyncio.timeout or deadlines.wait_set."""
    files = module_files(ROOT, PACKAGES)
    found = {
        path.relative_to(ROOT).as_posix(): lines
        for path in files.values()
        if (lines := wait_for_calls(path.read_text()))
    }
    assert found == {}


def test_the_wait_for_check_sees_both_spellings() -> None:
    src = (
        "import asyncio\nfrom asyncio import wait_for as wf\n"
        "async def f(e):\n    await asyncio.wait_for(e.wait(), 1)\n    await wf(e.wait(), 1)\n"
        "    await e.metadata.wait_for(lambda: True, 1)\n"
    )
    assert wait_for_calls(src) == [4, 5]
