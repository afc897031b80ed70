"""Number formatting shared by the CLI and the app (no UI imports)."""
from __future__ import annotations

import math


def usd(v: float) -> str:
    """Money as $950, $12.3K, $4.56M, $1.2B (three significant digits)."""
    if v is None or not math.isfinite(v):
        return "n/a"
    a = abs(v)
    sign = "-" if v < 0 else ""
    for div, suf in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if a >= div:
            x = a / div
            return f"{sign}${x:.3g}{suf}" if x < 1000 else f"{sign}${x:,.0f}{suf}"
    return f"{sign}${a:,.0f}" if a >= 10 else f"{sign}${a:.2f}"


def usd_exact(v: float) -> str:
    return f"${v:,.2f}" if math.isfinite(v) else "n/a"


def gpu_hours(v: float) -> str:
    if not math.isfinite(v):
        return "n/a"
    for div, suf in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suf} GPU-h"
    return f"{v:,.1f} GPU-h" if v < 100 else f"{v:,.0f} GPU-h"


def days(v: float) -> str:
    if not math.isfinite(v):
        return "n/a"
    if v < 1:
        return f"{v * 24:.1f} h"
    return f"{v:,.1f} days"


def gb(v: float) -> str:
    if not math.isfinite(v):
        return "n/a"
    if v >= 1e6:
        return f"{v / 1e6:.3g} PB"
    if v >= 1e3:
        return f"{v / 1e3:.3g} TB"
    return f"{v:.3g} GB"


def pct(v: float) -> str:
    return f"{v:.0%}" if math.isfinite(v) else "n/a"
