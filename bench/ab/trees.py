"""The two trees `bench ab` compares: the working tree as it is (B, with its own .venv), and a git
ref laid out beside it (A): its files from `git archive` and a venv of its own in which the
ref's code is installed (its C extensions built from its own sources).

When the working tree's venv holds every requirement the ref names (the same strings), A's
venv reaches the working tree's installed packages through a path file instead of installing
700 MB again; otherwise the ref's own `scripts/bootstrap.sh` sets it up in full. Either way
the measuring code is the same on both sides: the working tree's `bench/` is copied over A's
before every run, so only the system under test (broker, controller, client library) differs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READY = ".ab-ready"
SHARED_PTH = "minibroker-ab-shared.pth"


class TreeError(RuntimeError):
    """The ref cannot be laid out (unknown ref, failed install); the message says why."""


@dataclass(frozen=True)
class Tree:
    label: str
    root: Path
    python: Path


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise TreeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def working_tree() -> Tree:
    """B: this checkout, uncommitted changes included, with its own .venv."""
    python = ROOT / ".venv" / "bin" / "python"
    if not python.exists():
        raise TreeError(f"{python} is missing: run bash scripts/bootstrap.sh first")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    head = _git("rev-parse", "--short", "HEAD")
    return Tree(f"{head}{' + changes' if dirty else ''}", ROOT, python)


def _requirements(pyproject: Path) -> set[str]:
    """Every requirement the project names, its extras' included."""
    project = tomllib.loads(pyproject.read_text())["project"]
    extras: dict[str, list[str]] = project.get("optional-dependencies", {})
    return set(project.get("dependencies", [])).union(*extras.values())


def _run(cmd: list[str], cwd: Path, what: str) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise TreeError(f"{what} failed:\n" + "\n".join(tail))


def _shared_venv(dest: Path) -> None:
    """A venv for `dest` that sees the working tree's installed packages (not its project:
    a plain path line in a .pth file does not run the editable install's own hook), with
    `dest` installed in it, editable, its C extensions built from `dest`'s sources. No pip of
    its own: the working tree's pip and setuptools (a fresh venv's setuptools is too old for
    the project's pyproject) install it."""
    _run(
        [sys.executable, "-m", "venv", "--without-pip", str(dest / ".venv")],
        dest,
        "creating A's venv",
    )
    python = dest / ".venv" / "bin" / "python"
    ours = sysconfig.get_paths()["purelib"]
    theirs = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (Path(theirs) / SHARED_PTH).write_text(ours + "\n")
    _run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--no-deps", "--no-build-isolation", "-e", str(dest)],
        dest, f"installing {dest.name} into its venv",
    )  # fmt: skip


def lay_out(ref: str, base: Path) -> Tree:
    """A: `ref`'s files and venv under `base/<commit>`, made once and reused while complete."""
    commit = _git("rev-parse", "--verify", f"{ref}^{{commit}}")
    short = commit[:10]
    dest = base / short
    python = dest / ".venv" / "bin" / "python"
    if not (dest / READY).exists():
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        print(f"ab: laying out {ref} ({short}) in {dest}", file=sys.stderr, flush=True)
        archive = subprocess.Popen(
            ["git", "-C", str(ROOT), "archive", commit], stdout=subprocess.PIPE
        )
        subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise TreeError(f"git archive {commit} failed")
        if _requirements(dest / "pyproject.toml") <= _requirements(ROOT / "pyproject.toml"):
            _shared_venv(dest)
        else:
            print("ab: its dependencies differ: a venv of its own (bootstrap.sh)", file=sys.stderr)
            env_python = {"PYTHON": sys.executable}
            done = subprocess.run(
                ["bash", "scripts/bootstrap.sh"], cwd=dest, env={**os.environ, **env_python},
                check=False,
            )  # fmt: skip
            if done.returncode != 0:
                raise TreeError(f"bootstrap.sh in {dest} failed")
        (dest / READY).write_text(commit + "\n")
    return Tree(short, dest, python)


def same_bench(tree: Tree) -> None:
    """Put the working tree's measuring code (bench/) in `tree`, replacing its own."""
    if tree.root == ROOT:
        return
    target = tree.root / "bench"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(ROOT / "bench", target, ignore=shutil.ignore_patterns("__pycache__"))
