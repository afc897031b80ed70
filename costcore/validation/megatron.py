"""Megatron-LM on Selene, reproduced: the step model against published iteration times and throughputs.

Two published series on NVIDIA's Selene (DGX A100 80 GB, NVLink inside a node, 8 x 200 Gb/s
HDR InfiniBand per node), in ``costcore/data/megatron_selene.csv`` with their sources:

* Korthikanti et al. 2022 (arXiv:2205.05198) Table 5: end-to-end iteration time of GPT 22B,
  175B, 530B and 1T with full recompute, and with selective recompute + sequence parallelism;
* Narayanan et al. 2021 (arXiv:2104.04473) Table 1: hardware TFLOP/s per GPU of the 1.7B-1T
  weak-scaling series (full recompute, no sequence parallelism).

Each row becomes a scenario with the plan pinned as published (TP, PP, DP = GPUs / (TP x PP),
recompute, sequence parallelism, no ZeRO: Megatron 2021-22 had no distributed optimizer) and the
software stack of the time: GPT-style 2-matrix GELU MLP (4h), no FlashAttention (attention at
``ATTENTION_EFFICIENCY`` of the matmul efficiency, fitted here), data-parallel gradients reduced
after the backward pass (dp_overlap 0), tensor-parallel collectives not overlapped (tp_overlap 0). The micro-batch and interleaving are searched (not
published per row). These 18 rows fit three knobs of data/schema.yaml's efficiency section:
``gemm_half_dim``, ``memory_traffic`` and ``collective_efficiency`` (in-sample: a reproduction
of the published figures, not an out-of-sample test; docs/validation.md).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from costcore import api

DATA = Path(__file__).resolve().parent.parent / "data" / "megatron_selene.csv"
# Megatron 2021-22 attention (unfused softmax, no FlashAttention): share of the matmul efficiency,
# fitted on these rows with the three knobs (grid 0.15-0.3).
ATTENTION_EFFICIENCY = 0.15


def rows() -> pd.DataFrame:
    return pd.read_csv(DATA)


def scenario(row) -> dict:
    """The published job as a scenario: the model, Selene's GPUs, the plan as published."""
    L, h = int(row["layers"]), int(row["hidden"])
    n = (12 * L * h * h + int(row["vocab"]) * h) / 1e9
    stage = {"tokens_b": 1.0, "seq_len": int(row["seq_len"]), "global_batch": int(row["global_batch"]),
             "tp": int(row["tp"]), "pp": int(row["pp"]), "dp": int(row["num_gpus"]) // (int(row["tp"]) * int(row["pp"])),
             "cp": 1, "ep": 1, "zero_stage": 0, "recompute": str(row["recompute"]),
             "sequence_parallel": str(row["sequence_parallel"])}
    return {"name": str(row["name"]),
            "model": {"params_b": round(n, 4), "layers": L, "hidden": h, "heads": int(row["heads"]),
                      "kv_heads": int(row["heads"]), "ffn": 4 * h, "vocab": int(row["vocab"]), "gated": False},
            "hardware": {"gpu": "a100-80gb", "num_gpus": int(row["num_gpus"]),
                         "attn_efficiency": ATTENTION_EFFICIENCY},
            "efficiency": {"dp_overlap": 0.0, "tp_overlap": 0.0},
            "stages": {"pretrain": stage}}


def hardware_tflops_per_gpu(row, step_s: float) -> float:
    """Hardware TFLOP/s per GPU as Narayanan et al. 2021 Sec. 5.1 count them (full recompute):
    96 B s L h^2 (1 + s/(6h) + V/(16 L h)) per iteration."""
    B, s, L, h, V = (float(row[k]) for k in ("global_batch", "seq_len", "layers", "hidden", "vocab"))
    flops = 96.0 * B * s * L * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * L * h))
    return flops / (step_s * float(row["num_gpus"])) / 1e12


def table(overrides: dict | None = None) -> pd.DataFrame:
    """Predicted vs published per row; ``overrides`` sets efficiency knobs (the calibration grid)."""
    out = []
    for _, row in rows().iterrows():
        scn = scenario(row)
        if overrides:
            scn["efficiency"] = dict(scn["efficiency"], **overrides)
        res = api.estimate(scn)
        plan = res.plan("pretrain")
        step = plan["step_time_s"]
        pred = step if row["metric"] == "iteration_s" else hardware_tflops_per_gpu(row, step)
        out.append({"name": row["name"], "metric": row["metric"], "published": float(row["published"]),
                    "predicted": pred, "ratio": pred / float(row["published"]),
                    "micro_batch": plan["micro_batch"], "interleave": plan["interleave"],
                    "memory_per_gpu_gb": plan["memory_per_gpu_gb"], "fits": plan["fits"],
                    "source": row["source"]})
    df = pd.DataFrame(out)
    df["error"] = (df["ratio"] - 1.0).abs()
    return df
