"""Coverage-guided fuzzing of the executor socket: the long run, not part of the test suite.

    sudo /opt/opsbot/venv/bin/python fuzz/fuzz_executor_socket.py --runs 100000
    sudo /opt/opsbot/venv/bin/python fuzz/fuzz_executor_socket.py --engine mutate --runs 100000

The target is the real daemon code: ``executor_svc.daemon.Server`` on a real Unix socket
in a temporary directory, served from a thread, with the real ``ExecutorService`` and
``PlanStore`` (the policy of the integration tests: restart/start demo-web and demo-db).
Each input is sent as one client would: connect, write the bytes, half-close, read every
reply line until the daemon hangs up.

Engines:

* ``atheris`` (default): libFuzzer through atheris, with ``shared_schema`` and
  ``executor_svc`` instrumented, so inputs that reach new branches of the framing,
  decoding, validation and policy code are kept and mutated further. Seeded with the
  crafted attacks of testbed/wire_attacks.py.
* ``mutate``: no atheris needed; byte-level mutations (flip, insert, delete, splice,
  poison bytes) of the same seeds, guided by line coverage of the same packages taken
  with ``sys.settrace`` (an input that covers a new line joins the corpus).

Per input, what counts:

* crash: an exception escaped a connection thread of the daemon, or an answer is not a
  well-formed reply (``shared_schema.parse_reply``), or (but for a PLANS listing) is
  larger than 64 KiB, or there are more answers than messages;
* hang: no complete answer within 10 seconds;
* stored-invalid: a plan file that does not load, no longer hashes to its fingerprint,
  or is not allowed by the policy;
* every 200 inputs, a valid submit must still get ACCEPT.

Nothing stops the run: each failure is counted and its input saved under
``--artifacts`` (by default in the run's temporary directory, which is printed first).
Every 10000 inputs, and at the end (``--runs`` inputs), one JSON line of figures is
printed; ``messages`` counts the answers, since one input may hold many messages.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

try:
    import atheris
except ImportError:  # the mutate engine needs no atheris
    atheris = None

INSTRUMENTED = ("shared_schema", "shared_io", "executor_svc")


def _import_target() -> None:
    global Server, Roles, ExecutorService, PlanStore, utcnow, policy_errors
    global parse_reply, MAX_MESSAGE_BYTES, encode_message, SubmitPlan, POLICY, SEEDS, VALID_PLAN
    global exchange, Hang
    from executor_svc.daemon import Server
    from executor_svc.peer import Roles
    from executor_svc.service import ExecutorService
    from plans import PlanStore, policy_errors, utcnow
    from shared_schema import MAX_MESSAGE_BYTES, SubmitPlan, encode_message, parse_reply
    from testbed.inproc import POLICY, Hang, exchange
    from testbed.wire_attacks import SEEDS, VALID_PLAN


class Target:
    """The daemon under attack, and the bookkeeping of one run."""

    def __init__(self, workdir: Path, artifacts: Path) -> None:
        import structlog

        structlog.configure(processors=[self._drop])
        self.workdir = workdir
        self.artifacts = artifacts
        artifacts.mkdir(parents=True, exist_ok=True)
        state = workdir / "state"
        state.mkdir(mode=0o750)
        self.store = PlanStore(state)
        self.store.ensure()
        self.address = str(workdir / "executor.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.address)
        self.listener.listen(256)
        service = ExecutorService(self.store, POLICY, utcnow, workdir / "approvals")
        self.server = Server(
            self.listener,
            service,
            Roles(POLICY.diagnose_user, POLICY.operators_group),
            idle_timeout=0,
            notify=False,
        )
        self.thread_errors: list[str] = []
        threading.excepthook = self._hook
        self.thread = threading.Thread(target=self.server.serve, daemon=True)
        self.thread.start()
        self.valid = encode_message(SubmitPlan(plan=VALID_PLAN))
        self.checked: set[str] = set()
        self.plan_files = 0
        self.figures = {
            "cases": 0,
            "bytes_sent": 0,
            "crashes": 0,
            "hangs": 0,
            "stored_invalid": 0,
            "not_served_after": 0,
            "verdicts": {},
        }
        self.started = time.monotonic()

    @staticmethod
    def _drop(logger: object, name: str, event: object) -> object:
        import structlog

        raise structlog.DropEvent

    def _hook(self, args: threading.ExceptHookArgs) -> None:
        self.thread_errors.append(f"{args.exc_type.__name__}: {args.exc_value}")

    def _save(self, kind: str, data: bytes, why: str) -> None:
        name = f"{kind}-{hashlib.sha256(data).hexdigest()[:16]}"
        (self.artifacts / name).write_bytes(data)
        (self.artifacts / f"{name}.txt").write_text(why + "\n")

    def _exchange(self, data: bytes, timeout: float = 10.0) -> list[bytes] | None:
        try:
            return exchange(self.address, data, timeout=timeout)
        except Hang:
            return None

    def _check_store(self) -> str | None:
        names = [n for n in os.listdir(self.store.plans) if not n.startswith(".tmp-")]
        if len(names) == self.plan_files:
            return None
        self.plan_files = len(names)
        for plan_id in self.store.ids():
            if plan_id in self.checked:
                continue
            try:
                plan = self.store.verified_plan(self.store.load(plan_id))
            except Exception as exc:
                return f"{plan_id}: {exc}"
            errors = policy_errors(plan, POLICY)
            if errors:
                return f"{plan_id} is stored but not allowed: {errors}"
            self.checked.add(plan_id)
        if len(names) != len(self.checked):
            return f"files in plans/ that are not plans: {sorted(set(names))[:5]}"
        return None

    def one(self, data: bytes) -> None:
        figures = self.figures
        figures["cases"] += 1
        figures["bytes_sent"] += len(data)
        lines = self._exchange(data)
        if lines is None:
            figures["hangs"] += 1
            self._save("hang", data, "no complete answer within 10s")
            return
        messages = [f for f in data.split(b"\n") if f.strip()]
        problem = None
        if messages and not lines:
            problem = "no answer"
        elif len(lines) > len(messages):
            problem = f"{len(lines)} answers to {len(messages)} messages"
        for raw in lines:
            try:
                verdict = parse_reply(raw).verdict
            except Exception as exc:
                problem = f"malformed answer {raw[:200]!r}: {exc}"
                break
            if verdict != "PLANS" and len(raw) > MAX_MESSAGE_BYTES:
                problem = f"a {len(raw)}-byte {verdict}"
                break
            figures["verdicts"][verdict] = figures["verdicts"].get(verdict, 0) + 1
        if self.thread_errors:
            problem = f"connection thread crashed: {self.thread_errors}"
            self.thread_errors.clear()
        if problem:
            figures["crashes"] += 1
            self._save("crash", data, problem)
        stored = self._check_store()
        if stored:
            figures["stored_invalid"] += 1
            self._save("stored-invalid", data, stored)
        if figures["cases"] % 200 == 0:
            after = self._exchange(self.valid)
            if not after or parse_reply(after[0]).verdict != "ACCEPT":
                figures["not_served_after"] += 1
                self._save("not-served", data, f"valid submit answered {after!r}")

    def finish(self) -> None:
        """Stop the daemon; remove the run's directory unless a failing input is in it."""
        self.server.stopping.set()
        self.thread.join(timeout=15)
        self.listener.close()
        if not any(self.artifacts.iterdir()):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def summary(self, engine: str, **extra: object) -> dict[str, object]:
        return {
            "engine": engine,
            **self.figures,
            "messages": sum(self.figures["verdicts"].values()),  # type: ignore[attr-defined]
            "plans_stored": len(self.checked),
            "seconds": round(time.monotonic() - self.started, 1),
            **extra,
        }


