"""The numba kernel against the slow reference model (tests/reference_model.py).

For every preset in presets/*.yaml (collected when the tests run, so presets
added later are included) and a set of hand-built scenarios that switch on
every option (six stages; full / LoRA / QLoRA; PPO / GRPO; reward model /
rule; live / precomputed / no reference; keep-all / keep-last-K / milestones;
explicit MFU / job layout; measured tokens_per_gpu_s and tflops_per_gpu; ZeRO 0-3;
recompute modes; TP / PP / CP / EP / interleaving / sequence parallelism, pinned and
searched; BF16 / FP8; dense / MoE / GELU), each line item and statistic of each
enabled stage must agree to rel 1e-9. The reference is given the plan the kernel's
search chose (reference_model.kernel_plans) and re-derives that plan's step time,
memory and MFU, and everything downstream; the search itself is checked in
tests/test_layout_reference.py.

One test per (scenario, quantity), so a disagreement names the quantity.
"""
from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest
import reference_model as ref
from hypothesis import given
from cases import FULL_FT_PPO_KEEP_ALL, HAND_BUILT  # noqa: F401
from strategies import SETTINGS, scenarios

import costcore
from costcore.engine.kernel import LINE_ITEMS, STATS
from costcore.scenario.schema import BY_PATH, STAGES

REL, ABS = 1e-9, 1e-12
PRESET_DIR = Path(__file__).resolve().parent.parent / "presets"
QUANTITIES = ref.ITEM_KEYS + ref.STAT_KEYS + ref.LAYOUT_STAT_KEYS + ref.MEDIA_STAT_KEYS


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


CASES = [f"preset:{n}" for n in preset_names()] + [f"hand:{n}" for n in HAND_BUILT]


def scenario_of(case: str) -> dict:
    kind, name = case.split(":", 1)
    if kind == "preset":
        return costcore.load_preset(name)
    return HAND_BUILT[name]


def kernel_rows(res) -> dict:
    """{stage: {line item: $, stat: value}} from a kernel Result."""
    out = {}
    for s in res.stages:
        i = STAGES.index(s)
        row = {key: float(res.items[i, j]) for j, (key, _, _, _) in enumerate(LINE_ITEMS)}
        row.update({name: float(res.stats[i, k]) for k, name in enumerate(STATS)})
        out[s] = row
    return out


@functools.cache
def pair(case: str):
    scn = scenario_of(case)
    return kernel_rows(costcore.estimate(scn)), ref.reference_estimate(scn, ref.kernel_plans(scn))


def mismatches(kern: dict, want: dict, quantity: str) -> list[str]:
    out = []
    for s in want:
        a, b = kern[s][quantity], want[s][quantity]
        if not math.isclose(a, b, rel_tol=REL, abs_tol=ABS):
            diff = f"rel diff {abs(a - b) / abs(b):.3g}" if b else f"abs diff {abs(a - b):.3g}"
            out.append(f"{s}: kernel {a!r} vs reference {b!r} ({diff})")
    return out


@pytest.mark.parametrize("case", CASES)
def test_same_stages_enabled(case):
    kern, want = pair(case)
    assert sorted(kern) == sorted(want)
    assert want, "scenario enables no stage"


@pytest.mark.parametrize("quantity", QUANTITIES)
@pytest.mark.parametrize("case", CASES)
def test_kernel_matches_reference(case, quantity):
    kern, want = pair(case)
    bad = mismatches(kern, want, quantity)
    assert not bad, f"{case} {quantity}:\n  " + "\n  ".join(bad)


