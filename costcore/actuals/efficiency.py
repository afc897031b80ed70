"""The loop: the organisation's own runs score the planner, and a fitted efficiency factor starts
the next plan from the cluster's measured speed.

Validation runs are the store's completed pre-training runs that carry a model size
(``params_b``), a token count (``tokens_b``), a known GPU type, a GPU count and GPU-hours. Each
becomes a scenario with the planner's defaults only (as costcore.validation.runs does for public
runs), and is predicted for a grid of factors f applied to ``efficiency.sustained_fraction``
(``FACTORS``; the product is kept inside the field's range). The fitted f minimises the sum of
squared log errors ln(predicted / actual GPU-hours) over all runs; its out-of-sample error is the
leave-one-out error: each run predicted with the f fitted on the other runs, as
costcore/validation/calibration.py states the published-runs calibration.

``apply(scenario, factor)`` multiplies a plan's sustained fraction by the factor.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from costcore import fmt
from costcore.errors import ScenarioError

FACTORS = np.round(np.arange(0.30, 1.601, 0.01), 2)
FIELD = "efficiency.sustained_fraction"
MIN_RUNS = 3


def _scenario(row) -> dict:
    from costcore.validation.runs import gpu_key
    params = float(row.params_b)
    return {"name": str(row.run_id), "model": {"params_b": params, "active_params_b": params},
            "hardware": {"gpu": gpu_key(row.gpu_type), "num_gpus": int(row.gpu_count)},
            "stages": {"pretrain": {"tokens_b": float(row.tokens_b), "seq_len": 4096}}}


def validation_runs(runs):
    """The runs usable for validation (see module doc) as a DataFrame."""
    from costcore.validation.runs import gpu_key
    if runs.empty:
        return runs
    ok = (runs["stage"] == "pretrain") & (runs["status"] == "completed")
    for c in ("params_b", "tokens_b", "gpu_count", "gpu_hours"):
        ok &= runs[c].notna() & (runs[c].astype(float) > 0)
    ok &= runs["gpu_type"].map(gpu_key).notna()
    return runs[ok].sort_values("run_id").reset_index(drop=True)


def predictions(rows) -> np.ndarray:
    """(runs, len(FACTORS)) predicted GPU-hours: wall days x 24 x GPUs, as the published-runs validation."""
    from costcore import api
    from costcore.scenario import schema
    from costcore.scenario.schema import RESOURCES, STAGES
    out = np.zeros((len(rows), len(FACTORS)))
    wall = len(RESOURCES) + 2
    for i, row in enumerate(rows.itertuples()):
        scn = schema.validate(_scenario(row))
        base = float(schema.effective_value(scn, FIELD))
        col = np.clip(base * FACTORS, schema.BY_PATH[FIELD].lo, schema.BY_PATH[FIELD].hi)
        full = api.batch(scn, {FIELD: col}, full=True, replan=False)  # the factor times the plan; it does not change it
        out[i] = full[:, STAGES.index("pretrain"), wall] * 24 * int(row.gpu_count)
    return out


def fit(runs) -> dict:
    """Score the defaults on the store's runs and fit the factor.

    Returns {"runs": [{"run_id", "gpu_type", "gpu_count", "actual_gpu_hours", "predicted_gpu_hours",
    "ratio", "fitted_ratio", "loo_ratio"}], "factor", "sustained_fraction", "default_median_error",
    "fitted_median_error", "loo_median_error", "loo_worst_fold"}. ScenarioError with fewer than
    MIN_RUNS usable runs.
    """
    from costcore.scenario import schema
    rows = validation_runs(runs)
    if len(rows) < MIN_RUNS:
        raise ScenarioError("db", f"the store has {len(rows)} usable runs; the fit needs at least {MIN_RUNS} "
                                  "completed pre-training runs with params_b, tokens_b, a known GPU type, "
                                  "gpu_count and GPU-hours")
    pred = predictions(rows)
    actual = rows["gpu_hours"].astype(float).to_numpy()
    logerr = np.log(pred / actual[:, None])
    sq = logerr ** 2
    best = int(np.argmin(sq.sum(axis=0)))
    base_ix = int(np.argmin(np.abs(FACTORS - 1.0)))
    loo = np.array([pred[i, int(np.argmin(sq.sum(axis=0) - sq[i]))] for i in range(len(rows))]) / actual
    out_runs = [{"run_id": str(r.run_id), "gpu_type": str(r.gpu_type), "gpu_count": int(r.gpu_count),
                 "actual_gpu_hours": float(a), "predicted_gpu_hours": float(p[base_ix]),
                 "ratio": float(p[base_ix] / a), "fitted_ratio": float(p[best] / a), "loo_ratio": float(lr)}
                for r, a, p, lr in zip(rows.itertuples(), actual, pred, loo)]
    default = float(schema.BY_PATH[FIELD].default)
    return {"runs": out_runs, "factor": float(FACTORS[best]),
            "sustained_fraction": float(min(max(default * FACTORS[best], schema.BY_PATH[FIELD].lo),
                                            schema.BY_PATH[FIELD].hi)),
            "default_median_error": float(np.median(np.abs(pred[:, base_ix] / actual - 1))),
            "fitted_median_error": float(np.median(np.abs(pred[:, best] / actual - 1))),
            "loo_median_error": float(np.median(np.abs(loo - 1))),
            "loo_worst_fold": float(np.max(np.maximum(loo, 1 / loo)))}


def apply(scenario: dict, factor: float) -> dict:
    """A copy of a validated scenario with efficiency.sustained_fraction x ``factor`` (kept in range)."""
    from costcore.scenario import schema
    if not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor <= 0:
        raise ScenarioError("org_efficiency", "must be a positive number", value=factor)
    f = schema.BY_PATH[FIELD]
    now = float(schema.effective_value(scenario, FIELD))
    return schema.validate(schema.set_path(scenario, FIELD, float(min(max(now * factor, f.lo), f.hi))))


def factor_from(source: str) -> float:
    """The factor of ``--org-efficiency SOURCE``: a YAML file written by ``validate --db ... --save``
    (key ``factor``), or a store (DuckDB file or Ibis URL) to fit on now."""
    p = Path(str(source)).expanduser()
    if p.suffix.lower() in (".yaml", ".yml"):
        from costcore.scenario.yamlio import read_yaml_file
        try:  # the scenario files' reader: safe_load, a size limit, and its refusals in words
            doc = read_yaml_file(p)
        except ScenarioError as err:  # it said "cannot read x.yaml: ParserError" / "FileNotFoundError"
            said = str(err)
            said = said[len(err.path) + 2:] if err.path and said.startswith(err.path + ": ") else said
            raise ScenarioError("org_efficiency", f"{fmt.one_line(p.name, 80)}: {said}") from None
        v = doc.get("factor") if isinstance(doc, dict) else None
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise ScenarioError("org_efficiency", f"{p.name} has no number under 'factor'")
        return float(v)
    from costcore.actuals import queries, store
    if not store.is_url(source) and not p.exists():
        raise ScenarioError("org_efficiency", f"no store or YAML file at {p}")
    st = store.open_store(source)
    try:
        return fit(queries.fetch(queries.run_table(st.jobs_table())))["factor"]
    finally:
        st.close()