# -- the mutate engine ---------------------------------------------------------------------

POISON = [
    b"\x00",
    b"\xff",
    b"\xc0\x80",
    b"\xed\xa0\x80",
    b"\n",
    b"\\",
    b'"',
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\\ud800",
    b"\\u0000",
    b"\x1b[2J",
    b"1e999",
    b"NaN",
    b"-",
    b"0",
    b"9" * 20,
    b"true",
    b"null",
    b'"unit"',
    b'"tool"',
    b'"steps"',
]


def mutate(rng: random.Random, data: bytes, corpus: list[bytes]) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        at = rng.randrange(len(out) + 1)
        if op == 0 and out:
            out[min(at, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            out[at:at] = rng.choice(POISON)
        elif op == 2 and out:
            del out[at : at + rng.randint(1, 16)]
        elif op == 3:
            other = rng.choice(corpus)
            cut = rng.randrange(len(other) + 1)
            out = out[:at] + other[cut:]
        elif op == 4 and out:
            out[at:at] = out[max(0, at - 32) : at]  # duplicate a run just before
        else:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
    return bytes(out[: 70 * 1024])


def line_coverage(run: Callable[[], None]) -> set[tuple[str, int]]:
    """Lines of the instrumented packages executed by ``run`` (in any thread)."""
    hits: set[tuple[str, int]] = set()
    roots = tuple(str(ROOT / p) for p in INSTRUMENTED)

    def tracer(frame, event, arg):  # type: ignore[no-untyped-def]
        if not frame.f_code.co_filename.startswith(roots):
            return None
        if event == "line":
            hits.add((frame.f_code.co_filename, frame.f_lineno))
        return tracer

    threading.settrace(tracer)
    sys.settrace(tracer)
    try:
        run()
    finally:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
    return hits


def run_mutate(target: Target, runs: int, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    corpus = list(SEEDS)
    seen: set[tuple[str, int]] = set()
    for data in corpus:
        seen |= line_coverage(lambda d=data: target.one(d))
    while target.figures["cases"] < runs:
        data = mutate(rng, rng.choice(corpus), corpus)
        if target.figures["cases"] % 10 == 0:  # tracing is slow: measure one input in ten
            new = line_coverage(lambda d=data: target.one(d)) - seen
            if new:
                seen |= new
                corpus.append(data)
        else:
            target.one(data)
        if target.figures["cases"] % 10000 == 0:
            print(
                json.dumps(target.summary("mutate", corpus=len(corpus), lines=len(seen))),
                flush=True,
            )
    return target.summary("mutate", corpus=len(corpus), lines_covered=len(seen))


# -- main ----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("atheris", "mutate"), default="atheris")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--artifacts",
        type=Path,
        default=None,
        help="where failing inputs go (default: in the run's temp directory)",
    )
    args, libfuzzer_args = parser.parse_known_args()
    if args.engine == "atheris" and atheris is None:
        parser.error("atheris is not installed: pip install atheris, or --engine mutate")
    if args.engine == "atheris":
        with atheris.instrument_imports(include=list(INSTRUMENTED)):
            _import_target()
    else:
        _import_target()
    workdir = Path(tempfile.mkdtemp(prefix="opsbot-fuzz-"))
    target = Target(workdir, args.artifacts or workdir / "artifacts")
    print(f"fuzzing {target.address}; failing inputs go to {target.artifacts}", flush=True)

    if args.engine == "mutate":
        print(json.dumps(run_mutate(target, args.runs, args.seed)), flush=True)
        target.finish()
        return 0

    corpus = workdir / "corpus"
    corpus.mkdir()
    for index, data in enumerate(SEEDS):
        (corpus / f"seed-{index:03d}").write_bytes(data)

    def one_input(data: bytes) -> None:
        target.one(data)
        if target.figures["cases"] % 10000 == 0:
            print(json.dumps(target.summary("atheris")), flush=True)
        if target.figures["cases"] >= args.runs:
            print(json.dumps(target.summary("atheris", corpus=len(os.listdir(corpus)))), flush=True)
            target.finish()
            os._exit(0)

    atheris.Setup(
        [
            sys.argv[0],
            f"-seed={args.seed}",
            "-max_len=70000",
            "-timeout=30",
            "-rss_limit_mb=4096",
            *libfuzzer_args,
            str(corpus),
        ],
        one_input,
    )
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
