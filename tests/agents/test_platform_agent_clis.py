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


# -- start-up (`make run`) ---------------------------------------------------------------------


def test_make_run_installs_and_checks_the_pinned_clis_saying_each_step(platform_clis):
    from inspect_web import supervisor

    said: list[str] = []
    assert supervisor.install_agent_clis(said.append) == []
    for runtime, cli in installs.PINNED.items():
        assert any(
            line.startswith(f"agent CLIs: {runtime} {cli.version}: works (") and cli.version in line
            for line in said
        ), said
    assert len(said) == len(installs.PINNED)  # all installed already: nothing else to do


def test_make_run_says_clearly_when_npm_is_missing_and_the_ui_still_starts(
    monkeypatch, settings, tmp_path
):
    from inspect_web import supervisor

    settings.AGENT_CLIS_DIR = tmp_path / "clis"
    monkeypatch.setenv("PATH", str(tmp_path / "no-npm-here"))
    said: list[str] = []
    problems = supervisor.install_agent_clis(said.append)
    assert said == [
        "agent CLIs: npm is not installed on this machine, so the agent CLIs cannot be installed "
        "(Debian packages: npm; `make run` installs them as root)"
    ]
    assert problems and not (tmp_path / "clis").exists()


def test_make_run_installs_the_clis_in_the_background_after_the_preflight():
    import inspect

    from inspect_web import supervisor

    source = inspect.getsource(supervisor.run)
    started = source.index("threading.Thread(target=install_agent_clis")
    assert source.index('call_command("ensure_admin")') < started < source.index("_wait_healthy")


# -- doctor ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_doctor_lists_every_runtime_its_version_and_that_it_works(inspect_cli, platform_clis):
    code, out, err = inspect_cli("doctor")
    assert code == 0, err
    runtimes = out[out.index("agent runtimes:") :].splitlines()
    assert runtimes[1].startswith("  command: ")
    assert runtimes[2].startswith("  builtin: ") and " model " in runtimes[2]
    expected = {
        "claude-code": f"works ({installs.PINNED['claude-code'].version} (Claude Code))",
        "codex": f"works (codex-cli {installs.PINNED['codex'].version})",
        "opencode": f"works ({installs.PINNED['opencode'].version})",
    }
    for runtime, said in expected.items():
        line = next(x for x in runtimes if x.startswith(f"  {runtime} "))
        assert line.startswith(f"  {runtime} {installs.PINNED[runtime].version}: {said}"), line


@pytest.mark.django_db
def test_doctor_says_a_cli_is_not_installed_in_the_words_a_turn_would_fail_with(
    inspect_cli, settings, tmp_path
):
    settings.AGENT_CLIS_DIR = tmp_path / "empty"
    code, out, _ = inspect_cli("doctor")
    assert code == 0
    pinned = installs.PINNED["claude-code"].version
    assert (
        f"  claude-code {pinned}: NOT usable: Claude Code {pinned} is not installed on this "
        "platform (`manage.py inspect doctor --install-agents` installs it)"
    ) in out
    with pytest.raises(installs.InstallError, match=f"Claude Code {pinned} is not installed"):
        installs.ready("claude-code")


@pytest.mark.django_db
def test_doctor_install_agents_fails_with_npms_words(inspect_cli, settings, tmp_path, team):
    """A recipe pinning a version npm does not have: doctor --install-agents says what npm
    said and exits non-zero (the platform's own pins are installed beside it)."""
    from snapshots.models import Snapshot

    clis = tmp_path / "clis"
    for runtime, cli in installs.PINNED.items():  # the pinned ones, as linked copies
        (clis / runtime).mkdir(parents=True)
        os.symlink(installs.install_dir(runtime, cli.version), clis / runtime / cli.version)
    Snapshot.objects.create(
        repository=team.repository,
        state=Snapshot.State.READY,
        recipe_toml='[agents]\nopencode = "0.0.1-nonexistent"\n',
        recipe_source=".inspect/environment.toml",
    )
    settings.AGENT_CLIS_DIR = clis
    code, out, err = inspect_cli("doctor", "--install-agents")
    assert code == 1
    for cli in installs.PINNED.values():
        assert f"  {cli.package}@{cli.version}: already installed at " in out
    assert "  opencode-ai@0.0.1-nonexistent: NOT installed: npm install " in out
    assert "opencode-ai@0.0.1-nonexistent failed: npm error" in err
    assert (
        "  opencode 0.0.1-nonexistent: NOT usable: OpenCode 0.0.1-nonexistent is not installed "
        "on this platform (`manage.py inspect doctor --install-agents` installs it) "
        f"[pinned by the recipe of {team.repository.name}]"
    ) in out
