"""JSON-ready forms of parameter values and release metadata; arrays are tagged so that
they round-trip."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np


def to_jsonable(value: Any) -> Any:
    """JSON-ready form of a parameter value; arrays are tagged so that they round-trip."""
    if isinstance(value, np.ndarray):
        return {
            "__ndarray__": value.tolist(),
            "dtype": str(value.dtype),
            "shape": list(value.shape),
        }
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (tuple, list)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def from_jsonable(value: Any) -> Any:
    """Inverse of :func:`to_jsonable` for arrays (other values pass through)."""
    if isinstance(value, dict) and "__ndarray__" in value:
        arr = np.array(value["__ndarray__"], dtype=value.get("dtype", "float64"))
        return arr.reshape(value.get("shape", arr.shape))
    if isinstance(value, dict):
        return {k: from_jsonable(v) for k, v in value.items()}
    return value
