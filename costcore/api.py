"""Public Python API: load a scenario, estimate it, evaluate many variants."""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from costcore.scenario import checks
from costcore.engine import kernel
from costcore.scenario import schema
from costcore.scenario.loaders import Scenario
from costcore.engine import layout
from costcore.engine.kernel import (K_CKPT_GB, K_DEC_B, K_DEC_TP, K_ROLLOUT_H, K_ENABLED, K_FITS, K_GPU_H, K_GPUS, K_MEM_GB,
                     K_MIN_GPUS, K_PROD_H, K_USD, K_WALL_D, LINE_ITEMS, STATS)
from costcore.scenario.schema import BY_PATH, CATALOG, CATALOG_KEYS, IX, MM_STAGES, RESOURCES, STAGES, ScenarioError
from costcore.scenario.loaders import (PRESET_DIR, load_preset, load_scenario, load_yaml_text, preset_names,  # noqa: F401
                      preset_titles)

TRAINING_STAGES = ("pretrain", "cpt", "mm_align", "mm_cpt", "mm_tune", "sft", "dpo", "rl")
RECOMPUTE_WORDS = ("none", "selective", "full")
# Keys of a plan as the JSON and `costcore plan` print it (issue contract), then the breakdown.
PLAN_KEYS = ("tp", "pp", "dp", "cp", "ep", "micro_batch", "recompute", "zero", "interleave", "sequence_parallel",
             "schedule", "step_time_s", "mfu", "memory_per_gpu_gb")


def calibration() -> dict:
    """costcore/data/calibration.yaml (the out-of-sample band), read once."""
    global _CAL
    if _CAL is None:
        import yaml
        with open(Path(__file__).resolve().parent / "data" / "calibration.yaml", encoding="utf-8") as fh:
            _CAL = yaml.safe_load(fh)
    return _CAL


def stage_band(stage: str | None = None) -> dict:
    """A stage's out-of-sample band in calibration.yaml (``band_log_p10``, ``band_log_p90``, ``mfu_log_sigma``):
    its family's (``stage_bands``: post-training, multimodal), else the pre-training runs' leave-one-out one
    (pre-training, CPT, or ``stage`` None)."""
    cal = calibration()
    for band in (cal.get("stage_bands") or {}).values():
        if stage in band["stages"]:
            return band
    return cal


_CAL = None


def plan_dict(row: np.ndarray, sustained: float) -> dict[str, Any]:
    """One evaluated plan row (layout.PLAN_FIELDS + TERM_FIELDS) as the JSON prints it.

    ``mfu`` is the MFU the stage's hours use: the plan's benchmark MFU x efficiency.sustained_fraction
    (``benchmark_mfu`` is the plan's own).
    """
    g = dict(zip(layout.PLAN_FIELDS + layout.TERM_FIELDS, (float(v) for v in row)))
    out = {k: int(round(g[k])) for k in ("tp", "pp", "dp", "cp", "ep", "micro_batch", "zero", "interleave")}
    out["recompute"] = RECOMPUTE_WORDS[int(round(g["recompute"]))]
    out["sequence_parallel"] = bool(g["sp"] > 0.5)
    out["schedule"] = "dualpipe" if g["dualpipe"] > 0.5 and g["pp"] > 1.5 else "1f1b"
    out["step_time_s"] = g["step_time_s"]
    out["mfu"] = g["mfu"] * sustained
    out["benchmark_mfu"] = g["mfu"]
    out["memory_per_gpu_gb"] = g["mem_total"] / 1e9
    out["memory_gb"] = {k: g["mem_" + k] / 1e9 for k in ("weights", "grads", "optimizer", "activations", "buffers")}
    out["time_s"] = {k: g[k + "_s"] for k in ("compute", "communication", "bubble", "recompute", "optimizer")}
    # of the compute: a quantized base's dequantization and the LoRA adapters, seconds per step
    out["compute_s"] = {"dequantization": g["dequant_s"], "adapters": g["adapter_s"]}
    # communication by collective (tp, dp, zero, cp, ep, p2p), exposed seconds per step
    out["communication_s"] = {k: g[k + ("_s" if k == "p2p" else "_comm_s")] for k in ("tp", "dp", "zero", "cp", "ep", "p2p")}
    out["micro_batches"] = int(round(g["micro_batches"]))
    out["gpus_used"] = int(round(g["gpus_used"]))
    out["fits"] = bool(g["fits"] > 0.5)
    return out


