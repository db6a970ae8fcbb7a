"""The approver's one exception: a request refused, said with the protocol's ``kind``.

    shared_io.errors.OpsbotError   base: .message, .hint, .exit_status
    └── Refusal                    .kind (shared_schema.approver_socket.RefusalKind)

The daemon answers a Refusal with ``Refused(kind, reason)``; every other failure is
``internal`` (logged with its traceback; the reply says only that the journal says why).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared_io.errors import OpsbotError

if TYPE_CHECKING:
    from shared_schema.approver_socket import RefusalKind

__all__ = ["Refusal"]


class Refusal(OpsbotError):
    """A request the approver will not do: ``kind`` says which check it failed."""

    def __init__(self, kind: RefusalKind, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.kind: RefusalKind = kind
