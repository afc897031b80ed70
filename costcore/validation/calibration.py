"""Calibration of the job-layout model's production knobs on public runs, and its out-of-sample check.

The step model (:mod:`costcore.engine.layout`) has three knobs fitted on the 18 Megatron Selene
measurements (:mod:`costcore.validation.megatron`: ``gemm_half_dim``, ``memory_traffic``,
``collective_efficiency``). A production run sustains less than the searched plan's benchmark
step rate; three knobs say how much, and they are fitted here on the public production runs:

* ``efficiency.sustained_fraction`` — share of the modelled step rate sustained over a run;
* ``efficiency.overlap_contention`` — slowdown of compute while a collective runs behind it;
* ``efficiency.tp_overlap`` — share of the tensor-parallel collectives hidden behind the layer's matmuls.

Runs come in two splits (the CSVs' ``split`` column): ``calibration`` runs are fitted on and
scored by leave-one-out (refit on all calibration runs but one, predict that one);
``holdout`` runs are never fitted on: they are predicted by the fit on every calibration run.

The P10-P90 error band of pre-training and CPT is the 10th and 90th percentile of the
leave-one-out log residuals ln(published / predicted); its coverage is checked on the holdout
runs. The stages those runs do not speak for carry the same percentiles of their own public runs
(:func:`stage_bands`): post-training (SFT, DPO, RL) from ``data/finetune_runs.yaml``, the multimodal
phases from ``data/multimodal_runs.yaml``; nothing is fitted on either, so every residual is out of
sample. Used by ``benchmarks/calibrate.py`` and ``tests/test_validation.py``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from costcore import api
from costcore.scenario.schema import effective_value
from costcore.validation import runs as validation

GRID = {
    "sustained_fraction": (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0),
    "overlap_contention": (0.0, 0.15, 0.3, 0.5),
    "tp_overlap": (0.0, 0.25, 0.5, 0.75, 1.0),
}
EFFICIENCY_KEYS = tuple(GRID)
BAND_QUANTILES = (0.1, 0.9)


def runs(split: str | None = None) -> list[tuple[str, dict, str, float, str]]:
    """(name, defaults-only scenario, basis, published GPU-hours or days, split) per usable run."""
    out = []
    for dataset in ("reference", "extra"):
        for _, r in validation.pretraining_rows(dataset=dataset).iterrows():
            sp = r.get("split")
            sp = sp if isinstance(sp, str) and sp in ("calibration", "holdout") else "calibration"
            if split is None or sp == split:
                out.append((str(r["name"]), validation.scenario_for(r)[0], *validation.published_figure(r), sp))
    return out


def ratios(settings: dict, run_list) -> np.ndarray:
    """Predicted / published for each run under one setting of the fitted knobs."""
    out = []
    for _, scn, basis, pub, _ in run_list:
        res = api.estimate(dict(scn, efficiency=dict(settings)))
        out.append(validation.predicted_figure(res, basis) / pub)
    return np.array(out)


def score(r: np.ndarray) -> tuple[float, float]:
    """(worst fold, median relative error)."""
    r = np.asarray(r, dtype=float)
    return float(np.maximum(r, 1 / r).max()), float(np.median(np.abs(r - 1)))


@dataclass(frozen=True)
class Grid:
    settings: tuple  # one dict per grid point
    names: tuple  # run names
    split: tuple  # "calibration" / "holdout" per run
    ratio: np.ndarray  # grid points x runs


@lru_cache(maxsize=1)
def grid() -> Grid:
    """Every grid point evaluated on every run (one matrix)."""
    rl = runs()
    settings = tuple(dict(zip(GRID, c)) for c in itertools.product(*GRID.values()))
    m = np.array([ratios(s, rl) for s in settings])
    return Grid(settings, tuple(r[0] for r in rl), tuple(r[4] for r in rl), m)


def _objective(log_err: np.ndarray) -> np.ndarray:
    """Median plus mean absolute log error over the columns given (robust to one odd run)."""
    return np.median(log_err, axis=1) + np.mean(log_err, axis=1)


def _calibration_columns(g: Grid) -> np.ndarray:
    return np.array([i for i, s in enumerate(g.split) if s == "calibration"])


def fit(columns: np.ndarray | None = None) -> list[tuple[float, dict]]:
    """Grid points ranked by the objective over ``columns`` (default: every calibration run), best first."""
    g = grid()
    cols = _calibration_columns(g) if columns is None else columns
    obj = _objective(np.abs(np.log(g.ratio[:, cols])))
    return [(float(obj[i]), g.settings[i]) for i in np.argsort(obj, kind="stable")]


def leave_one_out() -> dict:
    """Out-of-sample ratios: calibration runs by leave-one-out, holdout runs by the full fit."""
    g = grid()
    log_err = np.abs(np.log(g.ratio))
    cal = _calibration_columns(g)
    loo = {}
    for j in cal:
        cols = np.array([i for i in cal if i != j])
        best = int(np.argmin(_objective(log_err[:, cols])))
        loo[g.names[j]] = float(g.ratio[best, j])
    full = g.settings.index(fit()[0][1])
    hold = {g.names[j]: float(g.ratio[full, j]) for j in range(len(g.names)) if g.split[j] == "holdout"}
    r_loo = np.array(list(loo.values()))
    resid = np.log(1.0 / r_loo)  # ln(published / predicted)
    lo, hi = (float(np.quantile(resid, q)) for q in BAND_QUANTILES)
    out = {"ratios": loo, "holdout": hold, "runs": len(loo), "rms_log_error": float(np.sqrt(np.mean(resid ** 2))),
           "band_log_p10": lo, "band_log_p90": hi}
    out["worst_fold"], out["median_error"] = score(r_loo)
    if hold:
        r_h = np.array(list(hold.values()))
        out["holdout_worst_fold"], out["holdout_median_error"] = score(r_h)
        res_h = np.log(1.0 / r_h)
        out["holdout_band_coverage"] = float(np.mean((res_h >= lo) & (res_h <= hi)))
    return out


# Stage families whose band comes from their own public runs (the rest: the pre-training band).
STAGE_FAMILIES = {"post_training": ("sft", "dpo", "rl"), "multimodal": ("mm_align", "mm_cpt", "mm_tune")}


def band_of(ratios) -> dict:
    """The band of predicted / published ``ratios`` scored out of sample: P10 and P90 of ln(published /
    predicted), the leave-one-out coverage (the share of runs inside the band the others give), and the
    Monte Carlo's lognormal of the MFU factor: centered on the mean of ln(predicted / published)
    (``mfu_log_median``; these runs ran slower than the model says), spread by their standard deviation."""
    resid = np.log(1.0 / np.asarray(ratios, dtype=float))
    lo, hi = (float(np.quantile(resid, q)) for q in BAND_QUANTILES)
    inside = [np.quantile(np.delete(resid, j), BAND_QUANTILES[0]) <= resid[j]
              <= np.quantile(np.delete(resid, j), BAND_QUANTILES[1]) for j in range(len(resid))]
    return {"runs": len(resid), "band_log_p10": lo, "band_log_p90": hi, "mfu_log_median": float(-np.mean(resid)),
            "mfu_log_sigma": float(np.std(resid)), "loo_coverage": float(np.mean(inside))}


def stage_bands() -> dict:
    """family -> {stages, runs, band_log_p10, band_log_p90, mfu_log_sigma, loo_coverage} from the family's
    public runs (:data:`STAGE_FAMILIES`; costcore/validation/finetune.py and multimodal.py score them)."""
    from costcore.validation import finetune, multimodal
    tables = {"post_training": finetune.finetune_table(), "multimodal": multimodal.multimodal_table()}
    return {f: dict(stages=list(STAGE_FAMILIES[f]), **band_of(t["predicted_hours"] / t["published_hours"]))
            for f, t in tables.items()}


def schedule_search_ratios() -> dict:
    """{MoE run: (predicted / published by default, with ``schedule: search``, the schedule it then takes)}.

    The public mixture-of-experts runs under the fitted knobs, once as the defaults run them (1F1B)
    and once with the search free to take DualPipe: the evidence behind keeping 1F1B the default
    (data/schema.yaml ``stages.*.schedule``; docs/validation.md section 2).
    """
    settings = fit()[0][1]
    out = {}
    for name, scn, basis, pub, _ in runs():
        if float((scn.get("model") or {}).get("experts") or 0) <= 1:
            continue
        stage = next(iter(scn["stages"]))
        searched = dict(scn, stages={stage: dict(scn["stages"][stage], schedule="search")})
        pair = [api.estimate(dict(s, efficiency=dict(settings))) for s in (scn, searched)]
        out[name] = (validation.predicted_figure(pair[0], basis) / pub,
                     validation.predicted_figure(pair[1], basis) / pub, pair[1].plan(stage)["schedule"])
    return out


def schedule_search_summary() -> dict:
    """:func:`schedule_search_ratios` sorted for the words that report it: ``moved`` (name, default, searched)
    of the runs the search puts on DualPipe, ``kept`` the names left on 1F1B, ``closer`` / ``further`` the names
    whose prediction the searched schedule brings nearer to / farther from the published time."""
    r = schedule_search_ratios()
    return {"runs": len(r), "moved": [(n, a, b) for n, (a, b, sched) in r.items() if sched == "dualpipe"],
            "kept": [n for n, (_, _, sched) in r.items() if sched != "dualpipe"],
            "closer": [n for n, (a, b, _) in r.items() if abs(np.log(b)) < abs(np.log(a))],
            "further": [n for n, (a, b, _) in r.items() if abs(np.log(b)) > abs(np.log(a))]}


FAMILIES_FILE = validation.DATA.parent / "run_families.yaml"


def _features(scn: dict, basis: str) -> dict:
    """The inputs a residual could follow, in words (the run's scenario and its searched plan)."""
    res = api.estimate(scn)
    plan, g = res.plan("pretrain"), float(scn["hardware"]["num_gpus"])
    n_b = float(effective_value(res.scenario, "model.params_b"))
    seq = float(effective_value(res.scenario, "stages.pretrain.seq_len"))
    return {"model size (log parameters)": np.log(n_b), "GPU count (log)": np.log(g),
            "GPUs per billion parameters (log)": np.log(g / n_b),
            "sequence length (log)": np.log(seq), "the plan's modelled MFU": plan["benchmark_mfu"],
            "pipeline-parallel degree (log)": np.log(plan["pp"]), "ZeRO-3 in the plan": float(plan["zero"] == 3),
            "a Hopper GPU (H100, H800)": float(scn["hardware"]["gpu"] in ("h100-80gb", "h800")),
            "mixture of experts": float(bool(scn["model"].get("experts"))),
            "published as days rather than GPU-hours": float(basis == "days")}


def residual_structure() -> dict:
    """What the out-of-sample residuals ln(published / predicted) follow (leave-one-out for the calibration
    runs, the full fit for the holdout runs).

    ``features``: (input in words, Pearson r with the residual), largest |r| first; ``chance_r`` = 2 / sqrt(n),
    about the |r| that chance alone passes 1 time in 20 with n runs. ``families``: runs one team published
    together (data/run_families.yaml); ``family_median_error`` / ``family_worst_fold``: the residuals
    around their family's mean (geometric, with the n / (n - 1) correction of a fitted mean), i.e. the error
    that a perfect per-team efficiency would still leave."""
    import yaml
    loo = leave_one_out()
    r = {**loo["ratios"], **loo["holdout"]}
    resid, feats = [], []
    for name, scn, basis, _, _ in runs():
        resid.append(-np.log(r[name]))
        feats.append(_features(scn, basis))
    y = np.array(resid)
    corr = [(k, float(np.corrcoef([f[k] for f in feats], y)[0, 1])) for k in feats[0]]
    fams = yaml.safe_load(FAMILIES_FILE.read_text())["families"]
    dev = []
    for fam in fams.values():
        lr = np.log([r[n] for n in fam["runs"]])
        dev += list(np.abs(lr - lr.mean()) * np.sqrt(len(lr) / (len(lr) - 1)))
    return {"runs": len(y), "chance_r": 2 / np.sqrt(len(y)), "features": sorted(corr, key=lambda kv: -abs(kv[1])),
            "families": len(fams), "family_runs": len(dev), "family_median_error": float(np.exp(np.median(dev)) - 1),
            "family_worst_fold": float(np.exp(max(dev)))}


SUMMARY_FILE = validation.DATA.parent / "calibration.yaml"


def summary_text(date: str) -> str:
    """The checked-in summary (costcore/data/calibration.yaml) as YAML text."""
    loo = leave_one_out()
    best = fit()[0][1]
    lines = [
        "# Written by `python benchmarks/calibrate.py --write`; tests/test_validation.py checks it is current.",
        "# band_log_p10 / band_log_p90: the 10th and 90th percentiles of ln(published / predicted) when each",
        "# calibration run is predicted by a fit that did not see it (leave-one-out). Every estimate's",
        "# P10-P90 GPU-hours and dollars are its model value times exp() of these (costcore/api.py).",
        f"date: {date}",
        'source: "costcore/validation/calibration.py leave_one_out over costcore/data/published_runs.csv and extra_runs.csv"',
        f"runs: {loo['runs']}",
        f"loo_median_error: {loo['median_error']:.4f}",
        f"loo_worst_fold: {loo['worst_fold']:.4f}",
        f"holdout_runs: {len(loo['holdout'])}",
        f"holdout_median_error: {loo.get('holdout_median_error', 0.0):.4f}",
        f"holdout_worst_fold: {loo.get('holdout_worst_fold', 0.0):.4f}",
        f"holdout_band_coverage: {loo.get('holdout_band_coverage', 0.0):.4f}",
        f"mfu_log_sigma: {loo['rms_log_error']:.4f}",
        f"band_log_p10: {loo['band_log_p10']:.4f}",
        f"band_log_p90: {loo['band_log_p90']:.4f}",
        "best_fit: {" + ", ".join(f"{k}: {v}" for k, v in best.items()) + "}",
        "# residual_structure: the largest |r| of the out-of-sample residuals with an input (of residual_inputs),",
        "# the |r| chance passes 1 time in 20, and the residuals' median error and worst fold around the mean of",
        "# each family of runs one team published together (data/run_families.yaml).",
    ]
    rs = residual_structure()
    lines += [
        f"residual_structure: {{residual_inputs: {len(rs['features'])}, max_abs_r: {abs(rs['features'][0][1]):.4f}, "
        f"chance_r: {rs['chance_r']:.4f}, family_runs: {rs['family_runs']}, "
        f"family_median_error: {rs['family_median_error']:.4f}, family_worst_fold: {rs['family_worst_fold']:.4f}}}",
        "# stage_bands: the same percentiles for the stages the pre-training runs do not speak for, from their",
        "# own public runs (finetune_runs.yaml, multimodal_runs.yaml), none of them fitted on; loo_coverage: the",
        "# share of those runs inside the band the other runs give; the Monte Carlo's MFU lognormal is centered",
        "# on exp(mfu_log_median) x the model's MFU (mean of ln(predicted / published)) with their std as sigma.",
        "stage_bands:",
    ]
    for family, b in stage_bands().items():
        lines.append(f"  {family}: {{stages: [{', '.join(b['stages'])}], runs: {b['runs']}, "
                     f"band_log_p10: {b['band_log_p10']:.4f}, band_log_p90: {b['band_log_p90']:.4f}, "
                     f"mfu_log_median: {b['mfu_log_median']:.4f}, mfu_log_sigma: {b['mfu_log_sigma']:.4f}, "
                     f"loo_coverage: {b['loo_coverage']:.4f}}}")
    return "\n".join(lines) + "\n"
