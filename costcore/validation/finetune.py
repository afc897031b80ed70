"""Public fine-tuning runs scored against the planner (``data/finetune_runs.yaml``).

Each run is a scenario as its source describes it (model shape, GPUs, method, data, batch); the
planner's training time is one epoch's time (``epoch_hours``, the step model at the sustained
rate, data stalls included) times the epochs, against the published wall-clock time. Nothing is
fitted on these runs: they are out of sample for the step model, whose parameters come from the
pre-training calibration (docs/validation.md).
"""
from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd
import yaml

from costcore import api

DATA = Path(__file__).resolve().parent.parent / "data" / "finetune_runs.yaml"


@functools.lru_cache(maxsize=1)
def _runs() -> dict:
    with open(DATA, encoding="utf-8") as fh:
        return yaml.safe_load(fh)["runs"]


def finetune_runs() -> dict[str, dict]:
    """name -> {label, published_hours, source, assumptions, split, scenario} (fresh copies)."""
    return {k: dict(v, scenario=yaml.safe_load(yaml.safe_dump(v["scenario"]))) for k, v in _runs().items()}


def finetune_table() -> pd.DataFrame:
    """One row per run: predicted and published training hours, their ratio, the fit and the rate."""
    rows = []
    for name, run in finetune_runs().items():
        res = api.estimate(dict(run["scenario"], name=run["label"]))
        d = res.to_dict()["stages"]["sft"]
        epochs = float(run["scenario"]["stages"]["sft"].get("epochs", 1))
        hours = d["epoch_hours"] * epochs
        rows.append({"run": name, "label": run["label"], "split": run["split"],
                     "predicted_hours": hours, "published_hours": float(run["published_hours"]),
                     "ratio": hours / float(run["published_hours"]), "fits": d["fits"],
                     "tokens_per_s_per_gpu": d["tokens_per_s_per_gpu"], "mfu": res.stat("sft", "mfu"),
                     "source": run["source"], "assumptions": run["assumptions"]})
    return pd.DataFrame(rows)
