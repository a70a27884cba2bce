"""``torch.autograd.Function.apply`` without its per-call signature binding, where the binding changes nothing.

``Function.apply`` binds its arguments to ``forward``'s signature on every call (``inspect.signature``, ~40 µs) when
the function defines ``setup_context``, as ``torch.func``'s transforms require. For a ``forward`` without default
arguments, called with every argument positionally, that binding returns the arguments as they came. So outside a
transform :func:`apply` does what ``Function.apply`` does there without it (the dead functorch wrappers unwrapped,
then the autograd engine's own ``apply``), and inside one it calls ``Function.apply`` itself. The project's sparse
product and first-layer function run about ten times per deletion of a multi-layer model and per training epoch: the
binding was 1–2.5 ms of a deletion's ~19 ms on a 20,000-node graph, with the same results bit for bit.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._functorch.utils import unwrap_dead_wrappers


def apply(function: type[torch.autograd.Function], *args: Any) -> Any:
    """``function.apply(*args)`` for a ``function`` whose ``forward`` takes exactly ``args`` (no defaults)."""
    if torch._C._are_functorch_transforms_active():
        return function.apply(*args)  # type: ignore[no-untyped-call]
    return super(torch.autograd.Function, function).apply(*unwrap_dead_wrappers(args))  # type: ignore[misc]
