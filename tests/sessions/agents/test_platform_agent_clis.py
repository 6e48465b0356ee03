"""The platform provides the agent CLIs, pinned: installed by npm into a directory of their own,
checked with the platform's node, and on PATH in every sandbox (bwrap and gVisor) with no
recipe install step."""

import os
import shutil
from pathlib import Path

import pytest

from snapshots import agent_installs

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
    for runtime, cli in agent_installs.PINNED.items():
        status = agent_installs.status(runtime)
        assert status.ok, (runtime, status.detail)
        assert cli.version in status.detail
        assert agent_installs.node_problem(runtime, cli.version) == ""


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
    assert lines[0] == f"{agent_installs.PINNED['claude-code'].version} (Claude Code)"
    assert lines[1] == f"codex-cli {agent_installs.PINNED['codex'].version}"
    assert lines[2] == agent_installs.PINNED["opencode"].version


@pytest.mark.parametrize(
    ("runtime", "version", "said"),
    [
        ("codex", "0.171.0; rm -rf /", "is not a release number like 0.171.0"),
        ("codex", "../../etc", "is not a release number"),
        ("gemini", "1.0.0", "'gemini' is not an agent CLI the platform provides"),
    ],
)
def test_a_bad_version_pin_is_refused_before_anything_runs(runtime, version, said):
    with pytest.raises(agent_installs.InstallError, match=said.replace(".", r"\.")):
        agent_installs.sandbox_binary(runtime, version)


def test_a_version_npm_does_not_have_fails_with_npms_words_and_leaves_nothing(
    platform_clis, settings, tmp_path
):
    settings.AGENT_CLIS_DIR = tmp_path / "clis"
    with pytest.raises(agent_installs.InstallError) as raised:
        agent_installs.install("opencode", "0.0.1-nonexistent")
    assert "npm install opencode-ai@0.0.1-nonexistent failed" in str(raised.value)
    assert not list((tmp_path / "clis" / "opencode").iterdir())


# -- start-up (`make run`) ---------------------------------------------------------------------


def test_make_run_installs_and_checks_the_pinned_clis_saying_each_step(platform_clis):
    from inspect_web import supervisor

    said: list[str] = []
    assert supervisor.install_agent_clis(said.append) == []
    for runtime, cli in agent_installs.PINNED.items():
        assert any(
            line.startswith(f"agent CLIs: {runtime} {cli.version}: works (") and cli.version in line
            for line in said
        ), said
    assert len(said) == len(agent_installs.PINNED)  # all installed already: nothing else to do


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
        "claude-code": f"works ({agent_installs.PINNED['claude-code'].version} (Claude Code))",
        "codex": f"works (codex-cli {agent_installs.PINNED['codex'].version})",
        "opencode": f"works ({agent_installs.PINNED['opencode'].version})",
    }
    for runtime, said in expected.items():
        line = next(x for x in runtimes if x.startswith(f"  {runtime} "))
        pinned = agent_installs.PINNED[runtime].version
        assert line.startswith(f"  {runtime} {pinned}: {said}"), line


@pytest.mark.django_db
def test_doctor_says_a_cli_is_not_installed_in_the_words_a_turn_would_fail_with(
    inspect_cli, settings, tmp_path
):
    settings.AGENT_CLIS_DIR = tmp_path / "empty"
    code, out, _ = inspect_cli("doctor")
    assert code == 0
    pinned = agent_installs.PINNED["claude-code"].version
    assert (
        f"  claude-code {pinned}: NOT usable: Claude Code {pinned} is not installed on this "
        "platform (`manage.py inspect doctor --install-agents` installs it)"
    ) in out
    with pytest.raises(agent_installs.InstallError, match=f"Claude Code {pinned} is not installed"):
        agent_installs.ready("claude-code")


@pytest.mark.django_db
def test_doctor_install_agents_fails_with_npms_words(inspect_cli, settings, tmp_path, team):
    """A recipe pinning a version npm does not have: doctor --install-agents says what npm
    said and exits non-zero (the platform's own pins are installed beside it)."""
    from snapshots.models import Snapshot

    clis = tmp_path / "clis"
    for runtime, cli in agent_installs.PINNED.items():  # the pinned ones, as linked copies
        (clis / runtime).mkdir(parents=True)
        os.symlink(agent_installs.install_dir(runtime, cli.version), clis / runtime / cli.version)
    Snapshot.objects.create(
        repository=team.repository,
        state=Snapshot.State.READY,
        recipe_toml='[agents]\nopencode = "0.0.1-nonexistent"\n',
        recipe_source=".inspect/environment.toml",
    )
    settings.AGENT_CLIS_DIR = clis
    code, out, err = inspect_cli("doctor", "--install-agents")
    assert code == 1
    for cli in agent_installs.PINNED.values():
        assert f"  {cli.package}@{cli.version}: already installed at " in out
    assert "  opencode-ai@0.0.1-nonexistent: NOT installed: npm install " in out
    assert "opencode-ai@0.0.1-nonexistent failed: npm error" in err
    assert (
        "  opencode 0.0.1-nonexistent: NOT usable: OpenCode 0.0.1-nonexistent is not installed "
        "on this platform (`manage.py inspect doctor --install-agents` installs it) "
        f"[pinned by the recipe of {team.repository.name}]"
    ) in out


