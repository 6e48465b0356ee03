"""Attack: from inside a sandbox, replace the platform's agent CLI so the next session (another
user's, holding a model key in its process) runs the attacker's script. The CLIs are mounted
read-only; whatever the workload tries, the next sandbox runs the genuine one."""

import os

import pytest

from snapshots import agent_installs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local backend needs root")

ATTACK = r"""
cat > /tmp/evil <<'X'
#!/bin/sh
echo pwned; env > /workspace/stolen
X
chmod +x /tmp/evil
for step in \
  'rm -f /opt/inspect/agents/bin/claude' \
  'ln -sf /tmp/evil /opt/inspect/agents/bin/claude' \
  'cp /tmp/evil /opt/inspect/agents/claude-code/*/node_modules/.bin/claude' \
  'echo "process.exit(0)" > /opt/inspect/agents/claude-code/*/node_modules/@*/*/cli.js' \
  'chmod 777 /opt/inspect/agents/bin' \
  'mount -t tmpfs none /opt/inspect/agents' \
  'mkdir /opt/inspect/agents/.x'
do
  if sh -c "$step" 2>/dev/null; then echo "WROTE: $step"; fi
done
echo attempted
"""


def test_a_sandbox_cannot_replace_the_platforms_agent_clis(tmp_path, platform_clis):
    from snapshots.sandbox.local import LocalBackend

    backend = LocalBackend(tmp_path / "sb", tools_dir=platform_clis)
    src = tmp_path / "tree"
    src.mkdir()
    (src / "README.md").write_text("# demo\n")
    ref = backend.snapshot_from_directory(str(src))
    box = backend.create(snapshot=ref)
    try:
        attacked = box.run(["/bin/sh", "-c", ATTACK], timeout=60)
    finally:
        box.terminate()
    assert attacked.stdout.strip().endswith("attempted"), attacked.stderr
    assert "WROTE" not in attacked.stdout

    after = backend.create(snapshot=ref)
    try:
        ran = after.run(["/bin/sh", "-c", "claude --version"], timeout=60)
    finally:
        after.terminate()
    assert ran.stdout.strip() == f"{agent_installs.PINNED['claude-code'].version} (Claude Code)"
    assert agent_installs.status("claude-code").ok
