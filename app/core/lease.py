"""Leases on claimed work (an audit attempt, a chunk of a distributed estimate): every write after the claim is
fenced on the lease, and what the fenced write found decides whether the holder goes on."""

from __future__ import annotations

from enum import Enum


class Lease(Enum):
    """What a fenced write found: the audit is still ours, was cancelled, or belongs to someone else."""

    HELD = "held"
    CANCELLED = "cancelled"
    LOST = "lost"


class LeaseLost(Exception):
    """Another attempt owns the audit now (this worker was presumed dead); stop without writing."""
