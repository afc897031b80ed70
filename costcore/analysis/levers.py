"""Optimization levers: concrete what-ifs on the current scenario, each computed by the core.

A lever is a named change to the scenario; its saving is the total of the
current scenario minus the total of the changed one, both estimated by the
kernel. Levers that do not apply (nothing to change) are left out. The
lever figures (discounts, gains) live in data/levers.yaml with sources.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from costcore import api, fmt
from costcore.scenario import schema
from costcore.scenario.schema import effective_value, set_path

_DATA = yaml.safe_load((Path(__file__).resolve().parent.parent / "data" / "levers.yaml").read_text())
P = {k: v["value"] for k, v in _DATA.items()}
SOURCES = {k: v["source"] for k, v in _DATA.items()}


@dataclass
class Lever:
    key: str
    title: str
    risk: str
    changes: dict  # dotted path -> new value
    saving_usd: float = 0.0
    new_total_usd: float = 0.0
    sources: list = field(default_factory=list)


def _stages_in_words(changes: dict) -> str:
    """The stages a lever's changes (``stages.<stage>.<key>`` paths) touch, in words: "continued pre-training and
    supervised fine-tuning"."""
    return fmt.words_list((lambda w: w[0].lower() + w[1:])(schema.STAGE_LABELS[k.split(".")[1]]) for k in changes)


def _train_stages(res) -> list[str]:
    return [s for s in res.stages if s != "eval"]


def _pricing_levers(res: api.Result) -> list[Lever]:
    """Reserved and spot capacity, each off the GPU's on-demand price."""
    ev = lambda p: effective_value(res.scenario, p)  # noqa: E731
    out: list[Lever] = []
    # pricing: the discounts are off the GPU's on-demand price (its catalog price; a custom GPU's own), so a
    # lever applied is not offered again: each Apply of "reserved" cut the price that it had already cut
    price = float(schema.CATALOG.get(ev("hardware.gpu"), {}).get("usd_per_gpu_hour") or ev("hardware.usd_per_gpu_hour"))
    months = float(ev("hardware.reserved_months"))
    out.append(Lever("reserved", f"Reserved capacity ({P['reserved_discount']:.0%} below on-demand, a "
                                 f"{months:g}-month term)",  # fixed cost; offered only where it saves (levers)
                     "The whole term is billed whether the GPUs run or not (its unused hours are in the total), you "
                     "are tied to one provider, and the GPU time becomes fixed cost.",
                     {"hardware.usd_per_gpu_hour": round(price * (1 - P["reserved_discount"]), 4),
                      "hardware.reserved": True}, sources=["reserved_discount"]))
    rate = float(ev("reliability.failures_per_gpu_hour"))
    out.append(Lever("spot", f"Spot capacity ({P['spot_discount']:.0%} below on-demand, "
                             f"{P['spot_interruption_multiplier']}x interruptions)",
                     "Preemptions: more lost work and restarts, and capacity may vanish for days.",
                     {"hardware.usd_per_gpu_hour": round(price * (1 - P["spot_discount"]), 4), "hardware.reserved": False,
                      "reliability.failures_per_gpu_hour": min(0.01, rate * P["spot_interruption_multiplier"])},
                     sources=["spot_discount", "spot_interruption_multiplier"]))
    return out


