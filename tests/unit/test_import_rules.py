"""The one rule (shared/style.md): pure decision code imports no I/O; imports go downwards.

Walks the source with `ast`, so a forbidden import anywhere in a module fails, even inside a
function.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Pure packages. broker/replication and loadgen/workload.py join automatically once they exist;
# the ones that exist today must be found, so the test cannot pass by looking at nothing.
PURE = [
    "minibroker/core",
    "controller/logic",
    "broker/replication",
    "loadgen/workload.py",
    "loadgen/source_options.py",
    "minibroker/history/model.py",
    "minibroker/history/rules.py",
]
MUST_EXIST = ["minibroker/core", "controller/logic"]

FORBIDDEN_IN_PURE = {
    # sockets, files, processes, threads, clocks, randomness
    "socket",
    "ssl",
    "select",
    "selectors",
    "asyncio",
    "threading",
    "multiprocessing",
    "concurrent",
    "subprocess",
    "signal",
    "os",
    "io",
    "shutil",
    "pathlib",
    "tempfile",
    "time",
    "datetime",
    "random",
    "secrets",
    "uuid",
    "urllib",
    "http",
    "logging",
    # third-party I/O
    "grpc",
    "grpc_health",
    "kazoo",
    "pyspark",
    "pyarrow",
    "prometheus_client",
    # our own shells
    "minibroker.runtime",
    "minibroker.rpc",
    "minibroker.client",
    "minibroker.cli",
    "minibroker.localcluster",
    "minibroker.security",
    "cryptography",
}
FORBIDDEN_CALLS = {"open", "print", "input"}

# Layering: what each top-level package must never import.
LAYERS = {
    "minibroker": {"broker", "controller", "loadgen"},
    "broker": {"controller", "loadgen"},
    "controller": {"broker", "loadgen"},
    "loadgen": {"broker", "controller"},
}
INNER = {
    "minibroker/core": {
        "minibroker.runtime",
        "minibroker.client",
        "minibroker.cli",
        "minibroker.rpc",
        "minibroker.security",
    },
    "minibroker/runtime": {"minibroker.client", "minibroker.cli", "minibroker.localcluster"},
    "minibroker/security": {"minibroker.client", "minibroker.cli", "minibroker.localcluster"},
}


def python_files(rel: str) -> Iterator[Path]:
    path = ROOT / rel
    if path.is_file():
        yield path
    elif path.is_dir():
        yield from sorted(path.rglob("*.py"))


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def matches(module: str, banned: set[str]) -> str | None:
    for b in banned:
        if module == b or module.startswith(b + "."):
            return b
    return None


def test_pure_packages_exist() -> None:
    for rel in MUST_EXIST:
        assert any(python_files(rel)), f"{rel} is missing"


@pytest.mark.parametrize("rel", PURE)
def test_pure_code_imports_no_io(rel: str) -> None:
    problems = []
    for path in python_files(rel):
        for lineno, module in imported_modules(path):
            if matches(module, FORBIDDEN_IN_PURE):
                problems.append(f"{path.relative_to(ROOT)}:{lineno} imports {module}")
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in FORBIDDEN_CALLS
            ):
                problems.append(f"{path.relative_to(ROOT)}:{node.lineno} calls {node.func.id}()")
    assert not problems, "pure code must not do I/O:\n" + "\n".join(problems)


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_imports_go_downwards(package: str) -> None:
    problems = []
    for path in python_files(package):
        rel = str(path.relative_to(ROOT))
        banned = set(LAYERS[package])
        for prefix, extra in INNER.items():
            if rel.startswith(prefix + "/"):
                banned |= extra
        for lineno, module in imported_modules(path):
            if matches(module, banned):
                problems.append(f"{rel}:{lineno} imports {module}")
    assert not problems, "\n".join(problems)


def test_the_checker_catches_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    import kazoo.client\n    return open('x')\n")
    assert [m for _, m in imported_modules(bad)] == ["kazoo.client"]
    assert matches("kazoo.client", FORBIDDEN_IN_PURE) == "kazoo"
    assert matches("minibroker.core.types", FORBIDDEN_IN_PURE) is None


@pytest.mark.parametrize(
    ("library", "allowed"),
    [
        (
            "kazoo",
            {
                "minibroker/runtime/zk_client.py",
                "minibroker/runtime/zk_errors.py",
                "minibroker/runtime/zk_handler.py",
                "minibroker/runtime/zk_store.py",
            },
        ),
        ("pyspark", {"loadgen"}),
    ],
)
def test_one_door_per_library(library: str, allowed: set[str]) -> None:
    problems = []
    for package in LAYERS:
        for path in python_files(package):
            rel = str(path.relative_to(ROOT))
            if any(rel == a or rel.startswith(a + "/") for a in allowed):
                continue
            for lineno, module in imported_modules(path):
                if matches(module, {library}):
                    problems.append(f"{rel}:{lineno} imports {module}")
    assert not problems, f"only {sorted(allowed)} may import {library}:\n" + "\n".join(problems)
