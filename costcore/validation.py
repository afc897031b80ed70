"""Predicted vs published GPU-hours for public pre-training runs.

Two sets of runs, each row with its source:

* ``reference``: the project's copy of the reference runs
  (``costcore/data/published_runs.csv``, from shared/reference). The shared
  utilization coefficients are calibrated on these (benchmarks/calibrate.py).
* ``extra``: other public runs (``costcore/data/extra_runs.csv``: Llama 2,
  Llama 1 13B/33B, Llama 3, StarCoder, MPT, Falcon, DeepSeek-V3) that are
  not in the fit, so their errors are out of sample (they only broke ties
  between settings that scored alike on the reference runs).
 Each run becomes a scenario with *defaults only*: parameters,
tokens, sequence length, GPU type and count. Nothing else is taken from the
row (no MFU), so the table measures the default utilization and goodput
model. ``throughput=True`` instead feeds the run's published throughput
(tokens/s/GPU, TFLOP/s/GPU or MFU) to check the rest of the arithmetic.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from . import api
from .schema import CATALOG

DATA = Path(__file__).parent / "data" / "published_runs.csv"
DATASETS = {"reference": DATA, "extra": Path(__file__).parent / "data" / "extra_runs.csv"}
GPU_MAP = {"A100-80GB": "a100-80gb", "A100-40GB": "a100-40gb", "V100": "v100", "TPUv4": "tpu-v4",
           "TPUv3": "tpu-v3", "H100-80GB": "h100-80gb", "H800": "h800"}
# Published rows that omit a value the scenario needs; each assumption is shown in the table.
ASSUMED = {"seq_len": 2048, "num_gpus": 2048}


def load_runs(dataset: str = "reference") -> pd.DataFrame:
    return pd.read_csv(DATASETS[dataset])


def _published_throughput(row, peak_tflops: float):
    """(key, value) of the scenario override that encodes the run's published throughput.

    Tokens/s/GPU first (unambiguous), then MFU, then hardware TFLOP/s/GPU.
    """
    text = str(row.get("throughput") or "")
    m = re.search(r"([\d.,]+)\s*(k?)\s*tokens/s/GPU", text)
    if m:
        v = float(m.group(1).replace(",", ""))
        return "tokens_per_gpu_s", v * (1000 if m.group(2) else 1)
    m = re.search(r"([\d.]+)(?:\s*-\s*([\d.]+))?%\s*(?:BF16\s*)?MFU", text)
    if m:  # a range such as 38-43% counts as its midpoint
        lo = float(m.group(1))
        hi = float(m.group(2)) if m.group(2) else lo
        return "mfu", (lo + hi) / 200.0
    m = re.search(r"([\d.]+)\s*TFLOP/s", text)
    if m:
        return "tflops_per_gpu", float(m.group(1))
    return None


def pretraining_rows(df: pd.DataFrame | None = None, dataset: str = "reference") -> pd.DataFrame:
    """Runs with tokens, a known GPU and a published GPU-hours or days figure."""
    df = load_runs(dataset) if df is None else df
    keep = df["tokens_b"].notna() & df["gpu"].isin(list(GPU_MAP)) & (
        df["gpu_hours"].notna() | (df["days"].notna() & df["num_gpus"].notna()))
    return df[keep].reset_index(drop=True)


def scenario_for(row, throughput: bool = False) -> tuple[dict, list[str]]:
    notes = []
    seq = row["seq_len"]
    if pd.isna(seq):
        seq = ASSUMED["seq_len"]
        notes.append(f"seq_len {seq} assumed")
    gpus = row["num_gpus"]
    if pd.isna(gpus):
        gpus = ASSUMED["num_gpus"]
        notes.append(f"{gpus} GPUs assumed")
    gpu = GPU_MAP[row["gpu"]]
    stage = {"tokens_b": float(row["tokens_b"]), "seq_len": int(seq)}
    if throughput:
        t = _published_throughput(row, CATALOG[gpu]["peak_tflops"])
        if t is None:
            return {}, ["no published throughput"]
        stage[t[0]] = t[1]
        notes.append(f"{t[0]}={t[1]:.4g}")
    scn = {"name": str(row["name"]),
           "model": {"params_b": float(row["params_total_b"]),
                     "active_params_b": float(row["params_active_b"])},
           "hardware": {"gpu": gpu, "num_gpus": int(gpus)},
           "stages": {"pretrain": stage}}
    return scn, notes


def validation_table(throughput: bool = False, dataset: str = "reference") -> pd.DataFrame:
    """One row per run: predicted vs published GPU-hours (or days) and the ratio."""
    out = []
    for _, row in pretraining_rows(dataset=dataset).iterrows():
        scn, notes = scenario_for(row, throughput)
        if not scn:
            continue
        res = api.estimate(scn)
        pred_days = res.stat("pretrain", "wall_days")
        main_h = pred_days * 24 * res.stat("pretrain", "num_gpus")
        if not pd.isna(row["gpu_hours"]):
            basis, published, predicted = "GPU-hours", float(row["gpu_hours"]), main_h
        else:
            basis, published, predicted = "days", float(row["days"]), pred_days
        out.append({"run": row["name"], "gpu": row["gpu"], "params_b": row["params_active_b"],
                    "tokens_b": row["tokens_b"], "num_gpus": scn["hardware"]["num_gpus"],
                    "basis": basis, "published": published, "predicted": predicted,
                    "published_gpu_hours": float(row["gpu_hours"]) if not pd.isna(row["gpu_hours"])
                    else float(row["days"]) * 24 * scn["hardware"]["num_gpus"],
                    "predicted_gpu_hours": main_h, "predicted_days": pred_days,
                    "mfu": res.stat("pretrain", "mfu"),
                    "ratio": predicted / published, "notes": "; ".join(notes), "source": row["source"]})
    df = pd.DataFrame(out)
    if not df.empty:
        df["error"] = (df["ratio"] - 1.0).abs()
        df["fold"] = np.maximum(df["ratio"], 1.0 / df["ratio"])
    return df


def summary(df: pd.DataFrame) -> dict:
    return {"runs": int(len(df)), "median_error": float(df["error"].median()),
            "worst_fold": float(df["fold"].max()), "worst_run": str(df.loc[df["fold"].idxmax(), "run"])}


def baseline_table(mfu: float = 0.30, dataset: str = "reference") -> pd.DataFrame:
    """The plain rule 6ND / (peak x mfu) on the same rows, for comparison."""
    out = []
    for _, row in pretraining_rows(dataset=dataset).iterrows():
        scn, _ = scenario_for(row)
        peak = CATALOG[scn["hardware"]["gpu"]]["peak_tflops"]
        h = 6 * row["params_active_b"] * 1e9 * row["tokens_b"] * 1e9 / (peak * 1e12 * mfu) / 3600
        if not pd.isna(row["gpu_hours"]):
            r = h / row["gpu_hours"]
        else:
            r = h / (row["days"] * 24 * scn["hardware"]["num_gpus"])
        out.append({"run": row["name"], "ratio": r, "error": abs(r - 1), "fold": max(r, 1 / r)})
    return pd.DataFrame(out)