def _candidates(res: api.Result) -> list[Lever]:
    scn = res.scenario
    out: list[Lever] = []
    ev = lambda p: effective_value(scn, p)  # noqa: E731
    # PEFT instead of full fine-tuning
    ch = {f"stages.{s}.method": "lora" for s in ("sft", "dpo") if s in res.stages and ev(f"stages.{s}.method") == "full"}
    if ch:
        out.append(Lever("lora", "LoRA instead of full fine-tuning in " + _stages_in_words(ch),
                         "Can trail full fine-tuning on hard or knowledge-heavy tasks; check on your evals.", ch))
    # retention: keep last K + milestones
    ch = {}
    for s in _train_stages(res):
        k = ev(f"stages.{s}.keep_last")
        if k == 0 or k > P["keep_last"]:
            ch[f"stages.{s}.keep_last"] = P["keep_last"]
            ch[f"stages.{s}.milestone_every"] = P["milestone_every"]
    if ch:
        out.append(Lever("retention", f"Keep the last {P['keep_last']} checkpoints plus every {P['milestone_every']}th",
                         "Rolling back further than the kept checkpoints means retraining.", ch,
                         sources=["keep_last", "milestone_every"]))
    # cold tier sooner
    if ev("storage.cold_after_days") > P["cold_after_days"]:
        out.append(Lever("cold_tier", f"Move retained checkpoints to the cold tier after {P['cold_after_days']} days",
                         "Slower and billed retrieval when an old checkpoint is needed.",
                         {"storage.cold_after_days": P["cold_after_days"]}, sources=["cold_after_days"]))
    # weights-only for finished stages
    if not ev("storage.finished_weights_only"):
        out.append(Lever("weights_only", "Keep weights only (no optimizer state) once a stage is finished",
                         "A finished stage cannot be resumed exactly, only restarted from its weights.",
                         {"storage.finished_weights_only": True}))
    # checkpoint interval at Young/Daly
    ch = {f"stages.{s}.ckpt_interval_h": 0 for s in _train_stages(res) if ev(f"stages.{s}.ckpt_interval_h") > 0}
    if ch:
        out.append(Lever("young_daly", "Checkpoint at the Young/Daly optimum interval",
                         "More frequent writes load the storage system; fewer give less room to roll back.", ch))
    # higher MFU
    ch = {}
    for s in _train_stages(res):
        cur = res.stat(s, "mfu")
        if cur > 0 and ev(f"stages.{s}.tokens_per_gpu_s") == 0:
            ch[f"stages.{s}.mfu"] = round(min(0.75, cur + P["mfu_gain_points"]), 4)
    if ch:
        out.append(Lever("mfu", f"Raise MFU by {P['mfu_gain_points'] * 100:.0f} points (kernels, parallel layout)",
                         "Engineering time; gains are not guaranteed at every scale.", ch, sources=["mfu_gain_points"]))
    # fewer repeated experiments
    # the experiments' size, not their count: halving a count wrote "experiments=0.5" runs into the link
    ch = {f"stages.{s}.experiment_size": round(ev(f"stages.{s}.experiment_size") * P["experiments_factor"], 4)
          for s in res.stages if ev(f"stages.{s}.experiments") > 0 and ev(f"stages.{s}.experiment_size") > 0}
    if ch:
        out.append(Lever("experiments", "Halve the size of the repeated experiments (smaller proxy runs)",
                         "Less tuning can leave quality on the table or hide a bad setting.", ch,
                         sources=["experiments_factor"]))
    out += _pricing_levers(res)
    # a mixture of experts: let the plan search run DualPipe where it is faster than 1F1B
    if float(ev("model.experts")) > 1:
        ch = {f"stages.{s}.schedule": "search" for s in res.stages if f"stages.{s}.schedule" in schema.BY_PATH
              and ev(f"stages.{s}.schedule") == "auto" and res.uses_layout(s)}
        if ch:
            out.append(Lever("dualpipe", "Let the plan search run DualPipe in " + _stages_in_words(ch),
                "Needs DeepSeek's DualPipe (deepseek-ai/DualPipe) and two copies of each pipeline stage's weights; "
                "the public MoE runs that did not use it ran slower than this predicts (the Validation page).", ch))
    # DPO reference log-probs
    if "dpo" in res.stages and ev("stages.dpo.reference") == "live":
        out.append(Lever("dpo_ref", "Precompute DPO reference log-probs once",
                         "Extra storage for the log-probs; the reference cannot change during training.",
                         {"stages.dpo.reference": "precomputed"}))
    return out


def _media_levers(res: api.Result) -> list[Lever]:
    """Levers of the multimodal phases: fewer pixels, fewer tokens per image, encoder features computed once."""
    scn = res.scenario
    ev = lambda p: effective_value(scn, p)  # noqa: E731
    phases = [s for s in res.stages if s in schema.MM_STAGES]
    if not phases:
        return []
    out: list[Lever] = []
    low = P["lower_resolution_px"]
    if ev("multimodal.modality") != "audio" and ev("multimodal.resolution_px") > low >= ev("multimodal.patch_px"):
        out.append(Lever("lower_resolution", f"Feed the encoder {low} px images instead of {ev('multimodal.resolution_px')} px",
                         "Fewer media tokens lose fine detail: text in images, small objects, charts.",
                         {"multimodal.resolution_px": low}, sources=["lower_resolution_px"]))
    if ev("multimodal.connector") in ("mlp2x", "linear") and not ev("multimodal.tokens_per_item"):
        out.append(Lever("token_compression", "Merge 2 x 2 media tokens into one (pixel shuffle, InternVL 1.5)",
                         "A quarter of the tokens per image: detail is lost and the connector must be retrained.",
                         {"multimodal.connector": "pixel-shuffle"}))
    if not ev("multimodal.precomputed_features") and not any(ev(f"stages.{s}.train_encoder") for s in phases) \
            and any(float(ev(f"stages.{s}.epochs")) > 1 for s in phases):
        out.append(Lever("precomputed_features", "Run the frozen encoder once and store its features",
                         "No image augmentation, features take more storage than the images, and the encoder "
                         "can no longer be trained.", {"multimodal.precomputed_features": True}))
    if ev("multimodal.preprocessing") == "online" and any(res.stat(s, "media_items_per_s_per_node")
                                                          > res.stat(s, "media_loader_items_per_s_per_node") > 0
                                                          for s in phases):
        out.append(Lever("offline_preprocessing", "Decode and resize the media once, before training",
                         "A preprocessing pass and a stored copy of the decoded media to manage, and no fresh "
                         "random crops or frame samples each epoch.", {"multimodal.preprocessing": "offline"}))
    return out


def source_text(lever: Lever) -> str:
    """Where the lever's figures come from (data/levers.yaml), or '' when it uses none."""
    return "; ".join(SOURCES[k] for k in lever.sources)


def apply(scn: dict, lever: Lever) -> dict:
    """The scenario with the lever's changes (validated)."""
    for path, v in lever.changes.items():
        scn = set_path(scn, path, v)
    return schema.validate(scn)


def levers(scenario) -> list[Lever]:
    """Every applicable lever with its saving, sorted by saving (largest first)."""
    res = api.estimate(scenario)
    out = []
    for lv in _candidates(res) + _media_levers(res):
        new = api.estimate(apply(res.scenario, lv))
        lv.new_total_usd = new.total_usd
        lv.saving_usd = res.total_usd - new.total_usd
        if lv.saving_usd > 0.005:  # a lever that saves nothing here is not offered
            out.append(lv)
    out.sort(key=lambda lv: -lv.saving_usd)
    return out