def test_hand_built_scenarios_cover_every_option():
    """The hand-built list really switches on every stage and every option named in its names."""
    seen: dict[str, set] = {}
    for scn in HAND_BUILT.values():
        for s, sdata in scn["stages"].items():
            seen.setdefault("stage", set()).add(s)
            for key, value in sdata.items():
                if isinstance(value, list):  # a multimodal phase's train list
                    seen.setdefault("train", set()).update(value)
                    continue
                seen.setdefault(key, set()).add(value if isinstance(value, str) else (value > 0))
    assert seen["stage"] == set(STAGES)
    assert {"full", "lora", "qlora"} <= seen["method"]
    assert {"ppo", "grpo"} <= seen["algorithm"]
    assert {"model", "rule"} <= seen["reward"]
    assert {"live", "precomputed", "none"} <= seen["reference"]
    assert {"none", "selective", "full", "auto"} <= seen["recompute"]
    assert {"full", "weights"} <= seen["ckpt_type"]
    assert {"qv", "attn", "all"} <= seen["lora_targets"]
    assert {True, False} <= seen["keep_last"]          # keep-all (0) and keep-last-K
    assert True in seen["milestone_every"] and True in seen["mfu"] and True in seen["tokens_per_gpu_s"]
    assert True in seen["tflops_per_gpu"]
    assert {True, False} <= seen["zero_stage"] and {True, False} <= seen["ckpt_interval_h"]
    # job-layout pins: every plan field pinned somewhere
    for key in ("tp", "pp", "dp", "cp", "ep", "interleave", "micro_batch", "global_batch", "global_batch_tokens"):
        assert True in seen[key], key
    assert {"on", "off"} <= seen["sequence_parallel"]  # and auto, the default, everywhere else
    models = [scn.get("model", {}) for scn in HAND_BUILT.values()]
    hardware = [scn.get("hardware", {}) for scn in HAND_BUILT.values()]
    assert any(m.get("experts", 0) > 0 for m in models)  # MoE with its experts given
    assert any(m.get("params_b", 0) > 1.05 * m.get("active_params_b", 1e9) and not m.get("experts") for m in models)
    assert any(m.get("hf_config") for m in models)  # a shipped config (GELU MLP)
    assert {"fp8"} <= {h.get("precision") for h in hardware}
    media = [scn.get("multimodal", {}) for scn in HAND_BUILT.values()]  # issue 17: every media option
    assert {"image", "video", "audio"} <= {m.get("modality", "image") for m in media if m or "mm_tune" in str(m)}
    assert {"mlp2x", "pixel-shuffle", "qformer"} <= {m.get("connector", "mlp2x") for m in media}
    assert {"connector", "llm", "encoder"} <= seen["train"]
    assert any(m.get("precomputed_features") for m in media) and any(m.get("token_compression") for m in media)
    assert True in seen["tokens_per_item"] and True in seen["caption_usd_per_item"]
    # kernel branches the scenarios must reach
    stats = [pair(f"hand:{n}")[0][s] for n in HAND_BUILT for s in pair(f"hand:{n}")[0] if s != "eval"]
    assert {0.0, 1.0, 2.0} <= {st["recompute_mode"] for st in stats}
    assert {0.0, 1.0, 2.0, 3.0} <= {st["plan_zero"] for st in stats}
    assert {0.0, 1.0} <= {st["plan_sp"] for st in stats}
    for key in ("plan_tp", "plan_pp", "plan_cp", "plan_ep", "plan_interleave", "plan_micro_batch"):
        assert max(st[key] for st in stats) > 1.0, key
    fits = {pair(f"hand:{n}")[0][s]["fits"] for n in HAND_BUILT for s in pair(f"hand:{n}")[0]}
    assert fits == {0.0, 1.0}


# ---------------------------------------------------------------------------
# Random scenarios
# ---------------------------------------------------------------------------
@SETTINGS
@given(scenarios())
def test_random_scenarios_match_reference(scn):
    kern = kernel_rows(costcore.estimate(scn))
    want = ref.reference_estimate(scn, ref.kernel_plans(scn))
    assert sorted(kern) == sorted(want)
    bad = []
    for q in QUANTITIES:
        bad += [f"{q} {m}" for m in mismatches(kern, want, q)]
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------------------
# In-run checkpoint storage, by hand
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("interval_h,n_ckpt,stored_intervals", [
    (1.0, 1, 0),    # one checkpoint, written when the run ends: nothing stored during the run
    (0.003, 4, 6),  # keep-all, writes at s, 2s, 3s, 4s = end: 0 + 1 + 2 + 3 checkpoint-intervals
])
def test_in_run_checkpoint_storage_by_hand(interval_h, n_ckpt, stored_intervals):
    """formulas.held_checkpoint_sum: 'Multiplied by the interval and the checkpoint size it gives the
    checkpoint-hours stored during a run.' A checkpoint exists from its write on; the n-th write ends the
    run, after which the retention term (hot_after_days, then cold) bills it."""
    scn = {
        "model": {"params_b": 7.0, "layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008},
        "hardware": {"gpu": "h100-80gb", "num_gpus": 8},
        "reliability": {"failures_per_gpu_hour": 0.0, "idle_fraction": 0.0, "failed_run_fraction": 0.0},
        "stages": {"sft": {"samples": 1000, "tokens_per_sample": 500, "epochs": 2, "tokens_per_gpu_s": 2500,
                           "ckpt_interval_h": interval_h, "keep_last": 0, "experiments": 0}},
    }
    res = costcore.estimate(scn)
    wall_h = 1000 * 500 * 2 / 2500 / 3600 / 8  # 1e6 tokens at 2,500 tokens/s/GPU on 8 GPUs = 0.01389 h
    assert res.stat("sft", "ckpt_count") == n_ckpt
    spacing_h = wall_h / n_ckpt
    ckpt_gb = 7e9 * 14 / 1e9  # 98 GB with optimizer state
    hot_after_months = 30 / 30.4167  # cold_after_days
    in_run_gb_months = ckpt_gb * stored_intervals * spacing_h / 730.0
    expected_hot = 0.10 * (in_run_gb_months + n_ckpt * ckpt_gb * hot_after_months)
    expected_cold = 0.004 * n_ckpt * ckpt_gb * (12 - hot_after_months)
    i_hot = [k for k, *_ in LINE_ITEMS].index("storage.ckpt_hot")
    i_cold = [k for k, *_ in LINE_ITEMS].index("storage.ckpt_cold")
    assert res.items[STAGES.index("sft"), i_cold] == pytest.approx(expected_cold, rel=1e-9)
    assert res.items[STAGES.index("sft"), i_hot] == pytest.approx(expected_hot, rel=1e-9)
