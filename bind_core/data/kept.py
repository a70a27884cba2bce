"""A few values kept per the identity of some tensors, while those tensors live.

An evaluation loop passes the same index tensors (the training rows, the test rows) and the same structures every
time; what is cut from them (an adjacency's row block, the rows each layer reads, a block-diagonal structure) is made
once and found again by the tensors' identity. A weak reference to each checks that a hit is the tensor it was made
for (a freed tensor's id reused by another never hits), and nothing outlives them for long: entries whose tensors
are gone are dropped at the next insertion, and the oldest beyond the size.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable
from typing import Generic, TypeVar

from torch import Tensor

V = TypeVar("V")


class KeptByIdentity(Generic[V]):
    """Values keyed by the identity of some tensors and a few plain keys, at most ``size`` of them.

    Threads settling deletions (:mod:`bind_core.influence.threads`) share what holds one: it is read from a snapshot
    and trimmed with ``pop``, so that two threads storing at once at worst make one value twice.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: dict[tuple[Hashable, ...], tuple[tuple[weakref.ref[Tensor], ...], V]] = {}

    def get(self, tensors: tuple[Tensor, ...], *extra: Hashable) -> V | None:
        """The value kept for these very ``tensors`` and ``extra`` keys, or ``None``."""
        hit = self._items.get(self._key(tensors, extra))
        if hit is None or any(ref() is not t for ref, t in zip(hit[0], tensors, strict=True)):
            return None
        return hit[1]

    def put(self, tensors: tuple[Tensor, ...], value: V, *extra: Hashable) -> V:
        """Keep ``value`` for ``tensors`` and ``extra``; returns it."""
        items = self._items
        for stale in [k for k, (refs, _) in list(items.items()) if any(ref() is None for ref in refs)]:
            items.pop(stale, None)
        for old in list(items)[: max(0, len(items) - self.size + 1)]:
            items.pop(old, None)
        items[self._key(tensors, extra)] = (tuple(weakref.ref(t) for t in tensors), value)
        return value

    def __len__(self) -> int:
        return len(self._items)

    @staticmethod
    def _key(tensors: tuple[Tensor, ...], extra: tuple[Hashable, ...]) -> tuple[Hashable, ...]:
        return (*(id(t) for t in tensors), *extra)