@dataclass
class Result:
    """The estimate of one scenario: line items ($) and per-stage statistics."""
    scenario: dict
    vector: np.ndarray
    items: np.ndarray  # (stages, line items) in $
    stats: np.ndarray  # (stages, STATS)

    @property
    def stages(self) -> list[str]:
        return [s for i, s in enumerate(STAGES) if self.stats[i, K_ENABLED] > 0.5]

    def stat(self, stage: str, name: str) -> float:
        return float(self.stats[STAGES.index(stage), STATS.index(name)])

    @property
    def total_usd(self) -> float:
        return float(self.stats[:, K_USD].sum())

    @property
    def fixed_items(self) -> np.ndarray:
        """(items,) 1.0 for the line items that are fixed cost: kernel.item_fixed (GPU time too on reserved GPUs)."""
        return kernel.item_fixed(bool(self.vector[IX["hardware.reserved"]] > 0.5))

    @property
    def fixed_usd(self) -> float:
        return float((self.items * self.fixed_items).sum())

    @property
    def elastic_usd(self) -> float:
        return self.total_usd - self.fixed_usd

    @property
    def fixed_share(self) -> float:
        """Fixed cost over the total, a fraction (0 when the total is 0)."""
        total = self.total_usd
        return self.fixed_usd / total if total > 0 else 0.0

    def share_of_total(self, usd):
        """``usd`` (a number or an array of dollars) over this scenario's total, a fraction; 0 when the total
        is 0. The one place a page's "share of the total" is divided (line items, stages, savings)."""
        total = self.total_usd
        return usd / total if total > 0 else usd * 0.0

    @property
    def gpu_hours(self) -> float:
        return float(self.stats[:, K_GPU_H].sum())

    @property
    def peak_gpus(self) -> int:
        """Most GPUs held at once: stages in sequence, overlapping as schedule.<stage>_overlap says."""
        from costcore.analysis.budget import concurrent_peak_gpus
        return int(round(concurrent_peak_gpus(self))) if self.stages else 0

    @cached_property
    def infeasible(self) -> list[str]:
        """Sentences for stages that do not fit in GPU memory on their GPUs (empty: the plan is feasible)."""
        from costcore.engine.feasibility import infeasible
        return infeasible(self, self.fewest_gpus_any_layout)

    def fewest_gpus_any_layout(self, stage: str) -> float:
        """The fewest GPUs on which ``stage`` fits over every parallel layout (its pinned degrees, micro-batch
        and interleaving unpinned: schema.without_layout_pins); its ``min_gpus`` when nothing is pinned."""
        if not schema.pinned_layout(self.scenario, stage):
            return self.stat(stage, "min_gpus")
        return estimate(schema.without_layout_pins(self.scenario, stage)).stat(stage, "min_gpus")

    @property
    def feasible(self) -> bool:
        return not self.infeasible

    @cached_property
    def warnings(self) -> list[str]:
        """Plain sentences about a feasible but doubtful plan: GPUs the global batch cannot use, FP8 without
        FP8 hardware (engine.feasibility), checkpoint stalls and dominant rollouts (analysis.warnings)."""
        from costcore.analysis.warnings import planning_warnings
        from costcore.engine.feasibility import batch_warnings
        return batch_warnings(self) + planning_warnings(self)

    def uses_layout(self, stage: str) -> bool:
        """True when the stage's speed comes from its job layout (no MFU or throughput given)."""
        return stage in TRAINING_STAGES and schema.uses_default_mfu(self.scenario, stage)

    @cached_property
    def band(self) -> np.ndarray:
        """(stages, 4): P10 and P90 GPU-hours, P10 and P90 $ per stage (costcore.engine.kernel.error_band)."""
        bands = [stage_band(s) for s in STAGES]
        mask = np.array([self.stats[i, K_ENABLED] > 0.5 and self.uses_layout(s) for i, s in enumerate(STAGES)])
        return kernel.error_band(self.stats, np.array([float(b["band_log_p10"]) for b in bands]),
                                 np.array([float(b["band_log_p90"]) for b in bands]), mask)

    def plan(self, stage: str) -> dict[str, Any]:
        """The stage's chosen job layout (plan_dict keys); its MFU is the one the stage's hours use."""
        i = STAGES.index(stage)
        st = self.stats[i]
        row = np.zeros(layout.NROW)
        for col, r, div in zip(kernel.PLAN_STAT_COL, kernel.PLAN_STAT_ROW, kernel.PLAN_STAT_DIV):
            row[r] = st[col] * div
        row[(layout.PLAN_FIELDS + layout.TERM_FIELDS).index("fits")] = st[K_FITS]  # the stage's, rollouts included
        out = plan_dict(row, 1.0)
        out["mfu"] = float(st[STATS.index("mfu")])
        out["plans_fitting"] = int(st[STATS.index("plans_fitting")])
        return out

    @property
    def total_usd_p10(self) -> float:
        return float(self.band[:, 2].sum())

    @property
    def total_usd_p90(self) -> float:
        return float(self.band[:, 3].sum())

    def resource_matrix(self) -> np.ndarray:
        """(stages, resources) in $."""
        m = np.zeros((len(STAGES), len(RESOURCES)))
        for i, (_, res, _, _) in enumerate(LINE_ITEMS):
            m[:, RESOURCES.index(res)] += self.items[:, i]
        return m

    def stage_usd(self, stage: str) -> dict[str, float]:
        row = self.resource_matrix()[STAGES.index(stage)]
        return {r: float(v) for r, v in zip(RESOURCES, row)}

    def item_usd(self, stage: str, *items: str) -> float:
        """Dollars of one or more line items of a stage (keys as in ``line_items``, e.g. "storage.ckpt_hot")."""
        keys = [k for k, _, _, _ in LINE_ITEMS]
        return float(sum(self.items[STAGES.index(stage), keys.index(k)] for k in items))

    def fine_tuning_view(self, stage: str) -> dict[str, Any]:
        """What a fine-tuner compares first, for one training stage (issue 15's JSON contract).

        ``memory_breakdown_gb``: the stage's plan memory per GPU by kind (weights, gradients,
        optimizer states, activations, buffers; optimizer states paged to the CPU are not on the
        GPU). They sum to ``memory_per_gpu_gb``. In RL that figure is the larger of the training
        plan and a rollout replica; when the replica is larger, the breakdown is the replica's: its
        BF16 weights, and its KV cache as activations. ``tokens_per_s_per_gpu``: trained tokens per second
        per GPU as the stage sustains them (data-pipeline stalls included); ``epoch_hours``:
        wall-clock hours of one pass over the stage's data at that rate (failures, checkpoint
        stalls and repeated experiments not included).
        """
        st = self.stats[STAGES.index(stage)]

        def k(name):
            return float(st[STATS.index(name)])
        kinds = {"weights": k("mem_weights_gb"), "gradients": k("mem_grads_gb"), "optimizer": k("mem_optimizer_gb"),
                 "activations": k("mem_activations_gb"), "buffers": k("mem_buffers_gb")}
        rollout = k("rollout_weights_gb") + k("rollout_kv_gb")
        if stage == "rl" and rollout > sum(kinds.values()):
            kinds = {"weights": k("rollout_weights_gb"), "gradients": 0.0, "optimizer": 0.0,
                     "activations": k("rollout_kv_gb"), "buffers": 0.0}
        return {"memory_breakdown_gb": kinds,
                "optimizer_paged_out_gb": k("mem_paged_gb"),
                "tokens_per_s_per_gpu": k("tokens_per_s_per_gpu"), "epoch_hours": k("epoch_hours"),
                "data_stall_gpu_hours": k("data_stall_gpu_hours")}

    def multimodal_view(self, stage: str) -> dict[str, Any]:
        """A multimodal phase's media figures (issue 17's JSON contract), from the kernel's stats.

        ``media_items``: images, clips or recordings the phase encodes (samples x share with media x
        items per sample); ``media_tokens_per_item``: tokens each adds to the LLM's sequence;
        ``media_token_share``: media tokens' share of the LLM's tokens; ``encoder_gpu_hours``: the
        productive GPU-hours of the encoder and connector; ``preprocess_cpu_hours``: decoding,
        resizing and sharding (every epoch when online); ``media_raw_gb`` / ``media_features_gb``: raw media
        and precomputed encoder features stored; ``connector_params`` / ``encoder_params``: counts;
        ``media_items_per_s_per_node`` / ``media_loader_items_per_s_per_node``: with online preprocessing,
        the items a node's GPUs take and its loader decodes per second (0 otherwise). An evaluation that
        scores media (stages.eval.media_items_k) carries the same keys: its items, their tokens, the
        encoder's GPU-hours (no preprocessing or storage is billed for benchmark media).
        """
        st = self.stats[STAGES.index(stage)]
        keys = ("media_items", "media_tokens_per_item", "encoder_passes_per_item", "media_token_share",
                "encoder_gpu_hours", "preprocess_cpu_hours", "media_raw_gb", "media_features_gb",
                "connector_params", "encoder_params", "media_items_per_s_per_node",
                "media_loader_items_per_s_per_node")
        return {k: float(st[STATS.index(k)]) for k in keys}

    def to_dict(self) -> dict[str, Any]:
        m = self.resource_matrix()
        stages = {}
        for s in self.stages:
            i = STAGES.index(s)
            st = self.stats[i]
            stages[s] = {
                "gpu_hours": float(st[K_GPU_H]),
                "productive_gpu_hours": float(st[K_PROD_H]),
                "wall_days": float(st[K_WALL_D]),
                "num_gpus": int(st[K_GPUS]),
                "usd": {r: float(m[i, j]) for j, r in enumerate(RESOURCES)},
                "usd_total": float(st[K_USD]),
                "fixed_usd": float((self.items[i] * self.fixed_items).sum()),
                "memory_per_gpu_gb": float(st[K_MEM_GB]),
                "fits": bool(st[K_FITS] > 0.5),
                "min_gpus": int(st[K_MIN_GPUS]),
                "checkpoint_gb": float(st[K_CKPT_GB]),
                "gpu_hours_p10": float(self.band[i, 0]),
                "gpu_hours_p90": float(self.band[i, 1]),
                "usd_p10": float(self.band[i, 2]),
                "usd_p90": float(self.band[i, 3]),
            }
            stages[s]["line_items"] = {key: float(self.items[i, n]) for n, (key, _, _, _) in enumerate(LINE_ITEMS)
                                       if self.items[i, n] != 0.0}
            if s in TRAINING_STAGES:
                stages[s]["plan"] = self.plan(s)
                stages[s].update(self.fine_tuning_view(s))
            if s in MM_STAGES or (s == "eval" and st[STATS.index("media_items")] > 0.0):  # a multimodal benchmark
                stages[s]["multimodal"] = self.multimodal_view(s)
            if s in ("rl", "eval"):  # the decoding replica: its GPUs and the sequences it generates at once
                stages[s]["decode"] = {"replica_gpus": int(st[K_DEC_TP]), "sequences_at_once": int(st[K_DEC_B]),
                                       "rollout_gpu_hours": float(st[K_ROLLOUT_H])}
        out = {
            "name": self.scenario.get("name", ""),
            "feasible": self.feasible,
            "infeasible": self.infeasible,
            "warnings": self.warnings,
            "total_usd": self.total_usd,
            "total_usd_p10": self.total_usd_p10,
            "total_usd_p90": self.total_usd_p90,
            "gpu_hours_p10": float(self.band[:, 0].sum()),
            "gpu_hours_p90": float(self.band[:, 1].sum()),
            "fixed_usd": self.fixed_usd,
            "elastic_usd": self.elastic_usd,
            "gpu_hours": self.gpu_hours,
            "peak_gpus": self.peak_gpus,
            "stages": stages,
            "resources": {r: float(m[:, j].sum()) for j, r in enumerate(RESOURCES)},
        }
        from costcore.analysis.budget import budget_status, lifecycle
        status = budget_status(self)
        if status is not None:
            out["budget"] = status
        life = lifecycle(self)
        if life.iterations > 1:
            out["lifecycle"] = {"iterations": life.iterations, "every_months": life.every_months,
                                "stages": life.stages, "per_iteration_usd": life.per_iteration_usd,
                                "total_usd": life.total_usd}
        _assert_finite(out)
        return out

    def line_items(self) -> pd.DataFrame:
        """One row per (enabled stage, line item): stage, resource, item (keys, for joins), stage_name,
        resource_name, label (the same in words, as the app shows them), kind, usd."""
        rows = []
        fixed_items = self.fixed_items
        for s in self.stages:
            i = STAGES.index(s)
            for j, (key, res, _, label) in enumerate(LINE_ITEMS):
                rows.append({"stage": s, "resource": res, "item": key, "stage_name": schema.STAGE_LABELS[s],
                             "resource_name": schema.RESOURCE_LABELS[res], "label": label,
                             "kind": "fixed" if fixed_items[j] > 0.5 else "elastic", "usd": float(self.items[i, j])})
        return pd.DataFrame(rows, columns=["stage", "resource", "item", "stage_name", "resource_name", "label", "kind",
                                           "usd"])

    def stage_table(self) -> pd.DataFrame:
        m = self.resource_matrix()
        rows = []
        for s in self.stages:
            i = STAGES.index(s)
            row = {"stage": s}
            row.update({r: float(m[i, j]) for j, r in enumerate(RESOURCES)})
            row["total"] = float(self.stats[i, K_USD])
            row["gpu_hours"] = float(self.stats[i, K_GPU_H])
            row["wall_days"] = float(self.stats[i, K_WALL_D])
            rows.append(row)
        return pd.DataFrame(rows)


