"""Static checks of deploy/Dockerfile and .dockerignore: stages, users, healthchecks, where Java
and compilers go, and that the build copies everything the programs import. Each check returns
its problems (empty: fine), so tests also run them on broken copies.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PROGRAM_PACKAGES = ("minibroker", "broker", "controller", "loadgen")
FINAL_STAGES = ("runtime", "loadgen", "zookeeper")
JAVA_STAGES = ("loadgen", "zookeeper")
BUILD_STAGES = ("build-deps", "build", "build-loadgen")
JAVA = re.compile(r"\b(openjdk-\d+-jre\S*|default-jre\S*|openjdk-\d+-jdk\S*|temurin)\b")
COMPILERS = re.compile(r"\b(build-essential|gcc|g\+\+|clang|python3-dev)\b")


@dataclass
class Instruction:
    keyword: str
    args: str


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [i.args for i in self.instructions if i.keyword == keyword]


def parse(text: str) -> dict[str, Stage]:
    """Stages by name; continuation lines joined, comments dropped (as Docker does)."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pending += line[:-1] + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            logical.append(pending)
            pending = ""
    # Instructions before the first FROM (the global ARGs) go to the stage named "".
    current = Stage("", "")
    stages: dict[str, Stage] = {"": current}
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), " ".join(args.split())
        if keyword == "FROM":
            m = re.fullmatch(r"(?:--\S+ )*(\S+)(?: AS (\S+))?", args, re.IGNORECASE)
            assert m is not None, line
            current = Stage(m[2] or f"stage{len(stages)}", m[1])
            stages[current.name] = current
        else:
            current.instructions.append(Instruction(keyword, args))
    return stages


def chain(stages: dict[str, Stage], name: str) -> list[Stage]:
    """The stage and the stages it is built FROM, innermost first."""
    out = [stages[name]]
    while out[-1].base in stages:
        out.append(stages[out[-1].base])
    return out


def stage_problems(stages: dict[str, Stage]) -> list[str]:
    problems = []
    for name in (*BUILD_STAGES, *FINAL_STAGES):
        if name not in stages:
            problems.append(f"no stage {name!r}")
    if problems:
        return problems
    for name in FINAL_STAGES:
        users = [u for s in chain(stages, name) for u in reversed(s.all("USER"))]
        if not users or users[0].split(":")[0] in ("root", "0"):
            problems.append(f"{name}: runs as {users[0] if users else 'root'}, not a plain user")
        checks = [h for s in chain(stages, name) for h in reversed(s.all("HEALTHCHECK"))]
        if not checks:
            problems.append(f"{name}: no HEALTHCHECK")
    if not any(a.startswith("PYTHON_IMAGE=python:3.11-slim") for a in stages[""].all("ARG")):
        problems.append("the base image must be python:3.11-slim (ARG PYTHON_IMAGE)")
    runtime_check = (stages["runtime"].all("HEALTHCHECK") or [""])[-1]
    if not re.search(r'CMD \["minibroker", "health"', runtime_check):
        problems.append("runtime: the HEALTHCHECK must ask `minibroker health` (gRPC health)")
    if "/opt/venv" not in " ".join(stages["runtime"].all("COPY")):
        problems.append("runtime: does not copy the build stage's /opt/venv")
    for name, stage in stages.items():
        runs = " ".join(stage.all("RUN"))
        if JAVA.search(runs) and name not in JAVA_STAGES:
            problems.append(f"{name}: installs Java, which only Spark and ZooKeeper need")
        if COMPILERS.search(runs) and name not in BUILD_STAGES:
            problems.append(f"{name}: installs build tools outside the build stage")
    for name in JAVA_STAGES:
        if not JAVA.search(" ".join(stages[name].all("RUN"))):
            problems.append(f"{name}: no JRE")
    if "gen_proto.py --check" not in " ".join(stages["build"].all("RUN")):
        problems.append("build: does not check the generated gRPC code against proto/")
    return problems


def imported_packages() -> set[str]:
    """Top-level first-party packages the programs import (walked with ast)."""
    first_party = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    found = set(PROGRAM_PACKAGES)
    for package in PROGRAM_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                found |= {n.split(".")[0] for n in names} & first_party
    return found


def copied_sources(stages: dict[str, Stage]) -> list[str]:
    """Paths the build stages copy from the context (not --from another stage)."""
    out = []
    for args in stages["build-deps"].all("COPY") + stages["build"].all("COPY"):
        if "--from=" in args:
            continue
        parts = [p for p in args.split() if not p.startswith("--")]
        out += [p.rstrip("/") for p in parts[:-1]]
    return out


def ignored(path: str, patterns: list[str]) -> bool:
    parts = Path(path).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        if any(fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(p, bare) for p in prefixes):
            return True
    return False


def copy_problems(stages: dict[str, Stage], dockerignore: str) -> list[str]:
    """The build copies every package the programs import and what pyproject.toml needs to
    install them, none of it hidden by .dockerignore; setuptools packages all of them."""
    problems = []
    copied = copied_sources(stages)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    needed = {"pyproject.toml", project["project"]["readme"], "proto", "scripts/gen_proto.py"}
    for package in sorted(imported_packages()):
        needed.add(package)
        if not any(fnmatch.fnmatch(package, pattern) for pattern in include):
            problems.append(f"pyproject.toml does not package {package}")
    problems += [f"the build stage does not COPY {p}" for p in sorted(needed - set(copied))]
    patterns = [
        line.strip().rstrip("/")
        for line in dockerignore.splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for path in copied:
        if not (ROOT / path).exists():
            problems.append(f"COPY {path}: no such file in the repository")
        elif ignored(path, patterns):
            problems.append(f"COPY {path}: excluded by .dockerignore")
    problems += [f".dockerignore must exclude {p}" for p in (".git", ".venv") if p not in patterns]
    return problems


def check_all(dockerfile: str, dockerignore: str) -> list[str]:
    stages = parse(dockerfile)
    problems = stage_problems(stages)
    return (
        problems
        if problems[:1] and problems[0].startswith("no stage")
        else [
            *problems,
            *copy_problems(stages, dockerignore),
        ]
    )