# -- recipe pins -------------------------------------------------------------------------------

OLDER_OPENCODE = "1.18.32"  # a real earlier release; the platform pins 1.18.33


@pytest.mark.parametrize(
    ("agents", "said"),
    [
        ('codex = "latest"', "agents.codex: Codex version 'latest' is not a release number like"),
        ('codex = "0.1; curl x|sh"', "agents.codex: Codex version '0.1; curl x|sh' is not a"),
        ("codex = 170", 'agents.codex must be a version string like "0.171.0"'),
        (
            'gemini = "1.0.0"',
            "unknown key agents.gemini; a recipe may pin the agent CLIs claude-code, codex, "
            "opencode",
        ),
    ],
)
def test_a_bad_agent_pin_in_a_recipe_names_the_key_and_what_is_allowed(agents, said):
    from snapshots.recipe import RecipeError, parse_recipe

    with pytest.raises(RecipeError) as raised:
        parse_recipe(f"[agents]\n{agents}\n")
    assert str(raised.value).startswith(".inspect/environment.toml: ")
    assert said in str(raised.value)
    if "release number" in said:
        assert 'a release of @openai/codex on npm, e.g. "0.171.0"' in str(raised.value)


def test_a_recipe_pins_agent_versions():
    from snapshots.recipe import parse_recipe

    recipe = parse_recipe('[agents]\nopencode = "1.18.32"\ncodex = "0.170.0"\n')
    assert recipe.agents == (("codex", "0.170.0"), ("opencode", "1.18.32"))


@pytest.fixture
def versions_dir(settings, monkeypatch):
    """Where these tests install CLI versions the platform does not pin: beside the platform's
    directory (so CI keeps it between runs, like the platform's), never inside it."""
    from snapshots import backends

    directory = Path(
        os.environ.get("INSPECT_TEST_AGENT_CLIS_DIR") or f"{settings.AGENT_CLIS_DIR}-test-versions"
    )
    settings.AGENT_CLIS_DIR = directory
    monkeypatch.setattr(backends, "_backends", {})  # sandboxes see this directory
    return directory


@pytest.fixture
def pinned_repo(inspect_cli, make_git_repo, team, versions_dir):
    """`widgets` whose recipe pins an older OpenCode, with a ready snapshot (built with it)."""
    upstream = make_git_repo(
        files={
            "README.md": "# widgets\n",
            ".inspect/environment.toml": f'[agents]\nopencode = "{OLDER_OPENCODE}"\n',
        }
    )
    team.repository.url = str(upstream.path)
    team.repository.save()
    code, out, err = inspect_cli("snapshot", "refresh", "widgets", "--json")
    assert code == 0, err
    return team.repository


@pytest.mark.django_db
def test_a_recipes_pinned_version_is_installed_on_the_worker_when_the_snapshot_is_built(
    pinned_repo, versions_dir
):
    from snapshots.models import Snapshot

    snapshot = Snapshot.objects.get(repository=pinned_repo)
    assert snapshot.state == Snapshot.State.READY, snapshot.error
    assert f"$ install agent CLI opencode-ai@{OLDER_OPENCODE}" in snapshot.log
    assert f"opencode {OLDER_OPENCODE} is installed on the worker at {versions_dir}" in (
        snapshot.log
    )
    assert agent_installs.status("opencode", OLDER_OPENCODE).detail == OLDER_OPENCODE


@pytest.mark.django_db
def test_a_bad_pin_fails_the_snapshot_build_naming_the_key(
    inspect_cli, make_git_repo, team, versions_dir
):
    from snapshots.models import Snapshot

    upstream = make_git_repo(
        files={"README.md": "# w\n", ".inspect/environment.toml": '[agents]\ncodex = "newest"\n'}
    )
    team.repository.url = str(upstream.path)
    team.repository.save()
    inspect_cli("snapshot", "refresh", "widgets", "--json")
    snapshot = Snapshot.objects.get(repository=team.repository)
    assert snapshot.state == Snapshot.State.FAILED
    assert snapshot.error.startswith(
        ".inspect/environment.toml: agents.codex: Codex version 'newest' is not a release number"
    )


@pytest.mark.django_db
def test_the_sessions_sandbox_runs_the_version_its_recipe_pins(pinned_repo, inspect_cli):
    """A real npm install of an older real release: the runtime's executable in a sandbox
    restored from the repository's snapshot is that version, not the platform's."""
    from sessions.agents.base import Turn
    from sessions.agents.opencode import OpenCodeAgent
    from snapshots.models import Snapshot
    from snapshots.restore import recipe_of, restore_sandbox

    snapshot = Snapshot.objects.get(repository=pinned_repo)
    restored = restore_sandbox(pinned_repo, run_start=False)
    try:
        turn = Turn(
            sandbox=restored.sandbox,
            prompt="x",
            author=None,  # type: ignore[arg-type]
            options={"agent_versions": dict(recipe_of(snapshot).agents)},
        )
        agent = OpenCodeAgent(env={})
        executable = agent.executable(turn)
        assert executable == (
            f"/opt/inspect/agents/opencode/{OLDER_OPENCODE}/node_modules/.bin/opencode"
        )
        ran = restored.sandbox.run(["/bin/sh", "-c", f"{executable} --version"], timeout=120)
        assert ran.exit_code == 0, ran.stderr
        assert ran.stdout.strip() == OLDER_OPENCODE
    finally:
        restored.sandbox.terminate()


