"""Sandbox restore benchmark (issue: sandboxes and snapshots).

    .venv/bin/python bench/sandbox.py [--iterations 40]

Builds two repositories from a local upstream (≈5 MB / 500 files and ≈300 MB / 30,000 files),
snapshots them through the real build path, then measures, in this one run:
- restore-to-first-command (restore_ms + exec_ms of `true`), p50 and p95, small and large,
  beside the baseline of restoring by copying the tree (what a non-CoW backend must do);
- cold start (fetch + clone + setup + freeze of the large tree) against restore;
- 20 sandboxes restored concurrently from one snapshot: time until all run, isolation of writes.
Prints a table and, on the last line, JSON (also written to var/bench/sandbox.json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "var" / "bench"
os.environ["INSPECT_DATA_DIR"] = str(BENCH_DIR / "data")
os.environ.pop("DATABASE_URL", None)  # a private SQLite file: nothing of the real one is touched
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspect_web.settings")
sys.path.insert(0, str(ROOT))

TREES = {"small": (500, 10_000), "large": (30_000, 10_000)}  # files, bytes per file
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}  # fmt: skip
from bench.harness import embedded_redis  # noqa: E402 - after the path and environment

RECIPE = 'setup = ["git ls-files | head -2000 | xargs cat | sha256sum > build.sha"]\n'


def make_upstream(name: str, files: int, size: int) -> Path:
    path = BENCH_DIR / f"upstream-{name}"
    if (path / ".git" / "bench-complete").exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    per_dir = 500
    for i in range(files):
        folder = path / f"pkg{i // per_dir:03d}"
        folder.mkdir(exist_ok=True)
        # Text that compresses like source code does, not like random bytes.
        line = f"def function_{i}(value):  # module {i}\n    return value * {i} + {i % 97}\n"
        (folder / f"module_{i}.py").write_text((line * (size // len(line) + 1))[:size])
    (path / ".inspect").mkdir()
    (path / ".inspect" / "environment.toml").write_text(RECIPE)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "tree"]):
        subprocess.run(["git", *args], cwd=path, env=GIT_ENV, check=True)
    (path / ".git" / "bench-complete").write_text("ok")
    return path


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def restore_once(repository) -> tuple[float, float]:
    from snapshots.restore import restore_sandbox

    restored = restore_sandbox(repository)
    try:
        started = time.perf_counter()
        result = restored.sandbox.exec("true").wait()
        exec_ms = (time.perf_counter() - started) * 1000
        assert result.exit_code == 0, result
        return restored.timings["restore_ms"] + restored.timings.get("sync_ms", 0), exec_ms
    finally:
        restored.sandbox.terminate()


def copy_restore_once(snapshot) -> float:
    """Baseline: the same backend restoring by copying the tree, as it must where overlayfs is
    unavailable (what a non-copy-on-write sandbox pays per session)."""
    from django.conf import settings

    from snapshots.sandbox import SnapshotRef
    from snapshots.sandbox.local import LocalBackend

    backend = LocalBackend(root=settings.SANDBOX_ROOT, force_copy=True)
    started = time.perf_counter()
    sandbox = backend.create(snapshot=SnapshotRef.parse(snapshot.backend_ref))
    try:
        assert sandbox.exec("true").wait().exit_code == 0
        return (time.perf_counter() - started) * 1000
    finally:
        sandbox.terminate()


def concurrent_restores(repository, count: int = 20) -> dict:
    from snapshots.restore import restore_sandbox

    barrier = threading.Barrier(count)
    results: list[dict] = [{} for _ in range(count)]
    started = time.perf_counter()

    def one(i: int) -> None:
        from django.db import connection

        try:
            barrier.wait()
            try:
                restored = restore_sandbox(repository, sync=False)
            except Exception as exc:  # reported, not hidden: a failed restore fails the target
                results[i] = {"error": f"{exc.__class__.__name__}: {exc}"}
                return
            sandbox = restored.sandbox
            sandbox.write_file(f"mine-{i}.txt", f"{i}\n".encode())
            listing = sandbox.run("ls mine-*.txt; cat mine-*.txt")
            results[i] = {
                "running_ms": (time.perf_counter() - started) * 1000,
                "sees_only_own": listing.stdout.split() == [f"mine-{i}.txt", str(i)],
                "sandbox": sandbox,
            }
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    errors = [r["error"] for r in results if "error" in r]
    ok = [r for r in results if "error" not in r]
    all_running_ms = max((r["running_ms"] for r in ok), default=float("nan"))
    isolated = bool(ok) and all(r["sees_only_own"] for r in ok)
    for r in ok:
        r["sandbox"].terminate()
    return {
        "count": count,
        "all_running_ms": round(all_running_ms, 1),
        "isolated": isolated and not errors,
        "failed": len(errors),
        "errors": errors[:3],
    }


def measure(iterations: int) -> dict:
    from django.conf import settings
    from django.core.management import call_command

    from snapshots.build import snapshot_build
    from snapshots.models import Repository, Snapshot

    call_command("migrate", verbosity=0)
    report: dict = {"machine": {"cpus": os.cpu_count(), "backend": settings.SANDBOX_RUNTIME}}
    for name, (files, size) in TREES.items():
        upstream = make_upstream(name, files, size)
        repository, _ = Repository.objects.get_or_create(
            name=f"bench-{name}", defaults={"url": str(upstream)}
        )
        snapshot = snapshot_build(repository)
        assert snapshot.state == Snapshot.State.READY, snapshot.error
        restore_once(repository)  # warm the page cache as a real worker's would be
        samples = [restore_once(repository) for _ in range(iterations)]
        totals = [r + e for r, e in samples]
        copies = [copy_restore_once(snapshot) for _ in range(3 if name == "large" else 10)]
        report[name] = {
            "files": snapshot.file_count,
            "bytes": snapshot.size_bytes,
            "restore_ms_p50": round(statistics.median(r for r, _ in samples), 1),
            "exec_ms_p50": round(statistics.median(e for _, e in samples), 1),
            "first_command_ms_p50": round(percentile(totals, 50), 1),
            "first_command_ms_p95": round(percentile(totals, 95), 1),
            "baseline_copy_restore_ms_p50": round(statistics.median(copies), 1),
            "cold_start_s": snapshot.build_seconds,
        }
    small, large = report["small"], report["large"]
    report["large_small_p50_ratio"] = round(
        large["first_command_ms_p50"] / small["first_command_ms_p50"], 2
    )
    report["cold_start_vs_restore_ratio"] = round(
        large["cold_start_s"] * 1000 / large["first_command_ms_p50"], 1
    )
    report["concurrent"] = concurrent_restores(Repository.objects.get(name="bench-small"))
    both = (small, large)
    report["targets"] = {
        "p50_le_100ms": all(t["first_command_ms_p50"] <= 100 for t in both),
        "p95_le_250ms": all(t["first_command_ms_p95"] <= 250 for t in both),
        "ratio_le_1_5": report["large_small_p50_ratio"] <= 1.5,
        "cold_ratio_ge_50": report["cold_start_vs_restore_ratio"] >= 50,
        "concurrent_le_2s": report["concurrent"]["all_running_ms"] <= 2000
        and report["concurrent"]["isolated"],
    }  # fmt: skip
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=40)
    args = parser.parse_args()
    BENCH_DIR.mkdir(parents=True, exist_ok=True)

    import django

    django.setup()
    from django.conf import settings

    run = contextlib.ExitStack()  # the run's embedded Redis stops when it ends
    if settings.EMBEDDED_REDIS:
        run.enter_context(embedded_redis(settings.EMBEDDED_REDIS_DIR))
    with run:
        report = measure(args.iterations)
    print_table(report)
    (BENCH_DIR / "sandbox.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report))
    return 0 if all(report["targets"].values()) else 1


def print_table(report: dict) -> None:
    small, large = report["small"], report["large"]
    rows = [
        ("tree", "small", "large"),
        ("files / size", f"{small['files']} / {small['bytes'] / 1e6:.0f} MB",
         f"{large['files']} / {large['bytes'] / 1e6:.0f} MB"),
        ("restore+exec `true` p50 (ms)", *(t["first_command_ms_p50"] for t in (small, large))),
        ("restore+exec `true` p95 (ms)", *(t["first_command_ms_p95"] for t in (small, large))),
        ("  of which restore p50 (ms)", small["restore_ms_p50"], large["restore_ms_p50"]),
        ("  of which exec p50 (ms)", small["exec_ms_p50"], large["exec_ms_p50"]),
        ("baseline: copy restore p50 (ms)", small["baseline_copy_restore_ms_p50"],
         large["baseline_copy_restore_ms_p50"]),
        ("cold start: fetch+clone+setup+freeze (s)", small["cold_start_s"], large["cold_start_s"]),
    ]  # fmt: skip
    width = max(len(str(r[0])) for r in rows)
    for label, a, b in rows:
        print(f"{label:<{width}}  {a!s:>14}  {b!s:>16}")
    concurrent = report["concurrent"]
    print(f"large/small p50 ratio: {report['large_small_p50_ratio']} (target <= 1.5)")
    print(f"cold start / restore (large): {report['cold_start_vs_restore_ratio']}x (target >= 50x)")
    print(
        f"{concurrent['count']} concurrent restores: all running after "
        f"{concurrent['all_running_ms']} ms (target <= 2000), each sees only its own writes: "
        f"{concurrent['isolated']}"
    )
    print(
        "targets: "
        + ", ".join(f"{k}={'met' if v else 'MISSED'}" for k, v in report["targets"].items())
    )


if __name__ == "__main__":
    sys.exit(main())
