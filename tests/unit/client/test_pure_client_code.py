"""The client's decision modules stay pure (shared/style.md): they import only the standard
library's pure parts and minibroker.core, so their tests need no event loop or network."""

from __future__ import annotations

import pytest

from tests.unit.test_import_rules import (
    FORBIDDEN_IN_PURE,
    ROOT,
    imported_modules,
    matches,
    python_files,
)

PURE_CLIENT = ["minibroker/client/accumulator.py", "minibroker/client/fetch_state.py"]


@pytest.mark.parametrize("rel", PURE_CLIENT)
def test_client_decision_code_imports_no_io(rel: str) -> None:
    files = list(python_files(rel))
    assert files, f"{rel} is missing"
    problems = [
        f"{rel}:{lineno} imports {module}"
        for path in files
        for lineno, module in imported_modules(path)
        if matches(module, FORBIDDEN_IN_PURE)
        or (module.startswith("minibroker.") and not module.startswith("minibroker.core"))
    ]
    assert not problems, "pure client code must not do I/O:\n" + "\n".join(problems)
    assert (ROOT / rel).is_file()
