"""Rate limits: a token bucket of ``rate`` tokens refilled at ``rate`` per minute.

Two uses: requests per valid API key (the key is identified by its SHA-256, never the key itself), and
failed authentications per client address (:class:`AuthFailureGuard`), so that guessing keys is throttled.
With a Redis broker the buckets live in Redis (one Lua script, atomic, shared by every API process);
otherwise in this process. If Redis cannot be reached the request is let through (rate limiting fails open;
the outage shows in ``/readyz``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass

import redis

from app.core.errors import TooManyRequests

log = logging.getLogger(__name__)

# KEYS[1]: the bucket; ARGV: capacity, refill per second, now (s), cost (1: take a token, 0: only look).
# Returns {allowed 0/1, seconds to wait}.
_LUA = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - cost
  allowed = 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('EXPIRE', KEYS[1], math.ceil(capacity / rate) + 60)
return {allowed, tostring(wait)}
"""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after: int
    """Whole seconds until a token is back (0 when allowed)."""


class RateLimiter:
    """``check(key_id)`` takes a token from ``key_id``'s bucket; ``per_minute == 0`` allows everything.

    ``peek(key_id)`` says whether a token is there without taking it. ``namespace`` keeps the buckets of
    different limits apart in Redis (``bind:<namespace>:<key_id>``).
    """

    def __init__(self, per_minute: int, redis_url: str | None = None, *, namespace: str = "ratelimit") -> None:
        self.namespace = namespace
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self._redis = redis.Redis.from_url(redis_url, socket_timeout=1, socket_connect_timeout=1) if redis_url else None
        self._script = self._redis.register_script(_LUA) if self._redis is not None else None
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def check(self, key_id: str) -> Decision:
        """Take a token from ``key_id``'s bucket if there is one."""
        return self._take(key_id, 1)

    def peek(self, key_id: str) -> Decision:
        """Whether ``key_id``'s bucket holds a token, leaving it there."""
        return self._take(key_id, 0)

    def _take(self, key_id: str, cost: int) -> Decision:
        if self.capacity <= 0:
            return Decision(True, 0)
        if self._script is not None:
            try:
                args = [self.capacity, self.rate, time.time(), cost]
                allowed, wait = self._script(keys=[f"bind:{self.namespace}:{key_id}"], args=args)
                return Decision(bool(int(allowed)), 0 if int(allowed) else max(1, math.ceil(float(wait))))
            except redis.RedisError as exc:
                log.warning("rate limiter: Redis unavailable (%s); letting the request through", type(exc).__name__)
                return Decision(True, 0)
        return self._take_local(key_id, cost)

    def _take_local(self, key_id: str, cost: int) -> Decision:
        now = time.monotonic()
        with self._lock:
            tokens, ts = self._buckets.get(key_id, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - ts) * self.rate)
            if tokens >= 1:
                self._buckets[key_id] = (tokens - cost, now)
                return Decision(True, 0)
            self._buckets[key_id] = (tokens, now)
            return Decision(False, max(1, math.ceil((1 - tokens) / self.rate)))


def make_rate_limiter(per_minute: int, broker_url: str, *, namespace: str = "ratelimit") -> RateLimiter:
    """Redis-backed when the broker is Redis, in-process otherwise."""
    redis_url = broker_url if broker_url.startswith(("redis://", "rediss://")) else None
    return RateLimiter(per_minute, redis_url, namespace=namespace)


class AuthFailureGuard:
    """Throttles failed authentication per client address: a bucket of ``per_minute`` failures.

    :meth:`before` runs before the key is looked at: once an address has used up its failures, every request
    from it that needs a key gets a 429 (whether its key is valid or not: otherwise a guess that hit a valid
    key would still be told so). :meth:`failed` takes one token for a missing, unknown or revoked key.
    The address is the one the ASGI server reports (behind a proxy, run uvicorn with ``--proxy-headers``
    and ``--forwarded-allow-ips`` so that it is the client's, not the proxy's).
    """

    def __init__(self, limiter: RateLimiter) -> None:
        self.limiter = limiter

    def before(self, client: str) -> None:
        decision = self.limiter.peek(client)
        if not decision.allowed:
            raise self._refusal(decision)

    def failed(self, client: str) -> None:
        self.limiter.check(client)

    def _refusal(self, decision: Decision) -> TooManyRequests:
        return TooManyRequests(
            f"Too many failed authentications from this address (at most {int(self.limiter.capacity)} a minute); "
            f"retry after {decision.retry_after} s.",
            headers={"Retry-After": str(decision.retry_after)},
        )


def make_auth_failure_guard(per_minute: int, broker_url: str) -> AuthFailureGuard | None:
    """The guard for ``BIND_AUTH_FAILURE_LIMIT_PER_MINUTE`` (``None`` when it is 0: off)."""
    if per_minute <= 0:
        return None
    return AuthFailureGuard(make_rate_limiter(per_minute, broker_url, namespace="authfail"))
