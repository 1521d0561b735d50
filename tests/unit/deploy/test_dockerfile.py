"""deploy/Dockerfile and .dockerignore, read statically (no engine here): see dockerfile_checks."""

from __future__ import annotations

from tests.unit.deploy import dockerfile_checks as dc


def test_the_dockerfile_keeps_the_rules() -> None:
    problems = dc.check_all(dc.DOCKERFILE.read_text(), dc.DOCKERIGNORE.read_text())
    assert problems == []


def test_the_programs_import_only_the_packages_the_image_installs() -> None:
    assert dc.imported_packages() == set(dc.PROGRAM_PACKAGES)
