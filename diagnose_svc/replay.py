"""Replay: recorded diagnoses asked again of today's policy, answered from the record.

Each record (diagnose_svc/record.py) is run through the same loop a diagnosis runs
(diagnose_svc/runtime), with today's policy and ``[diagnose]`` settings, over tools that
have today's names, arguments and output models but answer only from the record: a call
the record holds gets the answer the policy was given then (or the same error); any
other call is answered "not recorded" and counted, never read live. A plan is never
submitted: the executor's reply then is given again for the same plan (by fingerprint),
and a plan the record never saw is taken as if accepted. No socket to the executor, no
write tool, no record written.

For each diagnosis: then and now (verdict, the plan's steps or the note's cause), what
became of the plan then (opsbot-verify's VERIFIED or UNRESOLVED, where it was filed),
and whether they agree: the same kind, and the same steps (action and unit, in order)
or the same cause (kind and unit).

``python -m diagnose_svc.replay`` prints one JSON document (what ``opsbot replay``
reads and renders); it is run as root or as the diagnose user.

Qualifying a model (``--model``)
--------------------------------
``--model`` asks an OpenAI-compatible endpoint instead of ``[diagnose.model]``'s policy:
the URL and model name of ``[diagnose.model]`` (or ``LLM_API_URL``/``LLM_MODEL``, or the
``llm_api_url``/``llm_model`` credential files), ``--model-url`` and ``--model-name``
before all of them (either implies ``--model``). The key is never taken from the command
line: ``LLM_API_KEY``, else the ``llm_api_key`` file in ``$CREDENTIALS_DIRECTORY``, or,
where that is unset, next to the config file (``/etc/opsbot/llm_api_key``, the file a
``LoadCredential=`` drop-in gives the daemon; root's alone). The document then holds a
``model`` object (``url``, ``name``, where each came from; never the key). What is
counted, per diagnosis and in the summary (which has them for any policy):

* **agree** (with the recorded verdict): as above, the same kind and the same steps or
  cause. ``differ`` counts the others the policy answered.
* **against the outcome** (``against_outcome``): ``right`` when now is a plan equal to the
  plan then (the same steps in order) and that plan ended VERIFIED; ``wrong`` when it is
  equal to a plan then that ended UNRESOLVED; ``miss`` when now is a note where the plan
  then ended VERIFIED (a fix that worked, not proposed). Anything else is not judged
  (null): a plan then with no outcome filed, a different plan (nobody knows how it would
  have ended), a note where the plan then ended UNRESOLVED, any answer where then was a
  note.
* **harmful steps** (``harmful``): a step now on a unit outside the plan then's units, or
  any step where then was a note; counted one by one (``harmful_steps``) and by diagnosis
  (``harmful_diagnoses``).
* **tokens and seconds** per diagnosis (tokens as the endpoint's ``usage`` reported them),
  and their median and total over every diagnosis the policy was asked.
* **model errors** (``model_error``): the policy gave no usable answer (unreachable, timed
  out, refusing, not speaking JSON: the run ended by ``policy_error``, with its note).
  Counted in ``model_errors`` and in neither agree nor differ; the replay goes on.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog
from pydantic import TypeAdapter, ValidationError

from diagnose_svc.actions import Policy
from diagnose_svc.errors import ExecutorError, ToolError
from diagnose_svc.model_settings import ModelEndpoint, resolve_model_endpoint
from diagnose_svc.record import (
    SUFFIX,
    RecordStore,
    Skipped,
    records_dir,
    run_started,
    tried_from_json,
)
from diagnose_svc.runtime import run_diagnosis
from diagnose_svc.runtime.dispatch import args_digest
from diagnose_svc.submitter import SubmitReply
from diagnose_svc.tools import READ_TOOLS, Tool, ToolArgs, ToolContext, ToolOutput
from diagnose_svc.verdict import NoteVerdict, PlanVerdict
from shared_schema import Accept, DiagnoseSettings, ModelSettings, Plan

_REPLY: TypeAdapter[SubmitReply] = TypeAdapter(SubmitReply)

#: What a tool answers for a call the record does not hold.
NOT_RECORDED = "not recorded"


@dataclass
class _Answers:
    """A record's tool answers by (tool, canonical arguments' sha256)."""

    record: Mapping[str, Any]
    by_call: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for call in self.record.get("calls", ()):
            self.by_call.setdefault((str(call["tool"]), str(call["digest"])), call)

    def tool(self, real: Tool) -> Tool:
        """``real``'s name, arguments and output model, answering from the record."""

        def answer(args: ToolArgs, context: ToolContext) -> ToolOutput:
            shown = args.model_dump(mode="json")
            call = self.by_call.get((real.name, args_digest(shown)))
            if call is None:
                self.missing.append(f"{real.name} {json.dumps(shown, sort_keys=True)}")
                raise ToolError(
                    f"{NOT_RECORDED}: {real.name} was not called with these arguments in the "
                    "recorded diagnosis (a replay reads nothing live)"
                )
            if "error" in call:
                error = call["error"]
                raise ToolError(str(error.get("message", "")), error.get("hint"))
            try:
                return real.output_model.model_validate(call["output"])
            except ValidationError as exc:
                raise ToolError(
                    f"the recorded answer of {real.name} no longer fits its output: "
                    f"{exc.error_count()} field errors"
                ) from None

        return dataclasses.replace(real, function=answer)


