"""Public fine-tuning and preference runs scored against the planner (``data/finetune_runs.yaml``).

Each run is a scenario as its source describes it (model shape, GPUs, method, data, batch); the
planner's training time (:func:`published_hours_figure`: one epoch's time times the epochs for SFT
and DPO, the whole stage for RL) is compared with the published wall-clock time. Nothing is
fitted on these runs: they are out of sample for the step model, whose parameters come from the
pre-training calibration (docs/validation.md).
"""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from costcore import api
from costcore.scenario.schema import BY_PATH
from costcore.validation import multimodal, runs_of

DATA = Path(__file__).resolve().parent.parent / "data" / "finetune_runs.yaml"
STEPS = Path(__file__).resolve().parent.parent / "data" / "finetune_steps.yaml"


def finetune_runs() -> dict[str, dict]:
    """name -> {label, published_hours, source, assumptions, split, scenario} (fresh copies)."""
    return runs_of(DATA)


def published_hours_figure(stage: str, stage_data: dict, stage_dict: dict) -> float:
    """The planner's figure for a run's published wall-clock hours (h).

    SFT and DPO: ``epoch_hours`` (one pass at the sustained step rate, data stalls included) times the
    epochs. RL: the stage's productive GPU-hours over its GPUs, i.e. rollout decoding, prefill, the
    reward/reference/critic passes and the policy updates of every step (failures, checkpoint stalls
    and repeated experiments not included, as in the other stages' figure).
    """
    if stage == "rl":
        return float(stage_dict["productive_gpu_hours"]) / float(stage_dict["num_gpus"])
    return float(stage_dict["epoch_hours"]) * float(stage_data.get("epochs", 1))


def finetune_table() -> pd.DataFrame:
    """One row per run: predicted and published training hours, their ratio, the fit and the rate."""
    rows = []
    for name, run in finetune_runs().items():
        stage = run.get("stage", "sft")
        res = api.estimate(dict(run["scenario"], name=run["label"]))
        d = res.to_dict()["stages"][stage]
        hours = published_hours_figure(stage, run["scenario"]["stages"][stage], d)
        rows.append({"run": name, "label": run["label"], "split": run["split"], "stage": stage,
                     "predicted_hours": hours, "published_hours": float(run["published_hours"]),
                     "ratio": hours / float(run["published_hours"]), "fits": d["fits"],
                     "tokens_per_s_per_gpu": d["tokens_per_s_per_gpu"], "mfu": res.stat(stage, "mfu"),
                     "source": run["source"], "assumptions": run["assumptions"]})
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame) -> dict:
    """The multimodal runs' summary (:func:`costcore.validation.multimodal.summary`: median and worst
    error in x, runs within 25%) and the label of the worst run."""
    worst = table["ratio"].map(lambda r: abs(math.log(r)))
    return dict(multimodal.summary(table), worst_run=str(table.loc[worst.idxmax(), "label"]) if len(table) else "")


def step_runs() -> dict[str, dict]:
    """name -> {label, model, published_step_s, published_memory_gb, quote, source, assumptions, scenario} (fresh
    copies)."""
    return runs_of(STEPS)


# The two profiled runs whose memory growth gives the bytes an unfused Hugging Face loss holds per logit.
HF_LOGIT_RUNS = ("qwen-7b-lora-2048", "qwen-7b-lora-8192")


def hf_logit_bytes(table: pd.DataFrame | None = None) -> float:
    """Bytes per token and vocabulary entry an unfused Hugging Face loss holds (efficiency.logit_bytes for
    such a stack), read from Qwen-7B's profiled LoRA memory at 2,048 and 8,192 tokens: the published
    growth beyond the planner's at the default 4 bytes, per added token and vocabulary entry, plus those
    4 (about 11: the BF16 logits, their FP32 cast, the shifted copy, the log-softmax). The other
    profiled rows are not used (tests check the 14B and 72B against it). ``table``: :func:`step_table` at the
    defaults, when the caller has it already."""
    t = (step_table() if table is None else table).set_index("run")
    short, long_ = (t.loc[r] for r in HF_LOGIT_RUNS)
    vocab = float(step_runs()[HF_LOGIT_RUNS[1]]["scenario"]["model"]["vocab"])
    extra_gb = ((long_["published_memory_gb"] - short["published_memory_gb"])
                - (long_["predicted_memory_gb"] - short["predicted_memory_gb"]))
    default = float(BY_PATH["efficiency.logit_bytes"].default)
    return default + extra_gb * 1e9 / ((long_["tokens"] - short["tokens"]) * vocab)


def step_table(efficiency: dict | None = None) -> pd.DataFrame:
    """One row per published step measurement (``data/finetune_steps.yaml``): the plan's step time (one
    optimizer step at the modelled rate: no production losses, which a profiled iteration does not have)
    and its memory per GPU, each against the published figure. Nothing is fitted on them. ``efficiency``:
    knobs set on every run (``{"logit_bytes": hf_logit_bytes()}`` for the Hugging Face loss they ran)."""
    rows = []
    for name, run in step_runs().items():
        scn = dict(run["scenario"], name=run["label"])
        if efficiency:
            scn["efficiency"] = dict(scn.get("efficiency") or {}, **efficiency)
        res = api.estimate(scn)
        plan = res.plan("sft")
        sft = run["scenario"]["stages"]["sft"]
        rows.append({"run": name, "label": run["label"], "method": sft["method"], "model": run["model"],
                     "tokens": int(sft["seq_len"]), "gpus": int(run["scenario"]["hardware"]["num_gpus"]),
                     "predicted_step_s": plan["step_time_s"], "published_step_s": float(run["published_step_s"]),
                     "step_ratio": plan["step_time_s"] / float(run["published_step_s"]),
                     "predicted_memory_gb": plan["memory_per_gpu_gb"],
                     "published_memory_gb": float(run["published_memory_gb"]),
                     "memory_ratio": plan["memory_per_gpu_gb"] / float(run["published_memory_gb"]),
                     "quote": run["quote"], "source": run["source"], "assumptions": run["assumptions"]})
    return pd.DataFrame(rows)


def step_summary(table: pd.DataFrame) -> dict:
    """Per method (lora, qlora): the median, lowest and highest predicted / published step time and
    memory; and per model, length and GPU count measured both ways, Q-LoRA's step time over LoRA's,
    published and predicted (how much the 4-bit base slows a step): {model, tokens, published, predicted}."""
    out: dict = {}
    for method, g in table.groupby("method"):
        out[method] = {k: (float(g[k].median()), float(g[k].min()), float(g[k].max()))
                       for k in ("step_ratio", "memory_ratio")}
    by = table.set_index(["model", "tokens", "gpus", "method"])
    out["qlora_over_lora"] = [
        {"model": m, "tokens": t,
         "published": float(by.loc[(m, t, g, "qlora"), "published_step_s"] / lo["published_step_s"]),
         "predicted": float(by.loc[(m, t, g, "qlora"), "predicted_step_s"] / lo["predicted_step_s"])}
        for (m, t, g, method), lo in by.iterrows() if method == "lora" and (m, t, g, "qlora") in by.index]
    return out