def _assert_finite(obj) -> None:
    if isinstance(obj, dict):
        for v in obj.values():
            _assert_finite(v)
    elif isinstance(obj, float) and not math.isfinite(obj):
        raise ArithmeticError("the core produced a non-finite number; please report the scenario")


def estimate(scenario: "Scenario | Mapping | str | Path") -> Result:
    """Estimate every enabled stage of a scenario (a :class:`Scenario`, mapping, YAML path or preset name).

    A :class:`Scenario` is used as it is (validated once when it was made); anything else is
    loaded and validated first. ``Result.scenario`` is the validated mapping (read it, do not
    change it: ``schema.set_path`` and ``Scenario.with_value`` make changed copies).
    """
    if isinstance(scenario, Scenario):
        items, stats = kernel.evaluate_vector(scenario.vector)
        return Result(scenario=scenario.data, vector=scenario.vector, items=items, stats=stats)
    scn = load_scenario(scenario)
    x = schema.to_vector(scn)
    items, stats = kernel.evaluate_vector(x)
    return Result(scenario=scn, vector=x, items=items, stats=stats)


def plans(scenario: "Scenario | Mapping | str | Path", stage: str | None = None, top: int = 10) -> list[dict]:
    """The ``top`` fastest plans of a training stage that fit in memory, best first (plan_dict each).

    ``stage`` defaults to the first enabled training stage. Pinned plan fields in the scenario stay
    pinned; the rest is searched (costcore.engine.layout.search). Raises ScenarioError for a stage
    that is not a training stage of the scenario or a ``top`` outside 1-1000.
    """
    scn = Scenario.of(scenario)
    enabled = [s for s in TRAINING_STAGES if s in scn.data.get("stages", {})]
    if stage is None:
        if not enabled:
            raise ScenarioError("stage", "the scenario has no training stage (pretrain, cpt, sft, dpo or rl)")
        stage = enabled[0]
    if stage not in enabled:
        raise ScenarioError("stage", f"must be one of the scenario's training stages: {', '.join(enabled) or 'none'}",
                            value=stage, allowed=", ".join(enabled))
    if not checks.is_integer(top) or not 1 <= int(top) <= 1000:
        raise ScenarioError("top", "must be a whole number from 1 to 1,000", value=top, allowed="1 to 1,000")
    rows, _ = kernel.stage_plans(scn.vector, STAGES.index(stage), int(top))
    sustained = float(scn.vector[IX["efficiency.sustained_fraction"]])
    if not schema.uses_default_mfu(scn.data, stage):
        sustained = 1.0
    return [plan_dict(r, sustained) for r in rows]


