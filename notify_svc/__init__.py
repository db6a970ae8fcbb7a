"""opsbot-notify: tells approvers that a plan waits, on the channels of the config, and
the news of plans that ask nothing of them (a rule approved one, one ended UNRESOLVED,
an incident ended).

The one opsbot unit that sends messages out. It holds no authority: it asks root's
opsbot-approver (``announce``) for the new plans and single-use links, and relays them.
Receivers of the generic webhook check its signature with :func:`verify_signature`.
``opsbot-notify --test [CHANNEL]`` sends a test message instead (notify_svc.trial).
"""

from notify_svc.message import Message, render
from notify_svc.run import Summary, notify
from notify_svc.signature import MAX_SKEW_SECONDS, sign, verify_signature

__all__ = ["MAX_SKEW_SECONDS", "Message", "Summary", "notify", "render", "sign", "verify_signature"]
