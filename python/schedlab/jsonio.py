"""Standard JSON out of schedlab's values (summaries, specs): NaN and infinities become null.
Its own small module so that a command printing a summary needs nothing of pandas."""

from __future__ import annotations

import json
import math
from typing import Any


def json_safe(value: Any) -> Any:
    """NaN and infinities become None, so the JSON is standard."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        return json_safe(value.item())
    return value


def dumps(value: Any, **kw: Any) -> str:
    return json.dumps(json_safe(value), allow_nan=False, **kw)