# ---------------------------------------------------------------------------
# Variants of one scenario
# ---------------------------------------------------------------------------
MAX_BATCH_ROWS = 5_000_000  # the same cap as monte_carlo's samples: ~2 s and ~1 GB of output at most


def _check_rows(path: str, values) -> None:
    """Refuse more than MAX_BATCH_ROWS values before anything is converted or allocated."""
    if isinstance(values, np.ndarray):
        n = values.shape[0] if values.ndim else 1
    elif hasattr(values, "__len__"):
        try:
            n = len(values)
        except Exception:  # noqa: BLE001 - a foreign __len__ may raise anything
            raise ScenarioError(path, "needs a list or array of values (its length cannot be read)") from None
    else:
        return
    if n > MAX_BATCH_ROWS:
        raise ScenarioError(path, f"has {n:,} values; a batch has at most {MAX_BATCH_ROWS:,}")


def values_list(path: str, values, what: str) -> list:
    """A list of at most MAX_BATCH_ROWS + 1 items of a foreign iterable (a generator may be endless)."""
    import itertools
    _check_rows(path, values)
    try:
        return list(itertools.islice(iter(values), MAX_BATCH_ROWS + 1))
    except Exception:  # noqa: BLE001 - the iterable's own __iter__/__next__ run here
        raise ScenarioError(path, f"needs a list of values, each {what}") from None


