"""Number formatting shared by the CLI and the app (no UI imports)."""
from __future__ import annotations

import math
import re


def _sig3(x: float) -> str | None:
    """x >= 1 at three significant digits, trailing zeros kept (1.90, 30.0, 612); None when it rounds
    to 1,000 or more (the next unit up reads it: $1.00M, not $1.00e+03K)."""
    s = f"{x:#.3g}"
    return None if "e" in s else s.rstrip(".")


def usd(v: float) -> str:
    """Money at three significant digits: $950, $28.3, $4.56, $12.3k, $1.90M, $31.8M, $1.20B (SI prefixes; k for
    thousands). Below a dollar too ($0.162, $0.0420: a price per token or per sample), and "<$0.001" for less
    than a tenth of a cent that is not zero."""
    if v is None or not math.isfinite(v):
        return "n/a"
    a = abs(v)
    sign = "-" if v < 0 else ""
    if a >= 999.5:
        for div, suf in ((1e3, "k"), (1e6, "M"), (1e9, "B"), (1e12, "T")):
            shown = _sig3(a / div)
            if shown is not None:
                return f"{sign}${shown}{suf}"
        return f"{sign}${a / 1e12:,.0f}T"
    if a == 0:
        return "$0"
    if a >= 0.9995:
        return f"{sign}${_sig3(a)}"  # $612, $28.3, $4.57: three digits ($28, not $28.29 nor $28)
    if a >= 0.0009995:  # 0.162, 0.0420, 0.00100: three digits, never "$0.00" nor "$0.16"
        return f"{sign}${a:#.3g}"
    return f"{sign}<$0.001"


def usd_exact(v: float) -> str:
    return f"${v:,.2f}" if math.isfinite(v) else "n/a"


def gpu_hours(v: float) -> str:
    """GPU-hours at three significant digits: 2.50 GPU-h, 12.5 GPU-h, 612 GPU-h, 1.64k GPU-h, 10.9M GPU-h."""
    if not math.isfinite(v):
        return "n/a"
    a = abs(v)
    sign = "-" if v < 0 else ""
    if a >= 999.5:
        for div, suf in ((1e3, "k"), (1e6, "M"), (1e9, "B")):
            shown = _sig3(a / div)
            if shown is not None:
                return f"{sign}{shown}{suf} GPU-h"
        return f"{sign}{a / 1e9:,.0f}B GPU-h"
    return f"{_three(v)} GPU-h"  # 2.50, 12.5, 612 (trailing zeros kept)


def _three(x: float) -> str:
    """Any number at three significant digits, trailing zeros kept between 1 and 999 (2.50, 48.0, 612),
    thousands separated above (1,230), plain below 1 (0.25)."""
    if 0.9995 <= abs(x) < 999.5:  # 0.99996 rounds to 1.00 (num wrote a bare "1")
        return _signed3(x)
    return num(x)


def days(v: float) -> str:
    """A duration given in days, at three significant digits: minutes or seconds under an hour (1.88 min,
    not 0.0313 h), hours under a day (2.64 h), else days (3.90 days, 48.1 days, 1,230 days)."""
    if v is None or not math.isfinite(v):
        return "n/a"
    if 0 < abs(v) * 1440 < 59.95:  # from 59.95 minutes they would read 60.0 min: hours then
        return duration_s(v * 86400.0)
    if abs(v) < 1:
        return f"{_three(v * 24)} h"
    return f"{_three(v)} days"


def duration_s(v: float) -> str:
    """A duration given in seconds, at 3 significant digits in the unit that reads best (45.0 s, 12.3 min, 1.83 h,
    2.50 days; trailing zeros kept, as in money)."""
    if v is None or not math.isfinite(v):
        return "n/a"
    for div, unit in ((86400.0, "days"), (3600.0, "h"), (60.0, "min")):
        if abs(v) >= div * 0.9995:  # 59.98 s would read 60.0 s: 1.00 min
            return f"{_three(v / div)} {unit}"
    return f"{_three(v)} s"


def gb(v: float) -> str:
    """A size given in GB, in the unit that reads best, at three significant digits with trailing zeros
    kept: 96.5 MB (not 0.0965 GB), 63.5 GB, 72.0 GB, 1.20 TB, 3.40 PB."""
    if not math.isfinite(v):
        return "n/a"
    a = abs(v)  # the bounds are where 3 significant digits round up to the next unit (999.7 GB -> 1 TB)
    if a >= 999.5e3:
        return f"{_signed3(v / 1e6)} PB"
    if a >= 999.5:
        return f"{_signed3(v / 1e3)} TB"
    if 0 < a < 0.9995:
        return f"{_signed3(v * 1e3)} MB"
    return f"{_signed3(v)} GB"


def _signed3(x: float) -> str:
    """x at three significant digits, trailing zeros kept (72.0, 1.20, 0.500): :func:`_sig3` with a sign; where
    that needs an exponent (1,000 and more, which callers' units keep below, or tiny) the plain ``.3g``."""
    if x == 0:
        return "0"
    return ("-" if x < 0 else "") + (_sig3(abs(x)) or f"{abs(x):.3g}")


def num(v: float) -> str:
    """A plain number rounded to three significant digits, with thousands separators (7, 0.25, 1,230),
    millions and more with a letter (76.8M, 1.40B, 2.10T)."""
    if v is None or not math.isfinite(v):
        return "n/a"
    if v == 0:
        return "0"
    r = round(v, 2 - int(math.floor(math.log10(abs(v)))))
    if abs(r) >= 1e15 or abs(r) < 1e-3:
        return f"{r:.3g}"
    for scale, word in ((1e12, "T"), (1e9, "B"), (1e6, "M")):  # 76.8M, 1.4B: counts in words
        if abs(r) >= scale:
            return f"{_signed3(r / scale)}{word}"
    return f"{r:,.0f}" if abs(r) >= 1000 else f"{r:g}"


