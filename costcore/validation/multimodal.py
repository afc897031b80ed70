"""Public vision-language training runs scored against the planner (``data/multimodal_runs.yaml``).

Each run is a scenario as its recipe says (language model, encoder, connector, media tokens,
samples, what is trained, GPUs, batch, ZeRO stage, gradient checkpointing; data-parallel jobs,
so no tensor or pipeline parallelism); the planner's time is one epoch's wall-clock hours at the
sustained rate (``epoch_hours``) times the epochs, against the published time. Nothing is fitted
on these runs: the step model's parameters come from the pre-training calibration, so every run
here is out of sample (docs/validation.md).
"""
from __future__ import annotations

import functools
import math
from pathlib import Path

import pandas as pd
import yaml

from costcore import api
from costcore.scenario.schema import CATALOG

DATA = Path(__file__).resolve().parent.parent / "data" / "multimodal_runs.yaml"
GPU_ALIASES = {"v100-32gb": "v100"}  # the catalog's V100 is the 32 GB SXM2 card
# Language models of the recipes with a shipped config of the same shape (LLaMA-1 and Vicuna v1.x
# share Llama 2's 32 x 4096 / 40 x 5120 shapes and 32,000-token vocabulary); others take the
# family table's shape for their size (schema._family_shape).
SHAPES = {6.74: "llama-2-7b", 13.02: "llama-2-13b"}


@functools.lru_cache(maxsize=1)
def _runs() -> tuple:
    with open(DATA, encoding="utf-8") as fh:
        return tuple(yaml.safe_load(fh)["runs"])


def run_scenario(run: dict) -> dict:
    """The scenario a run's recipe describes (one multimodal phase)."""
    size = float(run["llm_params_b"])
    model = {"hf_config": SHAPES[size]} if size in SHAPES else {"params_b": size}
    mm = {"modality": run.get("modality", "image"), "encoder": run["encoder"], "connector": run.get("connector", "mlp2x")}
    if run.get("connector_queries"):
        mm["connector_queries"] = int(run["connector_queries"])
    if run.get("tokens_per_item"):
        mm["tokens_per_item"] = float(run["tokens_per_item"])
    stage = {"samples": int(run["samples"]), "items_per_sample": float(run.get("items_per_sample", 1)),
             "media_share": float(run.get("media_share", 1.0)),
             "text_tokens_per_sample": float(run["text_tokens_per_sample"]), "epochs": float(run.get("epochs", 1)),
             "train": list(run["train"]), "method": run.get("method", "full"), "tp": 1, "pp": 1, "cp": 1,
             "global_batch": int(run["global_batch"]), "seq_len": int(run["seq_len"]), "experiments": 0}
    if run.get("micro_batch"):
        stage["micro_batch"] = int(run["micro_batch"])
    if run.get("zero_stage") is not None:
        stage["zero_stage"] = int(run["zero_stage"])
    if run.get("recompute"):
        stage["recompute"] = run["recompute"]
    phase = run["phase"]
    return {"name": run.get("label", run["name"]), "model": model,
            "hardware": {"gpu": GPU_ALIASES.get(run["gpu"], run["gpu"]), "num_gpus": int(run["num_gpus"])},
            "multimodal": mm, "stages": {phase: stage}}


def multimodal_table() -> pd.DataFrame:
    """One row per run: predicted and published hours, their ratio, the fit, memory and MFU."""
    rows = []
    for run in _runs():
        scn = run_scenario(run)
        phase = run["phase"]
        res = api.estimate(scn)
        d = res.to_dict()["stages"][phase]
        hours = d["epoch_hours"] * float(run.get("epochs", 1))
        pub = float(run["published_hours"])
        rows.append({"run": run["name"], "label": run.get("label", run["name"]), "phase": phase,
                     "gpus": f"{run['num_gpus']} × {CATALOG[GPU_ALIASES.get(run['gpu'], run['gpu'])]['label']}", "predicted_hours": hours, "published_hours": pub,
                     "ratio": hours / pub, "fits": d["fits"], "memory_per_gpu_gb": d["memory_per_gpu_gb"],
                     "mfu": res.stat(phase, "mfu"), "source": run["source"], "quote": run.get("quote", "")})
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame) -> dict:
    """Median and worst error (x), the share within 25%, over the runs (none of them fitted)."""
    err = table["ratio"].map(lambda r: math.exp(abs(math.log(r))))
    return {"runs": int(len(table)), "median_error_x": float(err.median()), "worst_error_x": float(err.max()),
            "within_25pct": int(within_25pct(table["ratio"]).sum())}


def within_25pct(ratio: pd.Series) -> pd.Series:
    """True where predicted / published is within 25% of 1 (0.75-1.25), the bar issues 15 and 17 set."""
    return (ratio >= 0.75) & (ratio <= 1.25)


BAR_RUNS = ("llava-1.5-7b-align", "llava-1.5-13b-align", "llava-1.5-7b-tune", "llava-1.5-13b-tune")


def bar_text(table: pd.DataFrame) -> str:
    """Issue 17's bar in words, from the table: the four LLaVA-1.5 phases (haotian-liu/LLaVA README) within 25%."""
    bar = table[table["run"].isin(BAR_RUNS)]
    out = bar[~within_25pct(bar["ratio"])]
    # 3 decimals, and the misses named: at 2 decimals a 1.254x miss reads "1.25x", inside the band it misses
    inside = within_25pct(bar["ratio"])
    each = ", ".join(f"{r.label} {r.ratio:.3f}x" + ("" if ok else " (outside)")
                     for r, ok in zip(bar.itertuples(), inside))
    if out.empty:
        return f"The multimodal bar (the four LLaVA-1.5 phases within 25% of their published time) is **met**: {each}."
    return (f"The multimodal bar (the four LLaVA-1.5 phases within 25% of their published time) is **missed** for "
            f"{len(out)} of {len(bar)}: {each}.")