def _numeric_column(path: str, values, booleans: bool = False) -> np.ndarray:
    """One column of a batch as float64: a flat sequence of real numbers, or ScenarioError.

    ``booleans``: the column of a true/false setting, where True/False (and 0/1) are the values.
    """
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__") and not hasattr(values, "__iter__"):
        raise ScenarioError(path, "needs a list or array of values")
    _check_rows(path, values)
    try:
        arr = np.asarray(values)
    except Exception:  # noqa: BLE001 - numpy runs the container's own __len__/__iter__/__array__ here
        raise ScenarioError(path, "needs a flat list of numbers") from None
    if arr.ndim != 1:
        raise ScenarioError(path, f"needs a flat list of numbers (got an array of shape {arr.shape})")
    if booleans and (arr.dtype.kind == "b" or arr.dtype.kind == "O" and all(
            isinstance(v, (bool, np.bool_)) for v in arr)):
        return arr.astype(np.float64)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf" and not (
            arr.dtype.kind == "O" and all(checks._is_real(v) for v in arr)):
        raise ScenarioError(path, "needs numbers only")
    try:  # a float64 array (a row of the Monte Carlo's matrix) is read as it is, not copied
        return np.asarray(arr, dtype=np.float64)
    except Exception:  # noqa: BLE001 - an object column converts through each value's own __float__
        raise ScenarioError(path, "needs numbers only") from None


