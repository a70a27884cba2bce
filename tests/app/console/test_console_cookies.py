"""The console's signed cookies (``app/console/cookies.py``), without a server: what reads as a session."""

from __future__ import annotations

import time
import uuid

from app.console.cookies import (
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    new_session,
    new_sign_in,
    read_session,
    same_token,
    sign,
    sign_in_token,
    unsign,
)

SECRET = "s" * 32


def test_a_session_round_trips_and_nothing_else_reads_as_one() -> None:
    key_id = uuid.uuid4()
    value, made = new_session(SECRET, key_id, 60)
    assert read_session(SECRET, value) == made and made.key_id == key_id and len(made.csrf) >= 32
    assert read_session("t" * 32, value) is None  # another server secret
    payload, signature = value.split(".")
    assert read_session(SECRET, f"{payload}x.{signature}") is None  # payload changed
    assert (
        read_session(SECRET, None) is None
        and read_session(SECRET, "") is None
        and read_session(SECRET, "a.b.c") is None
    )
    sign_in_value, token = new_sign_in(SECRET)
    assert read_session(SECRET, sign_in_value) is None  # a sign-in cookie is not a session
    assert sign_in_token(SECRET, value) is None and sign_in_token(SECRET, sign_in_value) == token


def test_expired_cookies_are_refused() -> None:
    past = sign(SECRET, SESSION_COOKIE, {"kid": str(uuid.uuid4()), "csrf": "x", "exp": int(time.time()) - 1})
    assert unsign(SECRET, SESSION_COOKIE, past) is None and read_session(SECRET, past) is None
    value, _ = new_session(SECRET, uuid.uuid4(), 60)
    assert unsign(SECRET, SESSION_COOKIE, value, now=time.time() + 61) is None
    assert unsign(SECRET, SESSION_COOKIE, value) is not None
    no_expiry = sign(SECRET, SIGN_IN_COOKIE, {"csrf": "x"})
    assert sign_in_token(SECRET, no_expiry) is None


def test_tokens_compare_only_when_both_present() -> None:
    assert same_token("abc", "abc") and not same_token("abc", "abd")
    assert not same_token(None, None) and not same_token("", "") and not same_token("abc", None)
