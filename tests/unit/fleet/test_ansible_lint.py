"""ansible-lint passes on the opsbot.fleet collection (roles, playbooks, galaxy.yml, meta),
offline, with the production profile and warnings as failures (packaging/ansible/.ansible-lint):
a linter run as a test, as mkosi runs its own, and run as a developer would, plainly from
the collection's directory (the collection found through its ansible.cfg). Skipped only
where ansible-lint is not installed, and never in CI (CI=true), where the test extras
install it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Real ansible-playbook runs: minutes a developer skips with -m 'not slow'.
pytestmark = pytest.mark.slow

ANSIBLE = Path(__file__).resolve().parents[3] / "packaging" / "ansible"
COLLECTION = ANSIBLE / "ansible_collections" / "opsbot" / "fleet"
LINT = Path(sys.executable).parent / "ansible-lint"


@pytest.mark.skipif(
    not LINT.exists() and os.environ.get("CI") != "true", reason="ansible-lint is not installed"
)
def test_ansible_lint_passes_on_the_collection(tmp_path: Path) -> None:
    """The whole collection, as Galaxy would receive it, linted by a plain `ansible-lint`
    in its directory (no -c, no ANSIBLE_COLLECTIONS_PATH): exit 0, nothing reported."""
    unset = ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS", "ANSIBLE_CONFIG")
    done = subprocess.run(
        [str(LINT)],
        cwd=COLLECTION,
        env={
            **{k: v for k, v in os.environ.items() if k not in unset},
            "ANSIBLE_HOME": str(tmp_path / "ansible-home"),  # its cache, not ~/.ansible
            "NO_COLOR": "1",
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Profile 'production' was required, and it passed." in done.stdout + done.stderr