@pytest.mark.django_db
def test_the_runner_gives_the_turn_the_recipes_pin_and_runs_that_version(
    pinned_repo, create_session, settings, versions_dir
):
    """The session's turn runs the pinned OpenCode: the runner passes the recipe's pins as
    `Turn.options["agent_versions"]`, and the process it runs (audited) is that version's. Gone
    from this worker since the snapshot was built, it is installed again before the turn."""
    from approvals.models import AuditEntry

    shutil.rmtree(versions_dir / "opencode" / OLDER_OPENCODE)
    settings.LLM_API_KEY = "sk-test-pins"
    settings.AGENT_MAX_WALL_SECONDS = 10  # no model is reachable: how the turn ends is not tested
    code, summary, err = create_session("--prompt", "say hi", "--agent", "opencode", "--inline")
    assert summary is not None, err
    process = AuditEntry.objects.get(
        action="sandbox.command", object_id=str(summary["id"]), data__phase="agent"
    )
    assert process.data["command"].startswith(
        f"/opt/inspect/agents/opencode/{OLDER_OPENCODE}/node_modules/.bin/opencode run "
    )
    assert agent_installs.is_installed("opencode", OLDER_OPENCODE)


# -- a version that does not start with the platform's node ------------------------------------

NODE22_CLAUDE = "2.1.198"  # the first Claude Code release that needs node >= 22


@pytest.fixture
def node22_claude(versions_dir):
    """A real release that does not start with this machine's node (Debian's node 20): npm
    installs it (engines are only a warning), the platform must say it cannot run."""
    agent_installs.install("claude-code", NODE22_CLAUDE)
    if not agent_installs.node_problem("claude-code", NODE22_CLAUDE):
        pytest.skip("this machine's node is new enough for it")
    return NODE22_CLAUDE


def node_words(version: str) -> str:
    import subprocess

    node = subprocess.run(["/usr/bin/node", "--version"], capture_output=True, text=True).stdout
    return f"Claude Code {version} needs node >= 22; this machine has {node.strip()}"


@pytest.mark.django_db
def test_a_pin_that_does_not_start_with_the_platforms_node_fails_the_build_and_doctor_says_so(
    node22_claude, inspect_cli, make_git_repo, team
):
    from snapshots.models import Snapshot

    upstream = make_git_repo(
        files={
            "README.md": "# w\n",
            ".inspect/environment.toml": f'[agents]\nclaude-code = "{node22_claude}"\n',
        }
    )
    team.repository.url = str(upstream.path)
    team.repository.save()
    inspect_cli("snapshot", "refresh", "widgets", "--json")
    snapshot = Snapshot.objects.get(repository=team.repository)
    assert snapshot.state == Snapshot.State.FAILED
    assert snapshot.error == (
        f"agents.claude-code = '{node22_claude}': Claude Code {node22_claude} (claude-code) does "
        f"not start: {node_words(node22_claude)}"
    )
    code, out, _ = inspect_cli("doctor")
    assert (
        f"  claude-code {node22_claude}: NOT usable: {node_words(node22_claude)} "
        f"[pinned by the recipe of {team.repository.name}]"
    ) in out


@pytest.mark.django_db
def test_a_turn_whose_cli_does_not_start_with_the_platforms_node_fails_naming_it(
    node22_claude, pinned_repo, create_session, settings
):
    """The snapshot was built while the pin worked (here: another pin); now it does not start
    with this machine's node: the turn fails naming the runtime and its version, before the CLI
    runs, in the words doctor uses."""
    from snapshots.models import Snapshot

    Snapshot.objects.filter(repository=pinned_repo).update(
        recipe_toml=f'[agents]\nclaude-code = "{node22_claude}"\n'
    )
    settings.ANTHROPIC_API_KEY = "sk-ant-test-pins"
    code, summary, err = create_session("--prompt", "x", "--agent", "claude-code", "--inline")
    assert code == 1 and summary["state"] == "failed", err
    assert summary["error"] == (
        f"Claude Code {node22_claude} (claude-code) does not start: {node_words(node22_claude)}"
    )


def test_the_platform_pins_exactly_the_cli_runtimes_of_the_one_list():
    from inspect_web.runtimes import AGENT_RUNTIMES, CLI_RUNTIMES
    from sessions.agents import RUNTIME_NAMES

    assert set(agent_installs.PINNED) == set(CLI_RUNTIMES) <= set(AGENT_RUNTIMES)
    assert list(AGENT_RUNTIMES) == RUNTIME_NAMES
