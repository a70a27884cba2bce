"""Which torch device this worker runs audits on (the ``BIND_DEVICE`` setting)."""

from __future__ import annotations

import torch

DEVICE_CHOICES = ("auto", "cpu", "cuda")


def resolve_device(choice: str) -> str:
    """Map the ``BIND_DEVICE`` setting to a torch device name.

    Args:
        choice: ``"auto"`` (CUDA when ``torch.cuda.is_available()``, else the CPU), ``"cpu"`` or ``"cuda"``.

    Returns:
        ``"cuda"`` or ``"cpu"``.

    Raises:
        ValueError: the choice is unknown, or ``"cuda"`` was asked for on a machine without a usable GPU
            (a worker that cannot honour its configuration refuses to start rather than run on the CPU).
    """
    choice = choice.strip().lower()
    if choice not in DEVICE_CHOICES:
        raise ValueError(f"BIND_DEVICE must be one of {DEVICE_CHOICES}, got {choice!r}")
    cuda = torch.cuda.is_available()
    if choice == "cuda" and not cuda:
        raise ValueError("BIND_DEVICE='cuda' but torch.cuda.is_available() is False on this worker")
    if choice == "auto":
        return "cuda" if cuda else "cpu"
    return choice
