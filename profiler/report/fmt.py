"""Number formatting shared by the terminal views: "-" for a missing value, one way to cut a
table to its top rows."""

from __future__ import annotations

import math

import pandas as pd


def missing(value) -> bool:
    """None or NaN: shown as "-"."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def pct(value) -> str:
    return "-" if missing(value) else f"{value:.1f} %"


def head(frame: pd.DataFrame, top: int) -> pd.DataFrame:
    """The first ``top`` rows; all of them when ``top`` is 0."""
    return frame if not top else frame.head(top)
