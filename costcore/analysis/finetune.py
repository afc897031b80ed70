"""Fine-tuning methods side by side: the same model, data and GPUs trained several ways.

:func:`compare_methods` evaluates one scenario once per method of ``data/finetune_methods.yaml``
(full, LoRA, QLoRA, LoRA on an 8-bit base, full with 8-bit AdamW, full with the optimizer on the
CPU); each method sets only its own few stage settings on top of the user's (rank, optimizer,
micro-batch, GPUs, data stay). Every number in a row is the kernel's (``api.estimate``); nothing
is re-derived here. The rows carry what a researcher compares first: tokens per second per GPU,
time per epoch, GPU-hours, compute dollars apart from data and people, memory per GPU by kind
against the usable capacity, the fewest GPUs that fit, and each method's quality caveat with its
source. The fewest GPUs come twice: ``min_gpus`` with the stage's layout as pinned (a pinned TP 8 makes
it a multiple of 8) and ``min_gpus_any_layout`` over every layout the search can take
(:func:`costcore.scenario.schema.without_layout_pins`; ``pinned_layout`` names what was pinned).
"""
from __future__ import annotations

import functools
from pathlib import Path

import yaml

from costcore import api, fmt
from costcore.errors import ScenarioError
from costcore.scenario import schema

DATA = Path(__file__).resolve().parent.parent / "data" / "finetune_methods.yaml"
MEMORY_KINDS = ("weights", "gradients", "optimizer", "activations", "buffers")
MEMORY_WORDS = {"weights": "Weights", "gradients": "Gradients", "optimizer": "Optimizer states",
                "activations": "Activations", "buffers": "Buffers"}


@functools.lru_cache(maxsize=1)
def _methods() -> dict:
    with open(DATA, encoding="utf-8") as fh:
        return yaml.safe_load(fh)["methods"]


def methods() -> dict[str, dict]:
    """name -> {label, settings, caveat, source} (a fresh copy)."""
    return {k: {"label": v["label"], "settings": dict(v["settings"]), "caveat": " ".join(v["caveat"].split()),
                "source": v["source"]} for k, v in _methods().items()}


DEFAULT_METHODS = ("full", "lora", "qlora")


def method_scenario(scn: dict, method: str, stage: str = "sft") -> dict:
    """``scn`` with the stage trained by ``method``: its settings over the user's, made consistent.

    A full fine-tune trains 16-bit weights (base bits back to 16); QLoRA's base is 4-bit; CPU
    offload of the optimizer needs ZeRO-2 or more (a pinned lower stage is unpinned).
    """
    spec = methods()[method]["settings"]
    sdata = dict((scn.get("stages") or {}).get(stage) or {})
    sdata.update(spec)
    if sdata.get("method") == "full":
        sdata["base_bits"] = 16
    elif sdata.get("method") == "qlora" and sdata.get("base_bits") == 8:
        sdata["base_bits"] = 4
    if sdata.get("offload", "none") != "none" and 0 <= sdata.get("zero_stage", -1) < 2:
        sdata.pop("zero_stage")
    return schema.validate(dict(scn, stages=dict(scn.get("stages") or {}, **{stage: sdata})))


def _row(res: api.Result, stage: str) -> dict:
    """One method's row from its result: the stage's stats, money by resource and fine-tuning view
    (not Result.to_dict, which would build every stage, its plan and the budget for a few numbers)."""
    view = res.fine_tuning_view(stage)
    usd = res.stage_usd(stage)
    row = {k: res.stat(stage, k) for k in ("gpu_hours", "wall_days", "usd_total", "memory_per_gpu_gb",
                                           "usable_memory_gb", "trainable_params_b")}
    row.update(tokens_per_s_per_gpu=view["tokens_per_s_per_gpu"], epoch_hours=view["epoch_hours"],
               compute_usd=usd["compute"] + usd["hidden"], data_usd=usd["data"],
               people_usd=usd["labor"] + usd["ops"], other_usd=usd["storage"] + usd["network"],
               fits=res.stat(stage, "fits") > 0.5, min_gpus=int(res.stat(stage, "min_gpus")),
               num_gpus=int(res.stat(stage, "num_gpus")), optimizer_paged_out_gb=view["optimizer_paged_out_gb"],
               checkpoint_gb=res.stat(stage, "ckpt_gb"), layout=fmt.plan_words(res.plan(stage)))
    row.update({f"memory_{k}_gb": view["memory_breakdown_gb"][k] for k in MEMORY_KINDS})
    return row


def compare_methods(scn: dict, names=DEFAULT_METHODS, stage: str = "sft") -> list[dict]:
    """One row per method: its label, caveat, source and the kernel's numbers (see the module doc).

    ``scn`` is a validated scenario; a stage it lacks is evaluated with default settings.
    Raises :class:`ScenarioError` for an unknown method name.
    """
    known = methods()
    rows = []
    for name in names:
        if name not in known:
            raise ScenarioError("method", f"unknown fine-tuning method {name!r}; allowed: " + ", ".join(known))
        method_scn = method_scenario(scn, name, stage)
        res = api.estimate(method_scn)
        row = _row(res, stage)
        # the fewest GPUs over every layout: a pinned TP 8 would make a 70B QLoRA's minimum 8, not 1
        pins = schema.pinned_layout(method_scn, stage)
        row["min_gpus_any_layout"] = int(res.fewest_gpus_any_layout(stage))
        label, caveat = known[name]["label"], known[name]["caveat"]
        bits = int(schema.effective_value(method_scn, f"stages.{stage}.base_bits"))
        if "16-bit base" in caveat and bits != 16:  # the plan's LoRA on a 4-bit base is QLoRA's row under LoRA's name
            label = f"{label} ({bits}-bit base)"
            caveat = caveat.replace("a frozen 16-bit base", f"a frozen {bits}-bit base (the plan's base precision, "
                                                            f"with the quantized base's costs in quality and speed)")
        rows.append(dict(name=name, label=label, caveat=caveat, source=known[name]["source"], pinned_layout=pins,
                         base_bits=bits, **row))
    return rows
