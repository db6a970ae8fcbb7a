"""``opsbot audit ID`` on a journal collector: each sending host tells its own story and
no other's.

The hosts' journals reach the collector through systemd-journal-upload and
systemd-journal-remote (``--split-mode=host``), one file per sender under
/var/log/journal/remote. There ``_UID``, ``_SYSTEMD_UNIT`` and ``_HOSTNAME`` are what a
host sent, not what the collector's journald saw, so the audit believes a host's file only
about that host, and only about a plan that host's own executor accepted. The files here
are real journal files, written by systemd-journal-remote itself from the journal export
format, holding the fields opsbot's units log (shared_io.log.journal_fields): web1 tells the
whole story of its plan; web2 forges entries about web1's plan. The real CLI reads them.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import opsbot_cli.audit
from opsbot_cli.main import main
from opsbot_cli.story import source_host, source_name
from shared_io.log import journal_fields
from shared_io.run import run

JOURNAL_REMOTE = Path("/lib/systemd/systemd-journal-remote")
PLAN = "20261201-101500-0a1b2c3d"  # web1's plan
WEB2_PLAN = "20261201-101700-9f8e7d6c"  # web2's own plan
SHA = "5" * 64
RUN = "7d3c0b1e2f4a4b5c8d9e0f1a2b3c4d5e"
BOOT = "0123456789abcdef0123456789abcdef"
EXECUTOR_UID, DIAGNOSE_UID, ALICE_UID = 998, 997, 1000
NOBODY = 65534

pytestmark = pytest.mark.skipif(
    not JOURNAL_REMOTE.exists() and os.environ.get("CI") != "true",
    reason="systemd-journal-remote is not installed (apt-get install systemd-journal-remote)",
)


def entry(
    host: str,
    seconds: int,
    *,
    uid: int,
    unit: str,
    identifier: str,
    event: str,
    **fields: str,
) -> dict[str, str]:
    """One entry as ``host``'s journald stores what opsbot's ``identifier`` logged: the
    fields shared_io.log sends, and the trusted ones journald adds."""
    logged = journal_fields({"event": event, **fields}, identifier)
    return {
        "__REALTIME_TIMESTAMP": str(1_764_584_100_000_000 + seconds * 1_000_000),
        "__MONOTONIC_TIMESTAMP": str(5_000_000 + seconds * 1_000_000),
        "_BOOT_ID": BOOT,
        "_HOSTNAME": host,
        "_UID": str(uid),
        "_GID": str(uid),
        "_SYSTEMD_UNIT": unit,
        "_TRANSPORT": "journal",
        **logged,
    }


def write_source(path: Path, entries: Sequence[Mapping[str, str]]) -> None:
    """``path`` as systemd-journal-remote writes it, from ``entries`` in export format."""
    export = path.with_suffix(".export")
    blocks = []
    for fields in entries:
        assert not any("\n" in v for v in fields.values()), "the text form has no newlines"
        blocks.append("".join(f"{k}={v}\n" for k, v in fields.items()))
    export.write_text("\n".join(blocks) + "\n", encoding="utf-8")
    done = run([str(JOURNAL_REMOTE), f"--output={path}", str(export)], timeout=30)
    assert done.ok, done
    export.unlink()


def executor(host: str, seconds: int, event: str, **fields: str) -> dict[str, str]:
    return entry(
        host,
        seconds,
        uid=EXECUTOR_UID,
        unit="opsbot-executor.service",
        identifier="opsbot-executor",
        event=event,
        **fields,
    )


def web1_story() -> list[dict[str, str]]:
    """What web1's journald holds of its plan: the diagnosis that proposed it, the
    executor accepting it, root approving it, the apply, the verification; and a line an
    ordinary user logged naming it."""
    return [
        entry(
            "web1",
            0,
            uid=DIAGNOSE_UID,
            unit="opsbot-diagnose.service",
            identifier="opsbot-diagnose",
            event="diagnose.step",
            run_id=RUN,
            tool="unit_status",
        ),
        executor(
            "web1",
            1,
            "plan.accepted",
            run_id=RUN,
            plan_id=PLAN,
            sha256=SHA,
            duplicate="False",
            goal="restart app",
            steps="systemctl restart app.service",
        ),
        entry(
            "web1",
            2,
            uid=0,
            unit="session-3.scope",
            identifier="opsbot",
            event="plan.approved",
            plan_id=PLAN,
            sha256=SHA,
            approver="root",
        ),
        entry(
            "web1",
            3,
            uid=EXECUTOR_UID,
            unit="opsbot-apply.service",
            identifier="opsbot-apply",
            event="step.finished",
            plan_id=PLAN,
            sha256=SHA,
            step="1",
            exit_status="0",
            outcome="ok",
        ),
        entry(
            "web1",
            4,
            uid=EXECUTOR_UID,
            unit="opsbot-apply.service",
            identifier="opsbot-apply",
            event="plan.applied",
            plan_id=PLAN,
            sha256=SHA,
            state="APPLIED",
        ),
        executor("web1", 5, "plan.verified", plan_id=PLAN, state="VERIFIED"),
        entry(
            "web1",
            6,
            uid=ALICE_UID,
            unit="session-4.scope",
            identifier="alice",
            event="plan.rejected",
            plan_id=PLAN,
        ),
    ]


def web2_forgeries() -> list[dict[str, str]]:
    """What web2 sends: entries about web1's plan (as web1, as itself, an acceptance as
    web1, an acceptance from an ordinary user), a step of web1's diagnosis run, and the
    true story of its own plan."""
    forged = {"reason": "forged by web2"}
    return [
        entry(
            "web1",
            10,
            uid=0,
            unit="session-1.scope",
            identifier="opsbot",
            event="plan.approved",
            plan_id=PLAN,
            sha256=SHA,
            approver="root",
            **forged,
        ),
        entry(
            "web2",
            11,
            uid=0,
            unit="opsbot-apply.service",
            identifier="opsbot-apply",
            event="plan.applied",
            plan_id=PLAN,
            state="APPLIED",
            **forged,
        ),
        executor("web1", 12, "plan.accepted", plan_id=PLAN, sha256="6" * 64, **forged),
        entry(
            "web2",
            13,
            uid=ALICE_UID,
            unit="session-2.scope",
            identifier="opsbot-executor",
            event="plan.accepted",
            plan_id=PLAN,
            sha256=SHA,
            **forged,
        ),
        entry(
            "web2",
            14,
            uid=DIAGNOSE_UID,
            unit="opsbot-diagnose.service",
            identifier="opsbot-diagnose",
            event="diagnose.step",
            run_id=RUN,
            **forged,
        ),
        executor("web2", 20, "plan.accepted", plan_id=WEB2_PLAN, sha256="8" * 64),
        executor("web2", 21, "plan.verified", plan_id=WEB2_PLAN, state="VERIFIED"),
    ]


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A collector's /var/log/journal/remote: web1's file and web2's."""
    remote = tmp_path_factory.mktemp("remote")
    write_source(remote / "remote-web1.journal", web1_story())
    write_source(remote / "remote-web2.journal", web2_forgeries())
    return remote


