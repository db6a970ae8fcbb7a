"""`opsbot check-config` says whether journald seals the journal the trail lives in: a
volatile journal, a persistent one without a sealing key, or sealed (the key
`journalctl --setup-keys` writes beside this machine's journal files)."""

from pathlib import Path

import pytest

from opsbot_cli.check_config import journal_sealing


def test_sealing_is_said_as_it_is_set_up(tmp_path: Path) -> None:
    """No journal directory: volatile; a persistent one without a key: not set up; with the
    key: sealed."""
    try:
        machine = Path("/etc/machine-id").read_text().strip()
    except OSError:
        pytest.skip("no /etc/machine-id here")
    assert journal_sealing(tmp_path) == "volatile journal"
    (tmp_path / machine).mkdir()
    assert journal_sealing(tmp_path) == "not set up"
    (tmp_path / machine / "fss").write_bytes(b"key")
    assert journal_sealing(tmp_path) == "sealed"
