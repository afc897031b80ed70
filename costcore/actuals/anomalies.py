"""Anomalies in daily spend: a trailing rolling median and MAD per (project, resource type) series.

For each day d of a series (days without a charge count as $0), the expected amount is the median
of the ``WINDOW_DAYS`` days before d (d itself left out), and the spread is 1.4826 x the median
absolute deviation of those days from that median (``MAD_TO_SIGMA``: the MAD of a normal
distribution is 0.6745 sigma), floored at ``MIN_SPREAD_SHARE`` of the expected amount and at
``MIN_SPREAD_USD`` so a flat series does not flag cents. Day d is an anomaly when

    (spend_d - expected_d) / spread_d > THRESHOLD

with at least ``MIN_HISTORY_DAYS`` days of history. Median and MAD ignore the outliers they look
for (a spike does not raise the next days' expected amount, as a mean would), and only spend above
the expected amount is flagged: a cost review looks for money spent, not saved. Iglewicz and
Hoaglin (1993), "How to Detect and Handle Outliers", recommend 3.5 for this modified z-score on
one sample; a review tests every day of every series (thousands of tests), so the threshold is
5 and the spread floor of 5% of the expected amount makes +25% the smallest day ever flagged.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

WINDOW_DAYS = 28
MIN_HISTORY_DAYS = 7
THRESHOLD = 5.0
MAD_TO_SIGMA = 1.4826
MIN_SPREAD_SHARE = 0.05
MIN_SPREAD_USD = 1.0


def score_series(usd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(expected $, modified z-score) of each day of one daily series (NaN without enough history)."""
    usd = np.asarray(usd, dtype=float)
    n = len(usd)
    padded = np.concatenate([np.full(WINDOW_DAYS, np.nan), usd])
    windows = np.lib.stride_tricks.sliding_window_view(padded, WINDOW_DAYS)[:n]  # row d: the days before d
    enough = (~np.isnan(windows)).sum(axis=1) >= MIN_HISTORY_DAYS
    expected = np.full(n, np.nan)
    z = np.full(n, np.nan)
    if not enough.any():
        return expected, z
    w = windows[enough]
    med = np.nanmedian(w, axis=1)
    mad = np.nanmedian(np.abs(w - med[:, None]), axis=1)
    spread = np.maximum(np.maximum(MAD_TO_SIGMA * mad, MIN_SPREAD_SHARE * np.abs(med)), MIN_SPREAD_USD)
    expected[enough] = med
    z[enough] = (usd[enough] - med) / spread
    return expected, z


def detect(daily: pd.DataFrame, keys=("project", "resource_type")) -> pd.DataFrame:
    """Anomalous days of every series of ``daily`` (columns day, *keys, usd as float $).

    Returns one row per anomaly: day, the keys, usd, expected_usd, score; by day then keys. Each
    series runs from the first to the last day of ``daily`` (missing days are $0).
    """
    cols = ["day", *keys, "usd", "expected_usd", "score"]
    if daily.empty:
        return pd.DataFrame(columns=cols)
    days = pd.date_range(pd.Timestamp(min(daily["day"])), pd.Timestamp(max(daily["day"])), freq="D")
    frame = daily.assign(day=pd.to_datetime(daily["day"]), usd=daily["usd"].astype(float))
    wide = frame.pivot_table(index="day", columns=list(keys), values="usd", aggfunc="sum").reindex(days).fillna(0.0)
    rows = []
    for series in wide.columns:
        values = wide[series].to_numpy()
        expected, z = score_series(values)
        hit = np.where(z > THRESHOLD)[0]
        key = series if isinstance(series, tuple) else (series,)
        for i in hit:
            rows.append((days[i].date(), *key, float(values[i]), float(expected[i]), float(z[i])))
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values(["day", *keys]).reset_index(drop=True)


def recall_precision(found: pd.DataFrame, truth: list[dict], keys=("project", "resource_type")) -> dict:
    """Share of injected days found (recall) and share of flagged days that were injected (precision)."""
    want = {(str(t["date"]), *(t[k] for k in keys)) for t in truth}
    got = {(str(r.day), *(getattr(r, k) for k in keys)) for r in found.itertuples()}
    hits = len(want & got)
    return {"injected_days": len(want), "flagged_days": len(got), "found": hits,
            "recall": hits / len(want) if want else float("nan"),
            "precision": hits / len(got) if got else float("nan"),
            "false_share": (len(got) - hits) / len(got) if got else 0.0}