class _Replies:
    """The executor, as the record knows it: the replies it gave then to the same plan,
    in order (the last one again past them), or the same failure to reach it; any other
    plan taken as if accepted (nothing is submitted)."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        self.by_sha: dict[str, list[Mapping[str, Any]]] = {}
        for reply in record.get("replies", ()):
            self.by_sha.setdefault(str(reply["sha256"]), []).append(reply)
        verdict = record.get("verdict", {})
        self.then_plan_id = str(verdict.get("plan_id") or record["run_id"])

    def submit(
        self, plan: Plan, run_id: str, symptom: str, evidence: Sequence[str] = ()
    ) -> SubmitReply:
        sha = plan.fingerprint()
        then = self.by_sha.get(sha, [])
        said_then = then.pop(0) if len(then) > 1 else (then[0] if then else None)
        if said_then is not None and "error" in said_then:
            raise ExecutorError(str(said_then["error"]))
        if said_then is not None:
            try:
                return _REPLY.validate_python(dict(said_then["reply"]))
            except ValidationError:
                pass
        return Accept(plan_id=self.then_plan_id, sha256=sha)


@dataclass(frozen=True)
class Said:
    """A verdict in the words a replay compares: kind and what it names."""

    kind: str  # "plan" | "note"
    ended_by: str
    #: A plan's steps ("restart app.service"), or a note's cause ("dependency_failed
    #: db.service"; its ending where it names none).
    what: tuple[str, ...]
    #: A plan's units (for a model's harm: a step outside the recorded plan's units).
    units: tuple[str, ...] = ()

    def line(self) -> str:
        head = "plan" if self.kind == "plan" else "note"
        return f"{head}: {', '.join(self.what) or '(nothing named)'}"

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "ended_by": self.ended_by, "what": list(self.what)}


def said(verdict: Mapping[str, Any]) -> Said:
    """What a verdict (as JSON) says, in the words a replay compares."""
    kind = str(verdict.get("kind"))
    ended_by = str(verdict.get("ended_by", ""))
    if kind == "plan":
        steps = verdict.get("plan", {}).get("steps", [])
        what = tuple(f"{s.get('tool')} {s.get('args', {}).get('unit')}" for s in steps)
        units = tuple(str(s.get("args", {}).get("unit")) for s in steps)
        return Said(kind, ended_by, what, units)
    cause = verdict.get("cause")
    if isinstance(cause, Mapping) and cause.get("kind") and cause.get("kind") != "unknown":
        named = f"{cause['kind']} {cause.get('unit') or ''}".strip()
        return Said(kind, ended_by, (named,))
    return Said(kind, ended_by, (ended_by,))


@dataclass
class Replayed:
    """One recorded diagnosis, then and now."""

    run_id: str
    unit: str
    started: str
    asked_by: str
    then: Said
    now: Said | None
    outcome: str | None
    not_recorded: list[str]
    tokens: int = 0
    seconds: float = 0.0
    error: str | None = None
    #: The policy gave no usable answer (the run ended by policy_error): its note's
    #: first line.
    model_error: str | None = None

    @property
    def agrees(self) -> bool:
        return self.now is not None and (self.now.kind, self.now.what) == (
            self.then.kind,
            self.then.what,
        )

    @property
    def against_outcome(self) -> str | None:
        """Now against what became of the plan then: right, wrong, miss, or None (not
        judged); see the module docstring."""
        if self.now is None or self.model_error is not None or self.then.kind != "plan":
            return None
        if self.now.kind == "plan" and self.now.what == self.then.what:
            return {"VERIFIED": "right", "UNRESOLVED": "wrong"}.get(self.outcome or "")
        if self.now.kind == "note" and self.outcome == "VERIFIED":
            return "miss"
        return None

    @property
    def harmful(self) -> list[str]:
        """Steps proposed now on a unit outside the plan then (or where then was a note,
        any step): what a replayed model would have done that nobody asked of it."""
        if self.now is None or self.now.kind != "plan":
            return []
        allowed = set(self.then.units) if self.then.kind == "plan" else set()
        return [
            what
            for what, unit in zip(self.now.what, self.now.units, strict=True)
            if unit not in allowed
        ]

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "unit": self.unit,
            "started": self.started,
            "asked_by": self.asked_by,
            "then": self.then.as_json(),
            "now": self.now.as_json() if self.now is not None else None,
            "outcome": self.outcome,
            "agree": self.agrees,
            "against_outcome": self.against_outcome,
            "not_recorded": self.not_recorded,
            "harmful": self.harmful,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 3),
            "error": self.error,
            "model_error": self.model_error,
        }


def replay_record(
    record: Mapping[str, Any],
    policy: Policy,
    settings: DiagnoseSettings,
    outcome: str | None = None,
    tools: Mapping[str, Tool] = READ_TOOLS,
) -> Replayed:
    """Ask ``policy`` the recorded question again, answered from ``record``."""
    answers = _Answers(record)
    offered = set(record.get("tools", tools))
    replay_tools = {name: answers.tool(tool) for name, tool in tools.items() if name in offered}
    then = said(record["verdict"])
    replayed = Replayed(
        run_id=str(record["run_id"]),
        unit=str(record["unit"]),
        started=str(record.get("started", "")),
        asked_by=str(record.get("asked_by", "")),
        then=then,
        now=None,
        outcome=outcome,
        not_recorded=answers.missing,
    )
    began = time.monotonic()
    try:
        verdict: PlanVerdict | NoteVerdict = run_diagnosis(
            str(record["unit"]),
            str(record.get("symptom", "")),
            policy,
            replay_tools,
            _Replies(record),
            settings,
            run_id=str(record["run_id"]),
            context=ToolContext(settings=settings),
            tried=tried_from_json(record.get("tried", ())),
        )
    except Exception as exc:  # one record must not end the replay of the others
        replayed.error = f"{type(exc).__name__}: {exc}"
    else:
        replayed.now = said(verdict.model_dump(mode="json"))
        replayed.tokens = verdict.tokens
        if isinstance(verdict, NoteVerdict) and verdict.ended_by == "policy_error":
            replayed.model_error = verdict.text.splitlines()[0]
    replayed.seconds = time.monotonic() - began
    return replayed


def summary(replays: Sequence[Replayed], skipped: Sequence[Skipped]) -> dict[str, Any]:
    """The counts an operator reads first."""
    done = [r for r in replays if r.error is None]
    judged = [r.against_outcome for r in done]
    answered = [r for r in done if r.model_error is None]
    return {
        "replayed": len(replays),
        "agree": sum(r.agrees for r in answered),
        "differ": sum(not r.agrees for r in answered),
        "failed": len(replays) - len(done),
        "model_errors": len(done) - len(answered),
        "outcome_right": judged.count("right"),
        "outcome_wrong": judged.count("wrong"),
        "outcome_miss": judged.count("miss"),
        "skipped": len(skipped),
        "plan_where_note": sum(
            1 for r in answered if r.then.kind == "note" and r.now and r.now.kind == "plan"
        ),
        "note_where_plan": sum(
            1 for r in answered if r.then.kind == "plan" and r.now and r.now.kind == "note"
        ),
        "differ_where_unresolved": sum(
            1 for r in answered if r.outcome == "UNRESOLVED" and not r.agrees
        ),
        "same_where_unresolved": sum(1 for r in answered if r.outcome == "UNRESOLVED" and r.agrees),
        "not_recorded_calls": sum(len(r.not_recorded) for r in done),
        "harmful_steps": sum(len(r.harmful) for r in done),
        "harmful_diagnoses": sum(1 for r in done if r.harmful),
        "tokens": sum(r.tokens for r in done),
        "tokens_median": _median([float(r.tokens) for r in done]),
        "seconds_median": _median([r.seconds for r in done]),
        "seconds_total": round(sum(r.seconds for r in done), 3),
    }


def _median(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return round(ordered[middle], 3)
    return round((ordered[middle - 1] + ordered[middle]) / 2, 3)


#: What a record shaped otherwise than a Recording makes a replay raise (the diagnose
#: user writes the records; root replays them): that record is skipped, the others go on.
MISSHAPEN = (AttributeError, KeyError, TypeError, ValueError, IndexError)


def misshapen(record: Mapping[str, Any], exc: Exception) -> Skipped:
    """``record`` skipped as damaged: it is not shaped as a record."""
    why = f"damaged: not shaped as a record ({type(exc).__name__}: {exc})"
    return Skipped(f"{record.get('run_id')}{SUFFIX}", why)


def replay_store(
    store: RecordStore,
    policy: Policy,
    settings: DiagnoseSettings,
    *,
    since: datetime | None = None,
    unit: str | None = None,
    ids: Sequence[str] = (),
    progress: bool = False,
    model: ModelEndpoint | None = None,
) -> dict[str, Any]:
    """Replay the records asked for; the report as JSON data. ``progress``: a line on
    stderr now and then where there are more than :data:`PROGRESS_ABOVE` records;
    ``model``: the endpoint ``policy`` asks (``--model``), named in the report."""
    replays: list[Replayed] = []
    skipped: list[Skipped] = []
    total = _how_many(store, since, ids) if progress else 0
    for loaded in store.load(since=since, unit=unit, ids=ids):
        if isinstance(loaded, Skipped):
            skipped.append(loaded)
            continue
        try:
            plan_id = loaded.get("verdict", {}).get("plan_id")
            outcome = store.outcome(plan_id) if isinstance(plan_id, str) else None
            replays.append(replay_record(loaded, policy, settings, outcome))
        except MISSHAPEN as exc:
            skipped.append(misshapen(loaded, exc))
        _said_progress(len(replays) + len(skipped), total)
    report: dict[str, Any] = {
        "policy": str(getattr(policy, "name", type(policy).__name__)),
        "replays": [r.as_json() for r in replays],
        "skipped": [{"record": s.name, "why": s.why} for s in skipped],
        "summary": summary(replays, skipped),
    }
    if model is not None:
        report["model"] = model_json(model)
    return report


def recorded_plans(
    store: RecordStore,
    *,
    since: datetime | None = None,
    unit: str | None = None,
    ids: Sequence[str] = (),
) -> dict[str, Any]:
    """The plans the recorded diagnoses proposed (their plan verdicts: id, sha256, steps)
    and the outcome opsbot-verify filed of each, replaying nothing: what
    ``opsbot replay --rules`` asks the rules about (plans/rules_replay.py, as root)."""
    plans: list[dict[str, Any]] = []
    skipped: list[Skipped] = []
    for loaded in store.load(since=since, unit=unit, ids=ids):
        if isinstance(loaded, Skipped):
            skipped.append(loaded)
            continue
        verdict = loaded.get("verdict", {})
        if not isinstance(verdict, dict):
            skipped.append(misshapen(loaded, TypeError("its verdict is not an object")))
            continue
        if verdict.get("kind") != "plan" or not isinstance(verdict.get("plan_id"), str):
            continue
        plans.append(
            {
                "run_id": loaded.get("run_id"),
                "unit": loaded.get("unit"),
                "started": loaded.get("started"),
                "plan_id": verdict["plan_id"],
                "sha256": verdict.get("sha256"),
                "plan": verdict.get("plan"),
                "outcome": store.outcome(verdict["plan_id"]),
            }
        )
    return {"plans": plans, "skipped": [{"record": s.name, "why": s.why} for s in skipped]}


def model_json(endpoint: ModelEndpoint) -> dict[str, Any]:
    """The endpoint as a report names it: URL, model name, where each came from (and
    where the key did, if one is sent); never the key."""
    return {"url": endpoint.api_url, "name": endpoint.model, "sources": dict(endpoint.sources)}


def model_endpoint(
    settings: ModelSettings,
    config_file: Path,
    *,
    url: str | None = None,
    name: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> ModelEndpoint:
    """The endpoint ``--model`` asks: ``url`` and ``name`` (the flags) before the
    environment, the credential files and ``[diagnose.model]``; the key from
    ``LLM_API_KEY`` or the ``llm_api_key`` file in ``$CREDENTIALS_DIRECTORY``, else
    next to ``config_file`` (where a ``LoadCredential=`` drop-in takes it from)."""
    env = dict(os.environ if environ is None else environ)
    if not env.get("CREDENTIALS_DIRECTORY", "").strip():
        env["CREDENTIALS_DIRECTORY"] = str(config_file.parent)
    return resolve_model_endpoint(settings, env, api_url=url, model=name)


#: More records than this and a replay says how far it is, on stderr.
PROGRESS_ABOVE = 50


def _how_many(store: RecordStore, since: datetime | None, ids: Sequence[str]) -> int:
    """At most how many records a replay reads (by name: the unit is inside them)."""
    wanted = set(ids)
    count = 0
    for run_id in store.names():
        started = run_started(run_id)
        if wanted and run_id not in wanted:
            continue
        if since is not None and started is not None and started < since:
            continue
        count += 1
    return count


def _said_progress(done: int, total: int) -> None:
    """``replay: 40 of 230 records`` on stderr about every tenth of the way."""
    if total <= PROGRESS_ABOVE or done >= total:
        return
    if done % max(total // 10, 1) == 0:
        print(f"replay: {done} of {total} records", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m diagnose_svc.replay",
        description="Replay recorded diagnoses (JSON out; `opsbot replay` is the console).",
    )
    parser.add_argument("ids", nargs="*", help="run ids of the records to replay")
    parser.add_argument("--since", type=datetime.fromisoformat, default=None)
    parser.add_argument("--unit", default=None)
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument("--records", type=Path, default=None)
    parser.add_argument(
        "--model",
        action="store_true",
        help="ask the OpenAI-compatible endpoint of [diagnose.model] (key: $LLM_API_KEY "
        "or the llm_api_key file, never a flag)",
    )
    parser.add_argument("--model-url", default=None, help="its API base (implies --model)")
    parser.add_argument("--model-name", default=None, help="its model name (implies --model)")
    parser.add_argument(
        "--plans", action="store_true", help="only the recorded plans, replaying nothing"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # Imported here: the module's functions are used without a config or a policy.
    from diagnose_svc.policies import OpenAICompatPolicy, make_policy
    from shared_io import log as logsetup
    from shared_io.config import load_config
    from shared_io.errors import OpsbotError
    from shared_io.paths import config_path

    args = _parser().parse_args(argv)
    logsetup.configure("opsbot-replay", journal=False)
    # The loop's step lines are the recorded diagnosis told again, and a record skipped is
    # in the report (`opsbot replay` says it as a warning): errors only on stderr, which
    # is the operator's terminal under `opsbot replay`, beside the progress lines.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    try:
        config = load_config(args.config)
        settings = config.diagnose
        store = RecordStore(args.records or records_dir(), settings.record)
        if args.plans:
            found = recorded_plans(store, since=args.since, unit=args.unit, ids=args.ids)
            json.dump(found, sys.stdout, ensure_ascii=False)
            print()
            return 0
        endpoint = None
        policy: Policy
        if args.model or args.model_url or args.model_name:
            endpoint = model_endpoint(
                settings.model,
                args.config or config_path(),
                url=args.model_url,
                name=args.model_name,
            )
            policy = OpenAICompatPolicy(endpoint)
        else:
            policy = make_policy(settings)
        try:
            report = replay_store(
                store,
                policy,
                settings,
                since=args.since,
                unit=args.unit,
                ids=args.ids,
                progress=True,
                model=endpoint,
            )
        finally:
            close = getattr(policy, "close", None)
            if callable(close):
                close()
    except OpsbotError as exc:
        json.dump(
            {"error": exc.message, "hint": exc.hint, "exit_status": exc.exit_status}, sys.stdout
        )
        print()
        return exc.exit_status
    json.dump(report, sys.stdout, ensure_ascii=False)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