def audit(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    status = main(["audit", *argv, "--no-pager"])
    out, err = capsys.readouterr()
    return status, out + err


def audit_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    status, out = audit(capsys, *argv, "--json")
    return status, json.loads(out)


def test_each_host_tells_its_own_story_and_forgeries_are_ignored(
    collector: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """web1's section holds its plan's whole story, diagnosis run included, and nothing
    web2 sent; web2's entries naming web1's plan are each counted with the reason they
    were ignored, and web2 has no story of a plan its executor never accepted."""
    status, report = audit_json(capsys, PLAN, "--remote-dir", str(collector))
    assert status == 0, report
    web1 = report["hosts"]["web1"]
    assert [e["event"] for e in web1["entries"]] == [
        "diagnose.step",
        "plan.accepted",
        "plan.approved",
        "step.finished",
        "plan.applied",
        "plan.verified",
    ]
    assert all(e.get("reason") != "forged by web2" for e in web1["entries"])
    assert web1["entries"][1]["run_id"] == RUN and web1["ignored"] == 1  # alice's line
    assert report["hosts"]["web2"] == {
        "files": ["remote-web2.journal"],
        "entries": [],
        "not_from_its_writer": [],
        "ignored": 4,
    }
    assert sorted(report["ignored_forged"], key=lambda f: f["reason"]) == [
        {
            "source": "web2",
            "claimed_host": "web1",
            "reason": "claims to be host web1, sent by web2",
        },
        {
            "source": "web2",
            "claimed_host": "web1",
            "reason": "claims to be host web1, sent by web2",
        },
        {
            "source": "web2",
            "claimed_host": "web2",
            "reason": f"web2's opsbot-executor.service never accepted plan {PLAN}",
        },
    ]
    assert report["entries"] == [] and report["plan_id"] == PLAN


def test_the_text_report_has_a_section_per_host(
    collector: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The operator reads one section per sending host, named with its file, and what
    each host was not believed about."""
    status, text = audit(capsys, PLAN, "--remote-dir", str(collector))
    assert status == 0, text
    assert "host web1  (remote-web1.journal)" in text
    assert "host web2  (remote-web2.journal)" in text
    web1, web2 = text.split("host web2  (remote-web2.journal)")
    assert "plan.verified" in web1 and "approver=root" in web1 and "forged" not in web1
    assert "(2 ignored: claims to be host web1, sent by web2)" in web2
    assert "never accepted plan" in web2 and "plan.applied" not in web2


def test_a_host_speaks_only_of_itself(collector: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--host web2`` on web1's plan shows nothing (exit 1, as a story with no entries);
    on web2's own plan, web2's own story."""
    status, report = audit_json(capsys, PLAN, "--remote-dir", str(collector), "--host", "web2")
    assert status == 1
    assert list(report["hosts"]) == ["web2"] and report["hosts"]["web2"]["entries"] == []
    assert report["entries"] == []
    status, text = audit(capsys, PLAN, "--remote-dir", str(collector), "--host", "web2")
    assert status == 1 and "opsbot: error: no journal entries from opsbot" in text
    status, report = audit_json(capsys, WEB2_PLAN, "--remote-dir", str(collector))
    assert status == 0
    events = [e["event"] for e in report["hosts"]["web2"]["entries"]]
    assert events == ["plan.accepted", "plan.verified"]
    assert report["hosts"]["web1"]["entries"] == [] and report["ignored_forged"] == []


def test_a_source_named_by_its_address_is_the_host_it_is_mapped_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Debian 12's journal-remote (no GnuTLS) names a sender's file after its address:
    unmapped, the address is no host and each entry is ignored as a claim to be another;
    ``--source ADDRESS=HOST`` makes it web1's."""
    write_source(tmp_path / "remote-10.0.0.1.journal", web1_story())
    status, report = audit_json(capsys, PLAN, "--remote-dir", str(tmp_path))
    assert status == 1 and report["hosts"]["10.0.0.1"]["entries"] == []
    assert report["ignored_forged"][0]["reason"] == "claims to be host web1, sent by 10.0.0.1"
    status, report = audit_json(
        capsys, PLAN, "--remote-dir", str(tmp_path), "--source", "10.0.0.1=web1"
    )
    assert status == 0 and len(report["hosts"]["web1"]["entries"]) == 6


def test_source_names_as_journal_remote_writes_them() -> None:
    """The file names journal-remote gives: a certificate's DN (escaped), an archived
    file of a source, an address, a plain name; anything else is no source."""
    assert source_name(Path("remote-CN=web1.journal")) == "CN=web1"
    assert source_name(Path("remote-CN=web\\x20one.journal")) == "CN=web one"
    archived = "remote-web1@" + "a" * 32 + "-" + "0" * 15 + "1-" + "0" * 15 + "2.journal"
    assert source_name(Path(archived)) == "web1"
    assert source_name(Path("remote-10.0.0.2.journal")) == "10.0.0.2"
    assert source_name(Path("system.journal")) is None
    assert source_name(Path("remote-web1.journal~")) is None
    assert source_host("CN=web1", {}) == "web1"
    assert source_host("CN=web1,O=opsbot", {}) == "web1"
    assert source_host("10.0.0.2", {"10.0.0.2": "web2"}) == "web2"
    assert source_host("web3", {}) == "web3"


@pytest.fixture
def root_only_collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The default collector directory, listable by all, its file root's alone (as
    journal-remote's files are to an operator)."""
    remote = Path(tempfile.mkdtemp(prefix="opsbot-remote-"))
    try:
        remote.chmod(0o755)
        write_source(remote / "remote-web1.journal", web1_story())
        (remote / "remote-web1.journal").chmod(0o600)
        monkeypatch.setattr(opsbot_cli.audit, "REMOTE_DIR", remote)
        yield remote
    finally:
        shutil.rmtree(remote)


def as_nobody(argv: list[str]) -> tuple[int, str]:
    """``opsbot ARGV`` in a forked child that dropped to uid nobody: its status, stderr."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 99
        try:
            os.dup2(write, 2)
            sys.stderr = os.fdopen(2, "w", closefd=False)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            status = main(argv)
        finally:
            sys.stderr.flush()
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as pipe:
        err = pipe.read()
    _, wait_status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(wait_status), err


@pytest.mark.skipif(os.geteuid() != 0, reason="drops to uid nobody: needs root")
def test_an_operator_on_the_collector_is_told_the_hosts_files_need_root(
    root_only_collector: Path,
) -> None:
    """Not root, the audit still reads this host's journal; the hosts' files it cannot
    read are named in the hint (sudo), and asked for by --remote-dir they are an error."""
    status, err = as_nobody(["audit", PLAN, "--no-pager"])
    assert status == 1, err
    assert "no journal entries from opsbot for plan" in err
    assert f"the other hosts' journals in {root_only_collector} need root" in err
    status, err = as_nobody(["audit", PLAN, "--remote-dir", str(root_only_collector)])
    assert status == 1 and "permission denied" in err and "run it as root" in err, err