def _expand_columns(columns: Mapping[str, Any]) -> tuple[list[int], list[np.ndarray]]:
    """Turn {path: values} into vector indices and float columns (GPU names expand to specs)."""
    if not isinstance(columns, Mapping):
        raise ScenarioError("columns", f"must be a mapping of setting to values (got {type(columns).__name__})")
    try:  # a dict subclass is read with dict's own methods; another mapping's may raise anything
        items = list(dict.items(columns)) if isinstance(columns, dict) else list(columns.items())
    except Exception:  # noqa: BLE001
        raise ScenarioError("columns", "could not be read as a mapping of setting to values") from None
    idx, cols = [], []
    n = None
    for path, values in items:
        if not isinstance(path, str) or path not in BY_PATH or BY_PATH[path].index < 0:
            shown = schema._key(path)
            raise ScenarioError(shown if isinstance(path, str) else "columns", f"unknown setting {shown}")
        f = BY_PATH[path]
        if f.kind not in ("float", "int", "enum", "bool"):
            raise ScenarioError(path, "is text and cannot be varied in a batch")
        if f.kind == "enum":
            if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
                raise ScenarioError(path, f"needs a list of values, each {f.allowed()}")
            codes = []
            for v in values_list(path, values, f.allowed()):
                if isinstance(v, str) and v in f.choices:
                    codes.append(float(f.choices.index(v)))
                elif checks.is_integer(v) and 0 <= v < len(f.choices):
                    codes.append(float(v))
                else:
                    raise ScenarioError(path, f"values must be {f.allowed()}", allowed=f.allowed(),
                                        value=v if isinstance(v, (str, int, float)) else None)
            codes = np.array(codes, dtype=np.float64)
        else:
            codes = _numeric_column(path, values, booleans=f.kind == "bool")
        if len(codes) > MAX_BATCH_ROWS:
            raise ScenarioError(path, f"has {len(codes):,} values; a batch has at most {MAX_BATCH_ROWS:,}")
        if n is None:
            n = len(codes)
        elif len(codes) != n:
            raise ScenarioError(path, f"has {len(codes)} values but other columns have {n}")
        if len(codes) and not (math.isfinite(lo := float(codes.min())) and math.isfinite(hi := float(codes.max()))
                               and lo >= f.lo and hi <= f.hi):  # min and max are NaN if a value is
            raise ScenarioError(path, f"values must be {f.allowed()}", allowed=f.allowed())
        if f.min_nonzero and np.any((codes > 0) & (codes < f.min_nonzero)):  # as validate: 0 is auto
            raise ScenarioError(path, f"values must be 0 (auto) or from {schema._fmt(f.min_nonzero)} to "
                                      f"{schema._fmt(f.hi)}" + (f" {f.unit}" if f.unit else ""),
                                allowed=f.allowed())
        if f.kind in ("int", "bool") and not np.all(codes == np.floor(codes)):
            raise ScenarioError(path, f"values must be {f.allowed()}", allowed=f.allowed())
        idx.append(IX[path])
        cols.append(codes)
        if path == "hardware.gpu":
            for key in CATALOG_KEYS:
                if "hardware." + key in columns:
                    continue
                spec = np.array([CATALOG[schema.GPU_NAMES[int(c)]][key] for c in codes], dtype=np.float64)
                idx.append(IX["hardware." + key])
                cols.append(spec)
        if path == "multimodal.encoder":  # an encoder brings its figures along, as a GPU its specs
            for key, table_key in schema.ENCODER_KEYS.items():
                if "multimodal." + key in columns:
                    continue
                spec = np.array([float(schema.ENCODERS[schema.ENCODER_NAMES[int(c)]].get(table_key, 0))
                                 for c in codes], dtype=np.float64)
                idx.append(IX["multimodal." + key])
                cols.append(spec)
    if n == 0:
        raise ScenarioError("columns", "give at least one value to evaluate")
    return idx, cols


