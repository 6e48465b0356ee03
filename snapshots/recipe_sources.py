"""Where a repository's recipe comes from, as the settings page shows it: the repository's own
file at its default branch (read from the worker's mirror, as of its last fetch), the dashboard
override, and the recipe a build would use — the override when set, else the file (the
override replaces the file whole; see snapshots.recipe.load_recipe)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from snapshots import mirror
from snapshots.models import Repository, Snapshot
from snapshots.recipe import RECIPE_MAX_BYTES, RECIPE_PATH, Recipe, RecipeError, parse_recipe
from snapshots.sandbox import NetworkPolicy

OVERRIDE_SOURCE = "the recipe set in the dashboard"


@dataclass(frozen=True)
class RecipeFile:
    """The repository's own recipe file: its text ("" when it has none; None when it cannot
    be read) and a note saying what was read or why not."""

    text: str | None
    note: str


def repository_recipe_file(repository: Repository) -> RecipeFile:
    """`.inspect/environment.toml` at the default branch, from git objects in the mirror
    (nothing of a work tree is followed; a link is refused as the build refuses it)."""
    path = mirror.mirror_path(repository.name)
    branch = repository.default_branch
    if not (path / "HEAD").exists():
        return _as_last_built(repository)
    try:
        entry = mirror.git("ls-tree", "-z", f"refs/heads/{branch}", "--", RECIPE_PATH, cwd=path)
    except mirror.MirrorError as exc:
        return RecipeFile(None, f"cannot read branch {branch}: {exc}")
    if not entry.strip("\0").strip():
        return RecipeFile("", f"{branch} has no {RECIPE_PATH}")
    mode, kind, blob = entry.split("\t", 1)[0].split()
    if kind != "blob" or mode == "120000":
        return RecipeFile(None, f"{RECIPE_PATH} on {branch} is a link; the build refuses it")
    try:
        size = int(mirror.git("cat-file", "-s", blob, cwd=path).strip())
        if size > RECIPE_MAX_BYTES:
            return RecipeFile(None, f"{RECIPE_PATH} on {branch} is larger than 256 KiB")
        text = mirror.git("cat-file", "blob", blob, cwd=path)
    except mirror.MirrorError as exc:
        return RecipeFile(None, f"cannot read {RECIPE_PATH}: {exc}")
    return RecipeFile(text, f"{RECIPE_PATH} on {branch}, as of the last fetch")


def _as_last_built(repository: Repository) -> RecipeFile:
    """Without a mirror here (not fetched yet, or kept by a worker on another machine): the
    file as the newest snapshot built from it recorded it."""
    built = (
        Snapshot.objects.filter(repository=repository, recipe_source=RECIPE_PATH)
        .exclude(recipe_toml="")
        .order_by("-created_at")
        .first()
    )
    if built is None:
        return RecipeFile(None, "not fetched yet: the first build fetches the repository")
    return RecipeFile(built.recipe_toml, f"{RECIPE_PATH} as snapshot {built.pk} was built from it")


@dataclass(frozen=True)
class RecipeInForce:
    """What a build of the default branch would use now: `recipe` (None when it does not
    parse, then `error` says why), its `text` and where it comes from."""

    text: str
    source: str
    recipe: Recipe | None
    error: RecipeError | None = None


def recipe_in_force(repository: Repository, file: RecipeFile) -> RecipeInForce:
    if repository.recipe_override.strip():
        text, source = repository.recipe_override, OVERRIDE_SOURCE
    elif file.text:
        text, source = file.text, RECIPE_PATH
    else:
        return RecipeInForce("", "the default (no recipe)", Recipe())
    try:
        return RecipeInForce(text, source, parse_recipe(text, where=source))
    except RecipeError as exc:
        return RecipeInForce(text, source, None, exc)


_EGRESS_LINE = re.compile(r"^\s*egress\s*[.=]")  # `egress = {…}` or `egress.mode = …`
_TABLE_LINE = re.compile(r"^\s*\[")
_EGRESS_TABLE = re.compile(r"^\s*\[\s*egress\s*\]")


def with_egress(text: str, policy: NetworkPolicy) -> str:
    """`text` (recipe TOML) with its egress replaced by `policy` and nothing else changed.
    RecipeError when `text` does not parse, or is written in a way this cannot edit safely."""
    before = parse_recipe(text, where=OVERRIDE_SOURCE) if text.strip() else Recipe()
    kept, in_egress_table = [], False
    for line in text.splitlines():
        if _TABLE_LINE.match(line):
            in_egress_table = bool(_EGRESS_TABLE.match(line))
        if in_egress_table or (_EGRESS_LINE.match(line) and not _in_a_table(kept)):
            continue
        kept.append(line)
    egress = f"egress = {{ mode = {json.dumps(policy.mode)}"
    if policy.domains:
        egress += f", domains = [{', '.join(json.dumps(d) for d in policy.domains)}]"
    # Top-level keys come before the first table.
    first_table = next((i for i, line in enumerate(kept) if _TABLE_LINE.match(line)), len(kept))
    kept.insert(first_table, egress + " }")
    result = "\n".join(kept).strip("\n") + "\n"
    try:
        after = parse_recipe(result, where=OVERRIDE_SOURCE)
    except RecipeError:
        after = None
    if after is None or after.egress != policy or _without_egress(after) != _without_egress(before):
        raise RecipeError(
            "the recipe's egress is written in a way this page cannot change safely; "
            "edit it on the Recipe page"
        )
    return result


def _in_a_table(lines: list[str]) -> bool:
    """Whether the next line would fall inside a table (an `egress =` there is not ours)."""
    return any(_TABLE_LINE.match(line) for line in lines)


def _without_egress(recipe: Recipe) -> Recipe:
    return Recipe(
        setup=recipe.setup,
        start=recipe.start,
        verify=recipe.verify,
        preview=recipe.preview,
        ui=recipe.ui,
        refresh_minutes=recipe.refresh_minutes,
        agents=recipe.agents,
    )
