"""Incremental snapshot refresh benchmark (issue 19).

    .venv/bin/python bench/refresh.py [--project flask==3.0.3] [--restores 10]

A real repository: the sdist of a small pure-Python project with dependencies (downloaded once,
cached under var/bench/refresh/), `git init`-ed as the upstream. Its recipe's `setup` creates a
venv and `pip install -e .` from the package index inside the sandbox (egress `open`, approved);
`refresh` byte-compiles the sources. In this one run:
- baseline: a full rebuild (fetch, clone, setup, freeze), its time and the snapshot's size;
- a refresh after a 10-file source change, no lockfile change: its time (target <= 10% of the
  full rebuild) and the bytes its layer adds (target <= the changed files' bytes + 1 MB);
- a refresh with nothing new (the check alone);
- restore, and restore plus a walk of the whole tree (`find`, every lookup through the stack),
  from the 3-deep stack, from an 8-deep one (the flatten depth) and from the same tree
  flattened to one layer.
Prints a table and, on the last line, JSON (also written to var/bench/refresh.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "var" / "bench"
WORK = BENCH_DIR / "refresh"
os.environ["INSPECT_DATA_DIR"] = str(WORK / "data")
os.environ.pop("DATABASE_URL", None)  # a private SQLite file: nothing of the real one is touched
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspect_web.settings")
sys.path.insert(0, str(ROOT))

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}  # fmt: skip
RECIPE = (
    'setup = ["python3 -m venv .venv", ".venv/bin/pip install -q -e ."]\n'
    'refresh = [".venv/bin/python -m compileall -q src"]\n'
    'egress = { mode = "open" }\n'
)
MB = 1024 * 1024
# Sandbox starts bubblewrap refused on a loaded machine ("loopback: Failed RTM_NEWADDR"), each
# retried once and reported in the JSON rather than hidden.
RETRIES: list[str] = []


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True
    ).stdout


def make_upstream(project: str) -> Path:
    """The project's sdist (cached) as a git repository with the bench recipe."""
    cache = WORK / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    name = project.split("==")[0]
    sdists = sorted(cache.glob(f"{name}-*.tar.gz"))
    if not sdists:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             "-d", str(cache), project],
            check=True,
        )  # fmt: skip
        sdists = sorted(cache.glob(f"{name}-*.tar.gz"))
    upstream = WORK / "upstream"
    subprocess.run(["rm", "-rf", str(upstream)], check=True)
    upstream.mkdir(parents=True)
    with tarfile.open(sdists[-1]) as tar:
        tar.extractall(upstream, filter="data")
    (top,) = upstream.iterdir()
    (top / ".inspect").mkdir()
    (top / ".inspect" / "environment.toml").write_text(RECIPE)
    git("init", "-q", "-b", "main", cwd=top)
    git("add", "-A", cwd=top)
    git("commit", "-q", "-m", f"{sdists[-1].name}", cwd=top)
    return top


def change_sources(upstream: Path, count: int, round_: int) -> int:
    """Edit `count` source files (no lockfile), commit; returns the changed files' bytes."""
    files = sorted(p for p in upstream.rglob("src/**/*.py"))[:count]
    assert len(files) == count, f"the project has fewer than {count} source files"
    changed = 0
    for path in files:
        with path.open("a") as fh:
            fh.write(f"\n# bench edit {round_}\n")
        changed += path.stat().st_size
    git("commit", "-q", "-am", f"edit {count} files, round {round_}", cwd=upstream)
    return changed