def _size_moves_depth(base: np.ndarray, idx: list[int], cols: list[np.ndarray]) -> None:
    """A size column on a scenario whose shape is stated moves the depth with it
    (:func:`schema.layers_for_size`) and a MoE's active parameters in proportion (as the size slider
    does), unless those are columns too. In place on ``idx`` and ``cols``."""
    ip, il, ia = IX["model.params_b"], IX["model.layers"], IX["model.active_params_b"]
    if ip not in idx:
        return
    p = cols[idx.index(ip)]
    if il not in idx and base[il] > 0.0:
        idx.append(il)
        cols.append(schema.layers_for_size(base[il], base[ip], p))
    if base[ia] > 0.0 and ia not in idx:  # with the shape stated or not, as schema.with_size
        idx.append(ia)
        cols.append(np.minimum(base[ia] * p / base[ip], p))


def batch(scenario: Mapping | str | Path, columns: Mapping[str, Any], full: bool = False,
          vector: np.ndarray | None = None, fits: bool = False, replan: bool = True, refit: bool = False):
    """Evaluate many variants of one scenario in one call of the parallel kernel.

    Parameters
    ----------
    scenario : the base scenario (mapping, YAML path or preset name).
    columns : {dotted path: values}; all columns have the same length n
        (at most ``MAX_BATCH_ROWS``) and row i is one variant.
        ``hardware.gpu`` values are names (or codes) and bring that GPU's
        catalog specs along.
    full : False -> (n, stages) total $ per stage; True -> (n, stages,
        resources + [gpu_hours, productive_gpu_hours, wall_days, fits]).
    fits : with ``full=False``, return ``(totals, feasible)`` where
        ``feasible`` (n,) is True where every enabled stage fits in GPU memory.
    replan : True (default): every variant gets the plan its own estimate would (each distinct
        combination of the inputs the plan search reads is searched once); False: every variant
        keeps the base scenario's plans, re-timed and re-checked for memory with its own inputs
        (the Monte Carlo: the layout is decided, the inputs are uncertain).
    A ``model.params_b`` column on a scenario whose shape is stated moves the model's depth with
    it (:func:`costcore.scenario.schema.layers_for_size`: 80 x 8,192 layers at 70B are 64 at 56B)
    and a MoE's active parameters in proportion, unless those are columns too.
    refit : with ``replan=False``, the stages of a variant that do not fit on the base's plans are
        laid out again, one search per quantile bucket of the varied inputs those searches read,
        rounded up to the bucket's upper edge (:func:`costcore.engine.kernel._refit_plans`); the
        call then returns ``(result, relaid)``, ``relaid`` (n,) True for the variants laid out again.

    Raises
    ------
    ScenarioError
        for any bad scenario, setting name, value, shape or row count.
    """
    full, fits = checks.flag("full", full), checks.flag("fits", fits)
    replan, refit = checks.flag("replan", replan), checks.flag("refit", refit)
    base, idx, mat = _batch_inputs(scenario, columns, vector)
    out = kernel.evaluate_batch(base, idx, mat, full=full, fits=fits and not full, replan=replan, refit=refit)
    if refit and not replan:
        out, relaid = out
        if full:
            return out, relaid
        if fits:
            return (out[:, :, 0], out[:, :, 1].min(axis=1) > 0.5), relaid
        return out[:, :, 0], relaid
    if full:
        return out
    if fits:
        return out[:, :, 0], out[:, :, 1].min(axis=1) > 0.5
    return out[:, :, 0]


