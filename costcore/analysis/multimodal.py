"""The multimodal page's tables and sweeps (issue 17), all from the kernel's numbers.

:func:`phase_table`: one row per multimodal phase (what it trains, media items, tokens, GPU-hours,
dollars, memory per GPU, fit). :func:`media_table`: the preprocessing, storage, transfer, licence
and caption lines of each phase. :func:`sweep`: the phases' cost and GPU-hours as one media input
moves (tokens per item, resolution, items per sample), in one batch call of the kernel. Nothing
here re-derives a number: every figure is a stat or line item of ``api.estimate`` / ``api.batch``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from costcore import api
from costcore.engine.kernel import LINE_ITEMS
from costcore.errors import ScenarioError
from costcore.scenario import schema
from costcore.scenario.schema import MEDIA_WORDS, MM_STAGES, STAGE_LABELS, STAGES  # noqa: F401 (MEDIA_WORDS: the page's)

TRAIN_WORDS = {"connector": "connector", "llm": "language model", "encoder": "encoder"}
MEDIA_ITEMS = ("compute.media_preprocessing", "storage.media", "network.media", "data.media_license",
               "data.captioning")
ITEM_WORDS = {key: label for key, _, _, label in LINE_ITEMS}


def phases(res: api.Result) -> list[str]:
    """The multimodal phases the scenario runs, in plan order."""
    return [s for s in res.stages if s in MM_STAGES]


def trained_words(scn: dict, stage: str) -> str:
    """What a phase trains, in words ("connector + language model (LoRA)")."""
    ev = schema.effective_value
    parts = [w for p, w in TRAIN_WORDS.items() if ev(scn, f"stages.{stage}.train_{p}")]
    method = ev(scn, f"stages.{stage}.method")
    if ev(scn, f"stages.{stage}.train_llm") and method != "full":
        parts[parts.index("language model")] = f"language model ({'QLoRA' if method == 'qlora' else 'LoRA'})"
    return " + ".join(parts)


def phase_table(res: api.Result) -> pd.DataFrame:
    """One row per phase: trained parts, media items, tokens per item, LLM tokens, GPU-hours, $, memory."""
    rows = []
    for s in phases(res):
        rows.append({"phase": STAGE_LABELS[s], "trains": trained_words(res.scenario, s),
                     "media_items": res.stat(s, "media_items"), "tokens_per_item": res.stat(s, "media_tokens_per_item"),
                     "media_share": res.stat(s, "media_token_share"), "llm_tokens": res.stat(s, "tokens"),
                     "gpu_hours": res.stat(s, "gpu_hours"), "encoder_gpu_hours": res.stat(s, "encoder_gpu_hours"),
                     "wall_days": res.stat(s, "wall_days"),
                     # the billed GPU-hours' dollars (gpu_hours x price): the productive GPU time and the hidden
                     # losses (failures, stalls, idle GPUs); compute.gpu alone was the productive part
                     "compute_usd": res.item_usd(s, "compute.gpu") + res.stage_usd(s)["hidden"],
                     "total_usd": res.stat(s, "usd_total"), "memory_gb": res.stat(s, "memory_per_gpu_gb"),
                     "fits": "yes" if res.stat(s, "fits") > 0.5 else "no"})
    return pd.DataFrame(rows)


def media_table(res: api.Result) -> pd.DataFrame:
    """One row per (phase, media line item): its dollars, with the CPU-hours and GB it bills."""
    rows = []
    for s in phases(res):
        i = STAGES.index(s)
        for n, (key, _, _, label) in enumerate(LINE_ITEMS):
            if key not in MEDIA_ITEMS:
                continue
            amount = {"compute.media_preprocessing": res.stat(s, "preprocess_cpu_hours"),
                      "storage.media": res.stat(s, "media_raw_gb") + res.stat(s, "media_features_gb"),
                      "network.media": res.stat(s, "media_raw_gb")}.get(key, res.stat(s, "media_items"))
            unit = {"compute.media_preprocessing": "CPU-hours", "storage.media": "GB stored",
                    "network.media": "GB moved per transfer"}.get(key, "items")
            rows.append({"phase": STAGE_LABELS[s], "line": label, "amount": amount, "unit": unit,
                         "usd": float(res.items[i, n])})
    return pd.DataFrame(rows)


def loader_table(res: api.Result) -> pd.DataFrame:
    """Phases whose media the data loader decodes online (multimodal.preprocessing): the items per second
    per node the loader delivers and the GPUs take, and the stall (GPU-hours and $) when they take more."""
    rows = []
    for s in phases(res):
        deliver = res.stat(s, "media_loader_items_per_s_per_node")
        if deliver > 0:
            rows.append({"phase": STAGE_LABELS[s], "delivered": deliver,
                         "taken": res.stat(s, "media_items_per_s_per_node"),
                         "stall_gpu_hours": res.stat(s, "data_stall_gpu_hours"),
                         "stall_usd": res.item_usd(s, "hidden.data_stalls")})
    return pd.DataFrame(rows, columns=["phase", "delivered", "taken", "stall_gpu_hours", "stall_usd"])


SWEEPS = {"tokens_per_item": "multimodal.tokens_per_item", "resolution_px": "multimodal.resolution_px",
          "tiles_per_item": "multimodal.tiles_per_item"}


COMPUTE = schema.RESOURCES.index("compute")


def sweep(res: api.Result, what: str, values) -> pd.DataFrame:
    """Cost of each multimodal phase of ``res`` (an estimate) as one media input takes ``values`` (one batch call).

    ``what``: tokens_per_item (media tokens in the LLM's sequence), resolution_px (the encoder's
    input side: its tokens, and the LLM's unless tokens per item are given) or tiles_per_item.
    Values the scenario's rules refuse (more tokens than the sequence holds, a resolution the
    encoder cannot take) are left out and listed in the frame's ``attrs["left_out"]``. Returns value,
    phase, usd (all its resources), compute_usd (the compute resource: GPUs and media preprocessing), gpu_hours,
    and compute_ratio / gpu_hours_ratio: those two over the phase's own as the scenario stands (1 = as set), so
    phases whose costs differ by orders of magnitude show their slopes on one linear axis.
    """
    if what not in SWEEPS:
        raise ScenarioError("sweep", "must be one of " + ", ".join(SWEEPS))
    path = SWEEPS[what]
    ok, left_out = [], []
    for v in values:
        try:
            schema.validate_change(res.scenario, path, v)
            ok.append(float(v))
        except ScenarioError:
            left_out.append(float(v))
    if not ok:
        empty = pd.DataFrame(columns=["value", "phase", "usd", "compute_usd", "gpu_hours", "compute_ratio",
                                      "gpu_hours_ratio"])
        empty.attrs["left_out"] = left_out
        return empty
    cols = {path: np.array(ok)}
    if what == "resolution_px" and not schema.get_path(res.scenario, "multimodal.tokens_per_item"):
        cols["multimodal.tokens_per_item"] = np.zeros(len(ok))  # derived from the resolution
    out = api.batch(res.scenario, cols, full=True)
    gpu_h = len(schema.RESOURCES)
    rows = []
    for s in phases(res):
        i = STAGES.index(s)
        now_usd, now_h = res.stage_usd(s)["compute"], res.stat(s, "gpu_hours")
        for j, v in enumerate(ok):
            usd, h = float(out[j, i, COMPUTE]), float(out[j, i, gpu_h])
            rows.append({"value": v, "phase": STAGE_LABELS[s], "usd": float(out[j, i, :gpu_h].sum()),
                         "compute_usd": usd, "gpu_hours": h, "compute_ratio": usd / now_usd if now_usd > 0 else 1.0,
                         "gpu_hours_ratio": h / now_h if now_h > 0 else 1.0})
    df = pd.DataFrame(rows)
    df.attrs["left_out"] = left_out
    return df
