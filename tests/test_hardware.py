"""The accelerator catalog (costcore/data/hardware.yaml) and the names papers give its parts.

A run in a CSV of public runs is scored only when its GPU name maps to a catalog entry
(costcore.validation.runs.gpu_key); a name that does not map is listed as not scored, with the reason.
The catalog's 2026-12-06 additions (A800, H100 PCIe, H20, GH200, MI250X, TPU v5e/v5p/v6e) cover parts of
published 2023-2025 runs that were silently skipped before.
"""
from __future__ import annotations

import pandas as pd
import pytest

import costcore
from costcore.scenario.schema import CATALOG
from costcore.validation import runs

NAMES = {"A100-40GB": "a100-40gb", "A100": "a100-80gb", "A800": "a800-80gb", "A800-80GB": "a800-80gb",
         "H100 PCIe": "h100-pcie", "H100 SXM": "h100-80gb", "H800": "h800", "GH200": "gh200", "H200": "h200",
         "H20": "h20", "GB200": "gb200", "GB200 NVL72": "gb200", "B200": "b200", "MI325X": "mi325x", "TPUv4": "tpu-v4", "TPU v5e": "tpu-v5e", "TPU v5p": "tpu-v5p",
         "Trillium": "tpu-v6e", "TPU v6e": "tpu-v6e", "MI250X": "mi250x", "MI250": "mi250x", "MI300X": "mi300x",
         "L40S": "l40s", "L4": "l4", "RTX 4090": "rtx-4090", "RTX A6000": "rtx-a6000", "tpu-v5p": "tpu-v5p",
         "48GB GPU": None, "Gaudi2": "gaudi2", "Gaudi 3": "gaudi3", "HL-325L Gaudi3": "gaudi3", "Gaudi": None, "custom": None}


@pytest.mark.parametrize("written, key", NAMES.items())
def test_a_gpu_as_papers_write_it_maps_to_its_own_entry(written, key):
    """The longer names win over their substrings: GH200 is not an H200, an H20 is not an H200, an
    H100 PCIe is not the SXM part, an A800 is not an A100, an L40S is not an L4."""
    assert runs.gpu_key(written) == key


REQUIRED = ("label", "peak_tflops", "fp8_peak_tflops", "gemm_efficiency", "intra_node_gbs", "inter_node_gbs",
            "gpus_per_node", "pcie_gbs", "memory_gb", "mem_bandwidth_tbs", "usd_per_gpu_hour", "attn_efficiency",
            "network_source", "attn_source", "confidence", "source", "date")


@pytest.mark.parametrize("gpu", list(CATALOG))
def test_every_catalog_entry_has_its_figures_and_sources(gpu):
    spec = CATALOG[gpu]
    assert all(k in spec for k in REQUIRED), [k for k in REQUIRED if k not in spec]
    assert spec["fp8_peak_tflops"] >= spec["peak_tflops"] > 0 and 0 < spec["gemm_efficiency"] <= 1
    assert spec["confidence"] in ("high", "medium", "low") and len(str(spec["source"])) > 20


def _pretrain_gpu_hours(gpu: str, params_b: float = 70.0, num_gpus: int = 1024) -> float:
    scn = {"model": {"params_b": params_b}, "hardware": {"gpu": gpu, "num_gpus": num_gpus},
           "stages": {"pretrain": {"tokens_b": 2000}}}
    return costcore.estimate(scn).stat("pretrain", "gpu_hours")


@pytest.mark.parametrize("slower, faster", [("a800-80gb", "a100-80gb"), ("h100-pcie", "h100-80gb"),
                                            ("tpu-v4", "tpu-v5p"), ("mi250x", "mi300x"), ("h20", "h800"),
                                            ("gaudi2", "gaudi3"), ("mi300x", "mi325x"), ("b200", "gb200")])
def test_a_lesser_part_never_trains_faster(slower, faster):
    """Same job: less interconnect (A800), a PCIe card (H100 PCIe), an older TPU, a CDNA2 module, the
    export Hopper with a seventh of the FLOPs (H20) take at least as many GPU-hours."""
    assert _pretrain_gpu_hours(slower) >= _pretrain_gpu_hours(faster)


def test_runs_not_scored_are_named_with_their_reason(tmp_path):
    df = pd.DataFrame({"name": ["ok", "gaudi", "no-hours", "no-tokens"], "params_total_b": [7, 7, 7, 7],
                       "tokens_b": [1000, 1000, 1000, None], "gpu": ["TPU v5e", "Gaudi", "A800", "A800"],
                       "num_gpus": [256, 256, None, 64], "days": [None, 10, 5, 5], "gpu_hours": [5e4, None, None, None]})
    why = runs.skipped_runs(df)
    assert set(why) == {"gaudi", "no-hours", "no-tokens"}
    assert "'Gaudi' is not in the catalog" in why["gaudi"]
    assert "days with a GPU count" in why["no-hours"] and "token" in why["no-tokens"]
    assert list(runs.pretraining_rows(df)["name"]) == ["ok"]


def test_a_run_that_does_not_fit_as_modelled_says_so(tmp_path):
    """A published run the model cannot lay out in memory (here a 2T dense model on 64 H100s) is still
    scored, and its notes say the priced layout cannot run, with the fewest GPUs that fit."""
    path = tmp_path / "runs.csv"
    pd.DataFrame({"name": ["too-big", "fits"], "params_total_b": [2000, 7], "tokens_b": [100, 100],
                  "gpu": ["H100", "H100"], "num_gpus": [64, 64], "days": [100, 10],
                  "source": ["test", "test"]}).to_csv(path, index=False)
    table = runs.validation_table(dataset=str(path)).set_index("run")
    assert "does not fit in memory as modelled" in table.loc["too-big", "notes"]
    assert "needs at least" in table.loc["too-big", "notes"]
    assert "fit" not in table.loc["fits", "notes"]
