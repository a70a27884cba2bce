"""Per-API-key rate limits: a token bucket of ``rate`` tokens refilled at ``rate`` per minute.

With a Redis broker the buckets live in Redis (one Lua script, atomic, shared by every API process);
otherwise in this process. A key is identified by the SHA-256 of the key, never the key itself. If Redis
cannot be reached the request is let through (rate limiting fails open; the outage shows in ``/readyz``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass

import redis

log = logging.getLogger(__name__)

# KEYS[1]: the bucket; ARGV: capacity, refill per second, now (s). Returns {allowed 0/1, seconds to wait}.
_LUA = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
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
    """``check(key_id)`` takes a token from ``key_id``'s bucket; ``per_minute == 0`` allows everything."""

    def __init__(self, per_minute: int, redis_url: str | None = None) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self._redis = redis.Redis.from_url(redis_url, socket_timeout=1, socket_connect_timeout=1) if redis_url else None
        self._script = self._redis.register_script(_LUA) if self._redis is not None else None
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def check(self, key_id: str) -> Decision:
        if self.capacity <= 0:
            return Decision(True, 0)
        if self._script is not None:
            try:
                args = [self.capacity, self.rate, time.time()]
                allowed, wait = self._script(keys=[f"bind:ratelimit:{key_id}"], args=args)
                return Decision(bool(int(allowed)), 0 if int(allowed) else max(1, math.ceil(float(wait))))
            except redis.RedisError as exc:
                log.warning("rate limiter: Redis unavailable (%s); letting the request through", type(exc).__name__)
                return Decision(True, 0)
        return self._check_local(key_id)

    def _check_local(self, key_id: str) -> Decision:
        now = time.monotonic()
        with self._lock:
            tokens, ts = self._buckets.get(key_id, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - ts) * self.rate)
            if tokens >= 1:
                self._buckets[key_id] = (tokens - 1, now)
                return Decision(True, 0)
            self._buckets[key_id] = (tokens, now)
            return Decision(False, max(1, math.ceil((1 - tokens) / self.rate)))


def make_rate_limiter(per_minute: int, broker_url: str) -> RateLimiter:
    """Redis-backed when the broker is Redis, in-process otherwise."""
    redis_url = broker_url if broker_url.startswith(("redis://", "rediss://")) else None
    return RateLimiter(per_minute, redis_url)