def restore_ms(repository, walk: bool, count: int) -> float:
    """Median ms to restore the newest snapshot (and, with `walk`, to list its whole tree)."""
    from snapshots.restore import restore_sandbox  # after django.setup() (main)
    from snapshots.sandbox import SandboxError  # likewise

    samples = []
    for _ in range(count + 1):  # the first warms the page cache, as a real worker's would be
        started = time.perf_counter()
        try:
            restored = restore_sandbox(repository, sync=False, run_start=False)
        except SandboxError as exc:
            if "failed to start the sandbox" not in str(exc):
                raise
            RETRIES.append(str(exc))  # a start that failed on a loaded machine: once more
            started = time.perf_counter()
            restored = restore_sandbox(repository, sync=False, run_start=False)
        try:
            if walk:
                result = restored.sandbox.run("find . | wc -l", cwd="/workspace")
                assert result.ok, result.stderr
            else:
                assert restored.sandbox.exec("true").wait().exit_code == 0
            samples.append((time.perf_counter() - started) * 1000)
        finally:
            restored.sandbox.terminate()
    return round(statistics.median(samples[1:]), 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", default="flask==3.0.3")
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--restores", type=int, default=10)
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)

    import django

    django.setup()
    # Django's settings and the apps' models load only after django.setup().
    from django.conf import settings
    from django.core.management import call_command

    from inspect_web.embedded_redis import ensure_embedded_redis
    from snapshots import incremental
    from snapshots.build import snapshot_build
    from snapshots.models import Repository, Snapshot

    if settings.EMBEDDED_REDIS:
        ensure_embedded_redis(settings.EMBEDDED_REDIS_DIR)
    call_command("migrate", verbosity=0)
    upstream = make_upstream(args.project)
    Repository.objects.filter(name="bench-refresh").delete()
    repository = Repository.objects.create(
        name="bench-refresh",
        url=str(upstream),
        approved_egress={"mode": "open", "domains": []},  # pip reaches the package index
    )

    def build(**kw) -> Snapshot:
        snapshot = snapshot_build(repository, **kw)
        if (
            snapshot.state == Snapshot.State.FAILED
            and "failed to start the sandbox" in snapshot.error
        ):
            RETRIES.append(snapshot.error)  # a start that failed on a loaded machine: once more
            snapshot = snapshot_build(repository, **kw)
        assert snapshot.state == Snapshot.State.READY, f"{snapshot.error}\n{snapshot.log[-2000:]}"
        return snapshot

    full = build(full=True)
    changed = change_sources(upstream, args.files, 1)
    stacked = build()
    assert stacked.kind == "incremental", stacked.log
    started = time.perf_counter()
    checked = build()
    check_s = time.perf_counter() - started
    assert checked.pk == stacked.pk
    report: dict = {
        "machine": {"cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)},
        "project": args.project,
        "full_rebuild_s": full.build_seconds,
        "full_size_bytes": full.size_bytes,
        "full_files": full.file_count,
        "changed_files": args.files,
        "changed_bytes": changed,
        "incremental_s": stacked.build_seconds,
        "incremental_added_bytes": stacked.added_bytes,
        "incremental_vs_full": round(stacked.build_seconds / full.build_seconds, 3),
        "unchanged_check_s": round(check_s, 2),
        # Where the incremental refresh's time went, as its build log says.
        "incremental_steps": [
            line
            for line in stacked.log.splitlines()
            if line.startswith(("sandbox ready in", "brought the tree", "frozen in", "snapshot "))
        ],
    }
    report["restore_ms"] = {"depth_3": restore_ms(repository, False, args.restores)}
    report["restore_walk_ms"] = {"depth_3": restore_ms(repository, True, args.restores)}
    deep = stacked
    for round_ in range(2, 2 + incremental.FLATTEN_DEPTH - deep.layer_depth):
        change_sources(upstream, 1, round_)
        deep = build()
    report["deep_depth"] = deep.layer_depth
    report["restore_ms"]["deep"] = restore_ms(repository, False, args.restores)
    report["restore_walk_ms"]["deep"] = restore_ms(repository, True, args.restores)
    started = time.perf_counter()
    assert incremental.flatten_stack(deep.pk)
    report["flatten_s"] = round(time.perf_counter() - started, 2)
    report["restore_ms"]["flat"] = restore_ms(repository, False, args.restores)
    report["restore_walk_ms"]["flat"] = restore_ms(repository, True, args.restores)
    report["sandbox_start_retries"] = RETRIES
    report["targets"] = {
        "incremental_le_10pct_of_full": report["incremental_vs_full"] <= 0.10,
        "added_le_changed_plus_1mb": stacked.added_bytes <= changed + MB,
    }
    print_table(report)
    (BENCH_DIR / "refresh.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report))
    return 0 if all(report["targets"].values()) else 1


def print_table(report: dict) -> None:
    rows = [
        ("project", report["project"]),
        ("full rebuild (baseline)", f"{report['full_rebuild_s']:.1f} s, "
         f"{report['full_size_bytes'] / MB:.1f} MB, {report['full_files']} files"),
        (f"refresh after a {report['changed_files']}-file change",
         f"{report['incremental_s']:.2f} s ({report['incremental_vs_full']:.1%} of full; "
         "target <= 10%)"),
        ("  bytes its layer adds", f"{report['incremental_added_bytes']:,} (changed files "
         f"{report['changed_bytes']:,} + 1 MB = {report['changed_bytes'] + MB:,} allowed)"),
        ("refresh with nothing new", f"{report['unchanged_check_s']:.2f} s (the check only)"),
        ("flatten an 8-deep stack", f"{report['flatten_s']:.2f} s (in the background)"),
    ]  # fmt: skip
    for depth in ("depth_3", "deep", "flat"):
        label = {"depth_3": "3 layers", "deep": f"{report['deep_depth']} layers",
                 "flat": "flattened, 1 layer"}[depth]  # fmt: skip
        rows.append(
            (f"restore p50, {label}", f"{report['restore_ms'][depth]} ms; with a walk of the "
             f"whole tree {report['restore_walk_ms'][depth]} ms")
        )  # fmt: skip
    rows += [("  step", step) for step in report["incremental_steps"]]
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    print(f"load average (1 min) at the start: {report['machine']['load_avg_1m']}")
    print(
        "targets: "
        + ", ".join(f"{k}={'met' if v else 'MISSED'}" for k, v in report["targets"].items())
    )


if __name__ == "__main__":
    sys.exit(main())
