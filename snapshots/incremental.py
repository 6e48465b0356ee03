"""Incremental snapshot refresh: stack what changed on the previous snapshot.

A refresh whose recipe, egress in force and lockfiles are those of the branch's newest ready
snapshot does not rebuild from nothing (docs/sandboxes.md, "Incremental refresh"): it restores
that snapshot, brings the tree to the new commit from the mirror (a git bundle, as a session's
drift sync), runs the recipe's `refresh` commands and freezes only what changed, one more layer
on the stack. A refresh that finds the branch head and recipe where they were records that it
checked and builds nothing. Stacks are flattened in the background (`flatten_stack`) once they
reach FLATTEN_DEPTH layers.
"""

from __future__ import annotations

import logging

from celery import current_app
from django.db import transaction
from django.utils import timezone

from snapshots import mirror
from snapshots.backends import sandbox_backend
from snapshots.egress import as_json, egress_in_force
from snapshots.models import Repository, Snapshot
from snapshots.recipe import RecipeError
from snapshots.restore import recipe_built_with
from snapshots.sandbox import Sandbox, SandboxError, SnapshotRef

log = logging.getLogger(__name__)

# Flatten a stack in the background when it reaches this many layers. A full build is 2 deep
# (the clone, then what `setup` made), so 8 is six incremental refreshes (three hours at the
# default 30 minutes): restores stay one overlay mount whatever the depth, but every lookup
# that misses walks the stack, which bench-refresh measures (a full-tree walk from an 8-deep
# stack against a flat one). The local backend's synchronous cap (INSPECT_SANDBOX_MAX_LAYERS,
# 16 by default) is never reached while the flattening task keeps up.
FLATTEN_DEPTH = 8
FLATTEN_TASK = "snapshots.tasks.flatten_snapshot"
SYNC_BUNDLE = ".git/inspect-refresh.bundle"
GIT = "git -c safe.directory=*"
DASHBOARD_SOURCE = "the recipe set in the dashboard"


class CatchUpFailed(SandboxError):
    """The previous snapshot's tree could not be brought to the new commit (a rebuild will)."""


def _previous(repository: Repository, branch: str, backend_name: str) -> Snapshot | None:
    return (
        Snapshot.objects.filter(
            repository=repository,
            branch=branch,
            state=Snapshot.State.READY,
            backend=backend_name,
        )
        .order_by("-created_at")
        .first()
    )


def unchanged(repository: Repository, branch: str, backend_name: str) -> Snapshot | None:
    """The branch's newest ready snapshot, marked as checked now, when neither the branch
    head (fetched first), the recipe nor the egress in force has moved since it was built;
    None when a build is due. Fetch problems are left to the build, which reports them."""
    previous = _previous(repository, branch, backend_name)
    if previous is None or not previous.commit:
        return None
    try:
        mirror_dir = mirror.update_mirror(repository.name, repository.url)
        if mirror.head_commit(mirror_dir, branch) != previous.commit:
            return None
        recipe = recipe_built_with(previous)
    except (mirror.MirrorError, RecipeError):
        return None
    override = repository.recipe_override
    if override.strip():
        if previous.recipe_source != DASHBOARD_SOURCE or previous.recipe_toml != override:
            return None
    elif previous.recipe_source == DASHBOARD_SOURCE:
        return None  # the override was removed: the repository's own file now rules
    # Same commit, so the same recipe file and lockfiles; a newly approved egress rebuilds.
    if as_json(egress_in_force(repository, recipe.egress)) != previous.egress:
        return None
    previous.checked_at = timezone.now()
    Snapshot.objects.filter(pk=previous.pk).update(checked_at=previous.checked_at)
    return previous


