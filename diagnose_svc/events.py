"""The structured events a diagnosis run emits, to its ``on_event`` callback and structlog.

``diagnose.started`` once, ``diagnose.step`` for every step (every proposal the policy
made, whoever answered it), ``diagnose.finished`` once with the verdict's outline. The
models live in shared_schema.diagnose_socket: they are streamed to operators over the socket.
"""

from collections.abc import Callable

from shared_schema.diagnose_socket import Event, FinishedEvent, StartedEvent, StepEvent

EventSink = Callable[[Event], None]

__all__ = ["Event", "EventSink", "FinishedEvent", "StartedEvent", "StepEvent"]
