"""Hostile upload files shared by the library's and the API's upload tests."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import numpy as np


def zeros_npz(rows: int, cols: int, **small: Any) -> bytes:
    """An ``.npz`` whose ``x`` is ``rows × cols`` float64 zeros (written in chunks), plus ``small`` arrays."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        with archive.open("x.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(
                member, {"descr": "<f8", "fortran_order": False, "shape": (rows, cols)}
            )
            chunk = bytes(cols * 8 * 1024)
            for start in range(0, rows, 1024):
                member.write(chunk[: (min(rows, start + 1024) - start) * cols * 8])
        for key, value in small.items():
            one = io.BytesIO()
            np.save(one, value)
            archive.writestr(f"{key}.npy", one.getvalue())
    return buffer.getvalue()
