"""Argument checks for the public functions: any Python or numpy number alike, ScenarioError otherwise.

Each check names the argument and the allowed range in one sentence
(see :mod:`costcore.errors`).
"""
from __future__ import annotations

import math
import numbers
import operator
import re

from costcore.errors import ScenarioError


def _is_real(v) -> bool:
    """A real number of any Python or numpy type; not a bool, and not numpy's time deltas and dates,
    which subclass numpy's integers but are durations and instants, not numbers."""
    import numpy as np
    if isinstance(v, (bool, np.bool_, np.timedelta64, np.datetime64)):
        return False
    return isinstance(v, (numbers.Real, np.integer, np.floating))


def is_integer(v) -> bool:
    """A whole number of any Python or numpy integer type (see :func:`_is_real`)."""
    import numpy as np
    return _is_real(v) and isinstance(v, (int, np.integer))


_SPACES = re.compile(r"\s+")


def _shown(v) -> str:
    """A value as a message shows it: a plain int or float as a person writes it (1,000,000,000; -5; 0.25), else its
    repr on one printable line, at most 40 characters.

    A numpy array's repr spans lines and a foreign object's repr may hold anything (or raise),
    so line ends become spaces and other unprintable characters (controls, escapes, direction
    overrides) are dropped.
    """
    if type(v) is int and abs(v) < 10**15:  # as a person writes it: 1,000,000,000, not 1000000000.0
        return f"{v:,}"
    if type(v) is float and math.isfinite(v) and abs(v) < 1e15:
        return f"{int(v):,}" if v == int(v) else f"{v:,.6g}"
    try:
        s = repr(v)
    except ValueError:  # ints too long to print
        return "a very long number"
    except Exception:  # noqa: BLE001 - a foreign repr may raise anything: show the type instead
        return type(v).__name__
    if not isinstance(s, str):
        return type(v).__name__
    s = _SPACES.sub(" ", s)
    if not s.isprintable():
        s = "".join(ch for ch in s if ch.isprintable())
    return s if len(s) <= 40 else s[:37] + "..."


def as_float(name: str, v, allowed: str) -> float:
    """``float(v)`` of a value that passed :func:`_is_real`, or ScenarioError.

    Python and numpy numbers convert without fail (or overflow); any other ``numbers.Real``
    (a ``Fraction``, a float subclass, a registered class) runs its own ``__float__``, which may
    raise anything: that is bad input too, refused with the field's sentence.
    """
    try:
        return float(v)
    except OverflowError:
        raise ScenarioError(name, f"must be {allowed} (got a number too large to use)", allowed=allowed) from None
    except Exception:  # noqa: BLE001 - only the foreign __float__ runs here
        raise ScenarioError(name, f"must be {allowed} (got {_shown(v)}, which cannot be read as a number)",
                            allowed=allowed) from None


def _g(v: float) -> str:
    """A range's end in words: 10,000,000,000,000 rather than 1e+13 (whole numbers below 1e16), else as %g."""
    return f"{v:,.0f}" if float(v).is_integer() and abs(v) < 1e16 else f"{v:,g}"


def number(name: str, v, lo: float = -math.inf, hi: float = math.inf, *, lo_open: bool = False) -> float:
    """A finite real number in [lo, hi] (or (lo, hi] with ``lo_open``), as a Python float."""
    rng = f"{'more than' if lo_open else 'from'} {_g(lo)}" + (f" to {_g(hi)}" if math.isfinite(hi) else "")
    if not math.isfinite(lo):
        rng = f"at most {_g(hi)}" if math.isfinite(hi) else "any finite number"
    allowed = f"a number {rng}"
    if not _is_real(v):
        raise ScenarioError(name, f"must be {allowed} (got {_shown(v)})", value=v, allowed=allowed)
    f = as_float(name, v, allowed)
    if not math.isfinite(f) or f > hi or (f <= lo if lo_open else f < lo):
        raise ScenarioError(name, f"must be {allowed} (got {_shown(v)})", value=f, allowed=allowed)
    return f


def count(name: str, v, lo: int, hi: int) -> int:
    """A whole number in [lo, hi] (1.0 is accepted as 1, 1.5 is not), as a Python int."""
    allowed = f"a whole number from {lo:,} to {hi:,}"
    if not _is_real(v):
        raise ScenarioError(name, f"must be {allowed} (got {_shown(v)})", value=v, allowed=allowed)
    if isinstance(v, numbers.Integral):  # Python and numpy integers: exact, not through a float
        try:  # (through float, 2**62 + 1 became 2**62 and 2**63 - 1 was refused)
            i = operator.index(v)
        except Exception:  # noqa: BLE001 - a foreign __index__ may raise anything
            raise ScenarioError(name, f"must be {allowed} (got {_shown(v)})", allowed=allowed) from None
        if not lo <= i <= hi:
            raise ScenarioError(name, f"must be {allowed} (got {_shown(v)})", value=v, allowed=allowed)
        return i
    f = as_float(name, v, allowed)
    if not math.isfinite(f) or f != math.floor(f) or not (lo <= f <= hi):
        raise ScenarioError(name, f"must be {allowed} (got {_shown(v)})", value=v, allowed=allowed)
    return int(f)


def choice(name: str, v, choices) -> str:
    allowed = "one of " + ", ".join(choices)
    if not isinstance(v, str) or v not in choices:
        raise ScenarioError(name, f"must be {allowed} (got {_shown(v)})", value=v, allowed=allowed)
    return v


def setting(name: str, v, known) -> str:
    """A dotted setting name that exists in ``known``."""
    if not isinstance(v, str) or v not in known:
        raise ScenarioError(name, f"{_shown(v)} is not a known setting", value=v if isinstance(v, str) else None)
    return v


def flag(name: str, v) -> bool:
    """A yes/no switch: True/False (Python or numpy), or the numbers 0 and 1 of any type."""
    try:
        import numpy as np
        if isinstance(v, np.bool_):
            return bool(v)
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass
    if isinstance(v, bool):
        return v
    if _is_real(v):
        try:
            f = float(v)
        except Exception:  # noqa: BLE001 - a foreign __float__ may raise anything
            f = math.nan
        if f in (0.0, 1.0):
            return f == 1.0
    raise ScenarioError(name, f"must be True or False (got {_shown(v)})", value=v, allowed="True or False")