def _batch_inputs(scenario, columns: Mapping[str, Any], vector: np.ndarray | None):
    """(base vector, setting indices, (settings, n) matrix) of a batch call: the columns checked and
    expanded, a size column moving the depth with it (:func:`_size_moves_depth`)."""
    if vector is not None:
        base = vector
    elif isinstance(scenario, Scenario):
        base = scenario.vector
    else:
        base = schema.to_vector(load_scenario(scenario))
    idx, cols = _expand_columns(columns)
    if not cols:
        raise ScenarioError("columns", "give at least one setting to vary")
    _size_moves_depth(base, idx, cols)
    mat = _rows_of(cols)
    if mat is None:
        mat = np.empty((len(cols), len(cols[0])))
        for j, c in enumerate(cols):
            mat[j] = c
    return base, np.array(idx, dtype=np.int64), mat


def _rows_of(cols: list[np.ndarray]) -> np.ndarray | None:
    """The C-contiguous float64 matrix whose rows, in order, are exactly ``cols``, or None. The Monte Carlo
    draws its samples into one such matrix (:func:`costcore.analysis.sensitivity.draw_inputs`); read as it is,
    a million samples of twenty inputs are not copied again (160 MB)."""
    m = cols[0].base
    if not (isinstance(m, np.ndarray) and m.ndim == 2 and m.dtype == np.float64 and m.flags.c_contiguous
            and m.shape[0] == len(cols)):
        return None
    start = m.__array_interface__["data"][0]
    for j, c in enumerate(cols):
        if (c.base is not m or c.dtype != np.float64 or c.shape != m.shape[1:] or c.strides != m.strides[1:]
                or c.__array_interface__["data"][0] != start + j * m.strides[0]):
            return None
    return m


PLAN_LAYOUT_KEYS = ("tp", "pp", "dp", "cp", "ep", "micro_batch", "zero", "interleave", "recompute",
               "sequence_parallel", "schedule")


def batch_layouts(scenario: Mapping | str | Path, columns: Mapping[str, Any],
                  vector: np.ndarray | None = None) -> list[dict[str, dict[str, Any]]]:
    """Per row of a batch (the columns as :func:`batch` takes them), each enabled stage's searched job layout:
    {stage: {tp, pp, dp, cp, ep, micro_batch, zero, interleave, recompute, sequence_parallel, schedule}}, the
    layout :func:`batch` (``replan=True``) evaluates that row on. Stages without a layout (data, evaluation)
    are left out. Raises ScenarioError as :func:`batch` does."""
    base, idx, mat = _batch_inputs(scenario, columns, vector)
    plans = kernel.batch_plans(base, idx, mat)
    enabled = [i for i, s in enumerate(STAGES) if base[kernel.STAGE_BASE[i] + kernel.S_ENABLED] > 0.5]
    row = np.zeros(len(layout.PLAN_FIELDS) + len(layout.TERM_FIELDS))
    out = []
    for r in range(mat.shape[1]):
        stages = {}
        for i in enabled:
            if plans[r, i, 0] < 0.5:  # no layout searched (a stage without training passes)
                continue
            row[:layout.NP] = plans[r, i, :layout.NP]
            d = plan_dict(row, 1.0)
            stages[STAGES[i]] = {k: d[k] for k in PLAN_LAYOUT_KEYS}
        out.append(stages)
    return out


BATCH_COLUMNS = list(RESOURCES) + list(kernel.BATCH_EXTRA)
