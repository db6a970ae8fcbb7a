"""What a limit counts against, and the token buckets that do the counting.

A source is a client address: an IPv4 address as it is, an IPv6 address by its /64 (one
host is usually given a whole /64, so counting single addresses would let it multiply
itself). Buckets are measured on an injected clock (``time.monotonic`` in the service), so
that tests never depend on the speed of the machine.
"""

from __future__ import annotations

import ipaddress
import time
from collections import OrderedDict
from collections.abc import Callable

Clock = Callable[[], float]
#: At most this many sources are remembered; the least recently seen is forgotten first
#: (the global bucket still bounds what many addresses can do together).
MAX_SOURCES = 4096


def source_key(address: str) -> str:
    """The key a limit counts ``address`` under (``2001:db8:1:2::/64`` for IPv6)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class TokenBucket:
    """``capacity`` requests at once, refilled at ``rate`` per second."""

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.stamp = now

    def take(self, now: float) -> float:
        """0.0 when a request may pass (and one token is spent), else the seconds until
        one may."""
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class RateLimiter:
    """A bucket per source (``per_minute`` at once, then one every ``60 / per_minute``
    seconds) checked first, then one global bucket (``per_second``, a second's worth at
    once). A request refused by its source's bucket spends nothing of the global one, so
    one flooding source cannot use up what everyone else shares."""

    def __init__(
        self,
        *,
        per_minute_per_source: int,
        per_second: int,
        clock: Clock = time.monotonic,
        max_sources: int = MAX_SOURCES,
    ) -> None:
        self.per_minute_per_source = per_minute_per_source
        self.clock = clock
        self.max_sources = max_sources
        self.sources: OrderedDict[str, TokenBucket] = OrderedDict()
        self.everyone = TokenBucket(per_second, per_second, clock())

    def retry_after(self, source: str) -> float:
        """0.0 when a request from ``source`` may pass, else the seconds to wait."""
        now = self.clock()
        bucket = self.sources.get(source)
        if bucket is None:
            rate = self.per_minute_per_source / 60.0
            bucket = self.sources[source] = TokenBucket(rate, self.per_minute_per_source, now)
            while len(self.sources) > self.max_sources:
                self.sources.popitem(last=False)
        else:
            self.sources.move_to_end(source)
        wait = bucket.take(now)
        if wait:
            return wait
        return self.everyone.take(now)
