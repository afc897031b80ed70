"""Public measurements of batched generation scored against the planner (``data/decode_runs.yaml``).

Each measurement is a fixed batch of prompts of a fixed length, decoded to a fixed number of new tokens
on a tensor-parallel replica, with the whole batch's wall-clock latency published (vLLM's
``benchmarks/benchmark_latency.py``). The planner scores it as an evaluation stage of one run: the
prompts' prefill at ``efficiency.inference_mfu`` and the new tokens at the decoding roofline times
``stages.eval.decode_efficiency`` (:func:`costcore.engine.formulas.decode_gpu_seconds_per_token`, the
formula RL rollouts use with ``stages.rl.rollout_efficiency``, the same default), with the context
while decoding the prompt plus half the answer, on a replica of the measured tensor-parallel size
(``stages.eval.decode_tp``). Its figure is the stage's productive GPU-seconds over the replica's GPUs. Nothing is fitted on these measurements.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from costcore import api
from costcore.validation import runs_of
from costcore.validation.multimodal import summary  # noqa: F401  (median and worst error, runs within 25%)

DATA = Path(__file__).resolve().parent.parent / "data" / "decode_runs.yaml"


def decode_runs() -> dict[str, dict]:
    """name -> the measurement's record (fresh copies)."""
    return runs_of(DATA)


def run_scenario(run: dict) -> dict:
    """The evaluation-stage scenario of one measurement: one run that prefills ``batch`` prompts and
    generates ``output_tokens`` for each, ``batch`` sequences at once, on ``tp`` GPUs."""
    batch, lp, lr = int(run["batch"]), float(run["input_tokens"]), float(run["output_tokens"])
    return {"name": run["label"], "model": dict(run["model"]),
            "hardware": {"gpu": run["gpu"], "num_gpus": int(run["tp"])},
            "stages": {"eval": {"runs": 1, "benchmark_tokens_m": batch * lp / 1e6,
                                "generated_tokens_m": batch * lr / 1e6,
                                "context_tokens": int(round(lp + 0.5 * lr)), "decode_batch": batch,
                                "decode_tp": int(run["tp"]), "human_samples": 0, "experiments": 0}}}


def _eval_stage(scenario: dict) -> dict:
    """The evaluation stage of a measurement's scenario, as the JSON gives it."""
    return api.estimate(scenario).to_dict()["stages"]["eval"]


def _latency_s(stage: dict, run: dict) -> float:
    """The planner's latency of one measurement's batch (s): the evaluation stage's productive GPU-seconds over
    the replica's GPUs."""
    return float(stage["productive_gpu_hours"]) * 3600.0 / float(run["tp"])


def decode_table() -> pd.DataFrame:
    """One row per measurement: predicted and published latency of the whole batch (in hours, as the other
    validation tables; the app shows seconds), their ratio, the replica's GPUs and whether the planner fits it."""
    rows = []
    for name, run in decode_runs().items():
        d = _eval_stage(run_scenario(run))
        hours = _latency_s(d, run) / 3600.0
        published = float(run["published_s"]) / 3600.0
        rows.append({"run": name, "label": run["label"], "engine": run["engine"], "tp": int(run["tp"]),
                     "fits": bool(d["fits"]), "predicted_hours": hours, "published_hours": published,
                     "ratio": hours / published, "source": run["source"], "quote": run["quote"],
                     "assumptions": run["assumptions"]})
    return pd.DataFrame(rows)


def _parts(run: dict) -> tuple[float, float]:
    """(prefill seconds at 100% utilization, decode seconds at the whole roofline) of one measurement: the
    planner's latency is prefill / inference_mfu + decode / decode_efficiency, so two estimates give both."""
    def latency(eff: float, mfu: float) -> float:
        sc = run_scenario(run)
        sc["stages"]["eval"]["decode_efficiency"] = eff
        sc["efficiency"] = {"inference_mfu": mfu}
        return _latency_s(_eval_stage(sc), run)
    at_one, at_half = latency(1.0, 1.0), latency(0.5, 1.0)
    return at_one - (at_half - at_one), at_half - at_one


def leave_one_out_refit(grid: int = 81) -> dict:
    """What fitting the two defaults on these measurements would give, scored out of sample: for each one, the
    (inference_mfu, decode_efficiency) pair on a grid over 0.2-1.0 that minimizes the squared log error on the
    others, applied to it. Returns the median and worst error (x) of those predictions and the pair fitted on
    all (docs/validation.md section 6 reports it beside the defaults')."""
    runs = list(decode_runs().values())
    parts = np.array([_parts(r) for r in runs])
    published = np.array([float(r["published_s"]) for r in runs])
    values = np.linspace(0.2, 1.0, grid)
    mfu, eff = np.meshgrid(values, values, indexing="ij")

    def fit(idx):
        pred = parts[idx, 0, None, None] / mfu + parts[idx, 1, None, None] / eff
        loss = (np.log(pred / published[idx, None, None]) ** 2).sum(axis=0)
        i, j = np.unravel_index(int(loss.argmin()), loss.shape)
        return values[i], values[j]

    ratios = []
    for k in range(len(runs)):
        m, e = fit(np.array([i for i in range(len(runs)) if i != k]))
        ratios.append((parts[k, 0] / m + parts[k, 1] / e) / published[k])
    err = np.exp(np.abs(np.log(np.array(ratios))))
    m_all, e_all = fit(np.arange(len(runs)))
    return {"median_error_x": float(np.median(err)), "worst_error_x": float(err.max()),
            "inference_mfu": float(m_all), "decode_efficiency": float(e_all)}
