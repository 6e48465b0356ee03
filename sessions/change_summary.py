"""What a reviewer should know about a session's change before reading it: which areas it touches,
whether tests came with it, and the kinds of file that deserve a careful look (migrations,
dependencies, the sandbox recipe, CI configuration). Shown at the top of the session page's diff
and leading the pull request's body (sessions/pulls.py)."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from snapshots.recipe import LOCKFILE_PATTERNS, RECIPE_PATH

# Manifests that declare dependencies, beside the lockfiles a snapshot already watches.
MANIFEST_NAMES = (
    "pyproject.toml", "setup.py", "setup.cfg", "Pipfile", "package.json", "Cargo.toml",
    "go.mod", "Gemfile", "composer.json", "pom.xml", "build.gradle", "build.gradle.kts",
)  # fmt: skip
_TEST_PATH = re.compile(
    r"(^|/)(tests?|spec|specs|__tests__|testing)/"  # a test directory
    r"|(^|/)test_[^/]+\.py$|_test\.(py|go)$|\.(test|spec)\.[jt]sx?$|_spec\.rb$|Tests?\.java$"
)
_MIGRATION_PATH = re.compile(r"(^|/)(migrations|migrate|alembic/versions)/[^/]+$")
_CI_PATH = re.compile(
    r"^(\.github/workflows/|\.gitlab-ci\.yml$|\.circleci/|\.buildkite/|Jenkinsfile$)"
)


@dataclass(frozen=True)
class ChangeSummary:
    files: int
    added: int
    removed: int
    areas: list[tuple[str, int]]  # (top-level directory, or "(root)"; files), most first
    tests: list[str]
    migrations: list[str]
    dependencies: list[str]
    recipe: list[str]  # the sandbox recipe: changes what the next snapshot installs and reaches
    ci: list[str]
    notes: list[str] = field(default_factory=list)  # what to look at, in words

    @property
    def empty(self) -> bool:
        return self.files == 0


def change_summary(files: Iterable[Mapping]) -> ChangeSummary:
    """The summary of a diff: `files` as the diff panel holds them (path, added, removed)."""
    files = list(files)
    paths = [str(f.get("path", "")) for f in files]
    areas: dict[str, int] = {}
    for path in paths:
        area = path.split("/", 1)[0] + "/" if "/" in path else "(root)"
        areas[area] = areas.get(area, 0) + 1
    tests = [p for p in paths if _TEST_PATH.search(p)]
    migrations = [p for p in paths if _MIGRATION_PATH.search(p)]
    dependencies = [p for p in paths if _is_dependency(p)]
    recipe = [p for p in paths if p == RECIPE_PATH]
    ci = [p for p in paths if _CI_PATH.search(p)]
    source = [p for p in paths if p not in tests and not p.endswith((".md", ".rst", ".txt"))]
    notes = []
    if source and not tests:
        notes.append("No test was added or changed.")
    if migrations:
        notes.append("Database migrations: check they are reversible and safe on live data.")
    if dependencies:
        notes.append("Dependencies changed: check what is added and its licence.")
    if recipe:
        notes.append("The sandbox recipe changed: the next snapshot installs or reaches more.")
    if ci:
        notes.append("CI configuration changed: what the checks run is part of the change.")
    return ChangeSummary(
        files=len(files),
        added=sum(int(f.get("added") or 0) for f in files),
        removed=sum(int(f.get("removed") or 0) for f in files),
        areas=sorted(areas.items(), key=lambda item: (-item[1], item[0])),
        tests=tests,
        migrations=migrations,
        dependencies=dependencies,
        recipe=recipe,
        ci=ci,
        notes=notes,
    )


def _is_dependency(path: str) -> bool:
    name = posixpath.basename(path)
    return name in MANIFEST_NAMES or any(fnmatch.fnmatch(name, p) for p in LOCKFILE_PATTERNS)


def summary_markdown(summary: ChangeSummary) -> str:
    """The "Risk" section of a pull request body."""
    if summary.empty:
        return ""

    def listed(paths: list[str], limit: int = 8) -> str:
        shown = ", ".join(f"`{p}`" for p in paths[:limit])
        return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")

    areas = ", ".join(f"`{area}` {n}" for area, n in summary.areas[:8])
    lines = [
        "## Risk\n",
        f"- {summary.files} file{'s' if summary.files != 1 else ''}, +{summary.added} "
        f"−{summary.removed}; by area: {areas}",
        f"- Tests: {listed(summary.tests) if summary.tests else 'none changed'}",
    ]
    for label, paths in (
        ("Migrations", summary.migrations),
        ("Dependencies", summary.dependencies),
        ("Sandbox recipe", summary.recipe),
        ("CI configuration", summary.ci),
    ):
        if paths:
            lines.append(f"- {label}: {listed(paths)}")
    lines.extend(f"- ⚠️ {note}" for note in summary.notes)
    return "\n".join(lines) + "\n"