def stack_base(
    repository: Repository, snapshot: Snapshot, backend_name: str, mirror_dir
) -> tuple[Snapshot | None, str]:
    """The snapshot the new one (commit, recipe, egress and lockfile hashes filled in) may
    stack on, and why; (None, why not) when it must be rebuilt from scratch."""
    previous = _previous(repository, snapshot.branch, backend_name)
    if previous is None or not previous.backend_ref:
        return None, "no ready snapshot of the branch to start from"
    if (previous.recipe_toml, previous.recipe_source) != (
        snapshot.recipe_toml,
        snapshot.recipe_source,
    ):
        return None, f"the recipe changed since snapshot {previous.pk}"
    if previous.egress != snapshot.egress:
        return None, f"the egress in force changed since snapshot {previous.pk}"
    if previous.lockfile_hashes != snapshot.lockfile_hashes:
        changed = sorted(
            path
            for path in {*previous.lockfile_hashes, *snapshot.lockfile_hashes}
            if previous.lockfile_hashes.get(path) != snapshot.lockfile_hashes.get(path)
        )
        return None, f"{changed[0]} changed since snapshot {previous.pk}"
    if not previous.commit or not mirror.is_ancestor(mirror_dir, previous.commit, snapshot.commit):
        return None, f"{snapshot.commit[:12]} does not descend from snapshot {previous.pk}'s commit"
    return previous, f"stacked on snapshot {previous.pk} ({previous.commit[:12]})"


def catch_up(sandbox: Sandbox, mirror_dir, previous: Snapshot, commit: str) -> list[str]:
    """Bring the restored tree of `previous` to `commit` (no network, no credentials: a bundle
    from the mirror); returns the paths that changed. CatchUpFailed when git refuses."""
    if previous.commit == commit:
        return []
    _, paths = mirror.drift(mirror_dir, previous.commit, commit)
    branch = previous.branch
    sandbox.write_file(SYNC_BUNDLE, mirror.bundle(mirror_dir, previous.commit, commit, branch))
    result = sandbox.run(
        # The restored files have new stat data; refresh the index so git sees them unchanged.
        f"{GIT} update-index -q --refresh >/dev/null;"
        f" {GIT} fetch --quiet {SYNC_BUNDLE} +refs/heads/{branch}:refs/inspect/sync"
        f" && {GIT} reset --quiet --keep {commit} && {GIT} update-ref -d refs/inspect/sync"
        f" && rm -f {SYNC_BUNDLE}",
        cwd="/workspace",
        timeout=600,
    )
    if not result.ok:
        raise CatchUpFailed(f"git could not move the tree: {result.stderr.strip()[-300:]}")
    return paths


def record_layers(snapshot: Snapshot, previous: Snapshot | None) -> None:
    """Fill in the snapshot's layer depth, parent and the bytes its own layer added; queue a
    background flatten once the stack is FLATTEN_DEPTH deep."""
    backend = sandbox_backend(snapshot.backend)
    layers = backend.snapshot_layers(SnapshotRef.parse(snapshot.backend_ref))
    snapshot.layer_depth = len(layers)
    if previous is None:
        snapshot.kind = Snapshot.Kind.FULL
        return
    snapshot.kind, snapshot.parent = Snapshot.Kind.INCREMENTAL, previous
    grew = snapshot.layer_depth > previous.layer_depth
    added = backend.layer_bytes(layers[-1]) if grew else 0
    snapshot.added_bytes = added if added >= 0 else None  # None: the backend cannot tell
    if snapshot.layer_depth >= FLATTEN_DEPTH:
        pk = snapshot.pk
        transaction.on_commit(lambda: current_app.send_task(FLATTEN_TASK, args=(pk,)))


def flatten_stack(snapshot_id: int) -> bool:
    """Replace a deep snapshot's layer stack by one layer of the same tree (O(tree), so in
    the background). Layers older snapshots still stack on stay theirs; returns whether the
    snapshot now restores from the flat copy."""
    snapshot = Snapshot.objects.filter(pk=snapshot_id, state=Snapshot.State.READY).first()
    if snapshot is None or snapshot.layer_depth < 2 or not snapshot.backend_ref:
        return False
    backend = sandbox_backend(snapshot.backend)
    old = SnapshotRef.parse(snapshot.backend_ref)
    flat = backend.flatten_snapshot(old)
    if flat == old:
        return False
    moved = Snapshot.objects.filter(pk=snapshot.pk, backend_ref=snapshot.backend_ref).update(
        backend_ref=str(flat), layer_depth=1
    )
    try:
        # Sandboxes restored from the old stack keep their layers until they end.
        backend.delete_snapshot(old if moved else flat)
    except SandboxError as exc:
        log.warning("after flattening snapshot %s: %s", snapshot.pk, exc)
    return bool(moved)
