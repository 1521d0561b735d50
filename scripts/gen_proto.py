"""Regenerate minibroker/rpc/ from proto/ (the source of truth), or check that it is fresh.

    python scripts/gen_proto.py          # rewrite minibroker/rpc/*_pb2*.py[i]
    python scripts/gen_proto.py --check  # exit 1 and name the stale files

The include root is proto/, so generated imports read `from minibroker.rpc import errors_pb2`.
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
OUT_PACKAGE = Path("minibroker") / "rpc"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def proto_files() -> list[Path]:
    return sorted((PROTO_ROOT / OUT_PACKAGE).glob("*.proto"))


def generate(out_root: Path) -> list[Path]:
    """Run protoc for every .proto into out_root; return the generated files."""
    wkt_include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{wkt_include}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *[str(p.relative_to(PROTO_ROOT)) for p in proto_files()],
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    out_dir = out_root / OUT_PACKAGE
    return sorted(p for p in out_dir.iterdir() if p.name.endswith(GENERATED_SUFFIXES))


def committed_files() -> list[Path]:
    out_dir = ROOT / OUT_PACKAGE
    return sorted(p for p in out_dir.iterdir() if p.name.endswith(GENERATED_SUFFIXES))


def stale_files() -> list[str]:
    """Names of generated files that differ from, or are missing in, minibroker/rpc/."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = {p.name: p for p in generate(Path(tmp))}
        current = {p.name: p for p in committed_files()}
        stale = sorted(set(fresh) ^ set(current))
        for name in sorted(set(fresh) & set(current)):
            if not filecmp.cmp(fresh[name], current[name], shallow=False):
                stale.append(name)
        return stale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check freshness")
    args = parser.parse_args()
    if args.check:
        stale = stale_files()
        if stale:
            print("generated gRPC code is stale; run: python scripts/gen_proto.py")
            for name in stale:
                print(f"  {OUT_PACKAGE / name}")
            return 1
        print("generated gRPC code is fresh")
        return 0
    for old in committed_files():
        old.unlink()
    generated = generate(ROOT)
    print(f"generated {len(generated)} files in {OUT_PACKAGE}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
