"""The boundary to the executor: something that takes a plan and answers for it.

The runtime depends only on this protocol; ``executor_client.ExecutorClient`` implements
it over the executor's Unix socket.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from shared_schema import Accept, Plan, Reject, Revise

__all__ = ["SubmitReply", "Submitter"]

SubmitReply = Accept | Revise | Reject


class Submitter(Protocol):
    """Submits a validated plan and returns the executor's verdict on it: the plan stays
    a ``Plan`` until the client writes it on the wire, once.

    Raises ExecutorError (diagnose_svc.errors) when the executor cannot be asked.
    """

    def submit(
        self, plan: Plan, run_id: str, symptom: str, evidence: Sequence[str] = ()
    ) -> SubmitReply:
        """``evidence``: what the run saw, at most two lines (shown to the approver)."""
