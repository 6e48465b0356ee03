"""The platform provides the agent CLIs, pinned: installed by npm into a directory of their own,
checked with the platform's node, and on PATH in every sandbox (bwrap and gVisor) with no
recipe install step."""

import os
import shutil

import pytest

from sessions.agents import installs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root")


@pytest.fixture(scope="module", params=["bwrap", "runsc"])
def backend(request, tmp_path_factory, platform_clis):
    from snapshots.sandbox.local import LocalBackend

    if request.param == "runsc":
        from snapshots.sandbox import runsc

        if runsc.problem():
            pytest.skip(f"runsc cannot run here: {runsc.problem()}")
    elif not shutil.which("bwrap"):
        pytest.skip("bubblewrap is not installed")
    be = LocalBackend(
        tmp_path_factory.mktemp("clis-" + request.param),
        runtime=request.param,
        tools_dir=platform_clis,
    )
    src = tmp_path_factory.mktemp("tree")
    (src / "README.md").write_text("# demo\n")
    be.base = be.snapshot_from_directory(str(src))  # type: ignore[attr-defined]
    yield be
    for sid in be.list_sandboxes():
        be.attach(sid).terminate()
    be.reap()


def test_each_pinned_cli_is_installed_and_starts_with_the_platforms_node(platform_clis):
    for runtime, cli in installs.PINNED.items():
        status = installs.status(runtime)
        assert status.ok, (runtime, status.detail)
        assert cli.version in status.detail
        assert installs.node_problem(runtime, cli.version) == ""


def test_every_sandbox_runs_the_pinned_clis_from_path_with_no_install_step(backend):
    box = backend.create(snapshot=backend.base)
    try:
        ran = box.run(
            ["/bin/sh", "-c", "claude --version; codex --version; opencode --version"],
            timeout=120,
        )
    finally:
        box.terminate()
    assert ran.exit_code == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0] == f"{installs.PINNED['claude-code'].version} (Claude Code)"
    assert lines[1] == f"codex-cli {installs.PINNED['codex'].version}"
    assert lines[2] == installs.PINNED["opencode"].version


@pytest.mark.parametrize(
    ("runtime", "version", "said"),
    [
        ("codex", "0.171.0; rm -rf /", "is not a release number like 0.171.0"),
        ("codex", "../../etc", "is not a release number"),
        ("gemini", "1.0.0", "'gemini' is not an agent CLI the platform provides"),
    ],
)
def test_a_bad_version_pin_is_refused_before_anything_runs(runtime, version, said):
    with pytest.raises(installs.InstallError, match=said.replace(".", r"\.")):
        installs.sandbox_binary(runtime, version)


def test_a_version_npm_does_not_have_fails_with_npms_words_and_leaves_nothing(
    platform_clis, settings, tmp_path
):
    settings.AGENT_CLIS_DIR = tmp_path / "clis"
    with pytest.raises(installs.InstallError) as raised:
        installs.install("opencode", "0.0.1-nonexistent")
    assert "npm install opencode-ai@0.0.1-nonexistent failed" in str(raised.value)
    assert not list((tmp_path / "clis" / "opencode").iterdir())