def sig3(v: float) -> str:
    """A measured quantity at three significant digits with its trailing zeros (0.530, 12.0, 612; 1,230 and 76.8M
    as :func:`num` above 999): in a column of them, 0.53 next to 0.698 read as less precise."""
    if v is None or not math.isfinite(v):
        return "n/a"
    return num(v) if abs(v) >= 999.5 else _signed3(v)


def pct(v: float) -> str:
    return f"{v:.0%}" if math.isfinite(v) else "n/a"


def share(v: float, signed: bool = False) -> str:
    """A fraction as a percent at three significant digits (0.263 -> 26.3%, 0.000168 -> 0.0168%), so a
    small share is not shown as 0.0%; below 0.001% it reads "<0.001%" ("-0.001% or less" with a sign). ``signed``:
    +/- in front."""
    if v is None or not math.isfinite(v):
        return "n/a"
    sign = ("+" if v > 0 else "-" if v < 0 else "") if signed else ("-" if v < 0 else "")
    a = abs(v) * 100.0
    if a == 0:
        return "0%"
    if a < 1e-3:  # "-<0.001%" read as a typo: the size, then "or less"
        return f"{sign}0.001% or less" if sign else "<0.001%"
    r = float(f"{a:.3g}")
    return f"{sign}{_three(r)}%" if r >= 1 else f"{sign}{r:g}%"


# ---------------------------------------------------------------------------
# Text that reaches a terminal, a spreadsheet or a page
# ---------------------------------------------------------------------------
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(v):
    """A CSV cell a spreadsheet will not run: text starting with = + - @ tab or CR gets a leading '.

    OWASP, "CSV Injection" (owasp.org/www-community/attacks/CSV_Injection): prefix such cells
    with a single quote. Numbers are left alone (a negative number is a number, not a formula).
    """
    if isinstance(v, str) and v.startswith(_FORMULA_START):
        return "'" + v
    return v


def csv_safe(df):
    """A copy of a DataFrame whose text cells (and column names) pass :func:`csv_cell`."""
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == object:
            out[c] = out[c].map(csv_cell)
    out.columns = [csv_cell(c) for c in out.columns]
    return out


def to_csv(df) -> str:
    """The one way the CLI and the app write CSV: full precision, formula cells neutralised."""
    return csv_safe(df).to_csv(index=False)


# Characters that must not reach a terminal, a page or a cell: C0/C1 controls (ANSI and OSC escapes
# start with them), the line and paragraph separators, and Unicode's bidirectional formatting
# characters (UAX #9: embeddings, overrides, isolates, marks), which reorder what is shown.
_BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
UNSAFE_TEXT = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029" + _BIDI + "]")
UNSAFE_TEXT_MULTILINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029" + _BIDI + "]")  # keeps \t \n


def one_line(text: str, limit: int = 200) -> str:
    """Text for one line of output: every :data:`UNSAFE_TEXT` character becomes '?'."""
    s = UNSAFE_TEXT.sub("?", str(text))
    return s if len(s) <= limit else s[: limit - 1] + "…"


def count(n: float, thing: str, things: str | None = None) -> str:
    """A count and its noun, singular for one: "1 run", "3 runs", "1,024 job records" ("Read 1 job records")."""
    return f"{n:,.0f} {thing if n == 1 else (things or thing + 's')}"


def gpus(n: float) -> str:
    """A GPU count as a person writes it: "1 GPU", "8 GPUs", "8,192 GPUs"."""
    n = float(n)
    return f"{n:,.0f} GPU" + ("" if n == 1 else "s")


def words_list(items) -> str:
    """Words joined as a sentence reads them: "a", "a and b", "a, b and c"."""
    items = [str(x) for x in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1] if items else ""


def schedule(plan: dict) -> str:
    """A plan's pipeline schedule in words: "DualPipe", "1F1B" or "1F1B, 4 chunks" (interleaved)."""
    if plan.get("schedule") == "dualpipe":
        return "DualPipe"
    chunks = int(plan.get("interleave", 1))
    return f"1F1B, {chunks} chunks" if chunks > 1 else "1F1B"


def zero_words(stage: int) -> str:
    """A ZeRO stage in words: "ZeRO-3", or "no ZeRO"."""
    return f"ZeRO-{stage}" if stage else "no ZeRO"


def recompute_words(mode: str) -> str:
    """An activation recompute mode in words: "selective recompute", or "no recompute"."""
    return "no recompute" if mode == "none" else f"{mode} recompute"


def plan_words(plan: dict, precision: str = "") -> str:
    """A job layout in one line, as the Job layout page and the fine-tuning workbench write it: "TP 8 × PP 4 ×
    DP 64 × CP 1, micro-batch 2, ZeRO-1, selective recompute, BF16" (``plan`` as ``Result.plan``; the precision
    in words, left out when empty)."""
    dims = f"TP {plan['tp']} × PP {plan['pp']} × DP {plan['dp']} × CP {plan['cp']}"
    if plan["ep"] > 1:
        dims += f" (EP {plan['ep']})"
    parts = [dims, f"micro-batch {plan['micro_batch']}", zero_words(plan["zero"])]
    if plan.get("schedule") == "dualpipe" and plan["pp"] > 1:
        parts.append("DualPipe schedule")
    elif plan["interleave"] > 1:
        parts.append(f"interleaved pipeline ({plan['interleave']} chunks per stage)")
    if plan["sequence_parallel"]:
        parts.append("sequence parallel")
    parts.append(recompute_words(plan["recompute"]))
    if precision:
        parts.append(precision)
    return ", ".join(parts)
