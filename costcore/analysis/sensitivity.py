"""Sensitivity and uncertainty: tornado, sweeps, heatmaps, Monte Carlo, budget solver.

Every function builds one matrix of variants and evaluates it with a single
call of the parallel batch kernel (:func:`costcore.engine.kernel.evaluate_batch`);
there is no Python loop per scenario.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from costcore import api, fmt
from costcore.scenario import checks
from costcore.engine import kernel, sampling
from costcore.scenario import schema
from costcore.scenario.schema import BY_PATH, IX, STAGES, ScenarioError, uses_default_mfu
from costcore.validation.runs import default_mfu_log_median, default_mfu_log_sigma

# Fields whose 0 means "auto": the tornado moves the value the core resolved instead.
_RESOLVED = {"mfu": "mfu", "ckpt_interval_h": "ckpt_interval_h"}
_SKIP_ZERO_AUTO = {"model.active_params_b", "model.layers", "model.hidden", "model.heads", "model.kv_heads",
                   "model.ffn", "stages.rl.reward_params_b", "stages.rl.critic_params_b"}


_NUMERIC = frozenset(f.path for f in schema.FIELDS if f.kind in ("float", "int"))
_VARIABLE = frozenset(f.path for f in schema.FIELDS if f.kind in ("float", "int", "enum", "bool"))


def _base(scenario) -> tuple[dict, np.ndarray, api.Result]:
    res = api.estimate(scenario)
    return res.scenario, res.vector, res


def numeric_inputs(scenario) -> list[str]:
    """Numeric inputs that matter for this scenario: global settings and enabled stages' settings."""
    scn = api.load_scenario(scenario)
    on = set(scn.get("stages", {}))
    dualpipe = any(schema.effective_value(scn, f"stages.{s}.schedule") in ("dualpipe", "search") for s in on
                   if f"stages.{s}.schedule" in schema.BY_PATH)
    dense = not float(schema.effective_value(scn, "model.experts") or 0)
    out = []
    for f in schema.FIELDS:
        if f.kind not in ("float", "int"):
            continue
        if dense and f.path in _MOE_ONLY:
            continue  # a dense model has no experts to count, route or place: "active parameters (MoE)" moved nothing
        if f.path == "efficiency.dualpipe_comm_sm_share" and not dualpipe:
            continue  # read only by stages that run DualPipe (pinned, or searched with 1F1B)
        parts = f.path.split(".")
        if parts[0] == "multimodal" and (not on & set(schema.MM_STAGES) or parts[1] in _ENCODER_SHAPE):
            continue  # the media block matters only to multimodal phases; an encoder's shape is not a knob
        if parts[0] == "stages":
            if parts[1] not in on or parts[2] not in schema.STAGE_KEYS[parts[1]]:
                continue
            if parts[2] == "num_gpus":
                continue  # 0 = the hardware count, which is an input of its own
            if parts[2] in ("tokens_per_gpu_s", "tflops_per_gpu"):
                continue  # measured overrides, off unless given
            if parts[1] == "rl" and parts[2] == "seq_len":
                continue  # an RL sequence is its prompt and response tokens: the setting moves nothing
        out.append(f.path)
    return out


_MOE_ONLY = ("model.active_params_b", "model.experts", "model.experts_active", "model.shared_experts", "model.moe_ffn",
             "model.expert_node_limit")
_ENCODER_SHAPE = ("patch_px", "max_resolution_px", "max_seconds", "encoder_layers", "encoder_hidden")


def current_values(paths: Sequence[str], scn: dict, res: api.Result) -> np.ndarray:
    vals = []
    for p in paths:
        v = float(res.vector[IX[p]])
        parts = p.split(".")
        if v == 0.0 and parts[0] == "stages" and parts[2] in _RESOLVED:
            v = res.stat(parts[1], _RESOLVED[parts[2]])
        elif v == 0.0 and p.endswith("tokens_per_item"):  # derived media tokens: moved around the derived count
            phase = parts[1] if parts[0] == "stages" else next((s for s in res.stages if s in schema.MM_STAGES), None)
            v = res.stat(phase, "media_tokens_per_item") if phase in res.stages else 0.0
        vals.append(v)
    return np.array(vals)


@dataclass
class Tornado:
    table: pd.DataFrame  # input, low, high, base value, total_low, total_high, swing, per-stage swings
    base_total: float


# Settings a job layout takes in powers of two (a parallel degree, the GPUs a node joins): the tornado moves
# them one step down and up, halved and doubled, since 20% of a TP of 8 (6 or 10 GPUs) is no layout
# (Megatron-LM splits heads and the node's NVLink domain evenly: Shoeybi et al. 2019, Sec. 3).
DOUBLING_KEYS = ("tp", "pp", "cp", "ep", "micro_batch")


# The model's head and expert counts are split evenly by tensor and expert parallelism (Megatron-LM:
# Shoeybi et al. 2019, Sec. 3; GShard: Lepikhin et al. 2020, Sec. 2.2), so they too move by halving
# and doubling: 64 heads move to 32 and 128, not to 51 and 77, which no TP of 8 divides.
DOUBLING_MODEL = ("model.heads", "model.kv_heads", "model.experts")
# Widths move to a multiple of 128, outward: Megatron-LM pads the vocabulary to a multiple of 128
# (megatron/training/arguments.py, --make-vocab-size-divisible-by) and the shipped configs' hidden and
# FFN sizes are all multiples of 128 (data/hf_configs), so 80% of a hidden 8,192 is 6,528, not 6,553.
WIDTH_KEYS = ("model.hidden", "model.ffn", "model.moe_ffn", "model.vocab", "multimodal.encoder_hidden")
WIDTH_MULTIPLE = 128


def is_layout_choice(path: str) -> bool:
    """True for a layout or shape choice (parallel degrees, micro-batch, GPUs per node, the model's layers, widths,
    heads and experts): a design the plan picks, not an uncertain quantity, price or efficiency. Halved and
    doubled, such a choice can swing the total far (TP 16 across two 8-GPU nodes), so the tornado marks it."""
    return is_doubling(path) or path in SHAPE_INPUTS or path in WIDTH_KEYS


def is_doubling(path: str) -> bool:
    """True for a setting the tornado halves and doubles instead of moving by ±rel."""
    return (path == "hardware.gpus_per_node" or path in DOUBLING_MODEL
            or (path.startswith("stages.") and path.rsplit(".", 1)[-1] in DOUBLING_KEYS))


def _tornado_ends(scn, paths, cur, rel, ranges):
    """Each input's (low, high) for the tornado: ±rel, its given range, or halved and doubled
    (:func:`is_doubling`), clipped to the field's range; whole numbers for an integer setting and
    a multiple of 128 outward for a width (``WIDTH_KEYS``)."""
    k = len(paths)
    lo = np.empty(k)
    hi = np.empty(k)
    for i, p in enumerate(paths):
        f = BY_PATH[p]
        if ranges and p in ranges:
            lo[i], hi[i] = ranges[p]
        elif is_doubling(p):  # a layout takes powers of two: TP 8 moves to 4 and 16, not to 6 and 10
            lo[i], hi[i] = cur[i] / 2.0, cur[i] * 2.0
        else:
            lo[i], hi[i] = cur[i] * (1 - rel), cur[i] * (1 + rel)
        lo[i], hi[i] = max(f.lo, lo[i]), min(f.hi, hi[i])
        if p == "multimodal.resolution_px":  # never past what the encoder takes (scenario.media's rule)
            hi[i] = min(hi[i], float(schema.effective_value(scn, "multimodal.max_resolution_px")))
        if p in WIDTH_KEYS and cur[i] >= 2 * WIDTH_MULTIPLE:
            m = WIDTH_MULTIPLE
            lo[i], hi[i] = max(f.lo, math.floor(lo[i] / m) * m), min(f.hi, math.ceil(hi[i] / m) * m)
        if f.kind == "int":
            lo[i], hi[i] = math.floor(lo[i]), math.ceil(hi[i])
        if f.min_nonzero and 0 < lo[i] < f.min_nonzero:  # 0 is "auto": the low end stays a value
            lo[i] = f.min_nonzero
    return lo, hi


# The model's size and shape move together. Moved with the parameter count held, a model of 48
# layers would have to hold the 61-layer model's 671B in its 48 layers (the kernel keeps what its
# layers cannot hold as unsharded dense weights, so fewer layers cost more); moved with the shape
# held, a "56B" would keep the 70B's 80 x 8,192 layers and cost as much. So a shape input moves as a
# model of that shape, its parameter counts scaled by hfconfig.shape_params of the moved shape over
# the current one's (the counts the scenario states stay at the base, whatever details the shape
# keys leave out), and a stated shape's size moves by its depth: 80% of a 70B of 80 layers is the
# same layers, 64 of them, with the count that shape holds (56.9B) as the tornado's low end.
SHAPE_INPUTS = tuple(f"model.{k}" for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "experts",
                                            "experts_active", "shared_experts", "moe_ffn"))
_SIZE_INPUTS = ("model.params_b",)


def _model_variants(scn, x, paths, lo, hi) -> dict[int, tuple[np.ndarray, float]]:
    """{variant index: (kernel vector, params_b)} for the tornado's variants (2 i low, 2 i + 1 high of
    ``paths[i]``) that move the model's size or shape, built as whole models (see SHAPE_INPUTS);
    a variant that does not make a valid model keeps the plain one-input move."""
    from costcore.scenario.hfconfig import MODEL_KEYS, shape_params
    moving = [i for i, p in enumerate(paths) if p in SHAPE_INPUTS or p in _SIZE_INPUTS]
    if not moving:
        return {}
    model = scn.get("model") or {}
    shape = {k: int(round(float(schema.effective_value(scn, f"model.{k}")))) for k in MODEL_KEYS[2:]}
    try:
        t0, a0 = shape_params(shape)
    except ScenarioError:
        t0 = a0 = 0.0
    total = float(schema.effective_value(scn, "model.params_b"))
    active = float(model.get("active_params_b") or 0.0)
    out = {}
    for i in moving:
        p = paths[i]
        key = p.split(".", 1)[1]
        for j, v in ((2 * i, lo[i]), (2 * i + 1, hi[i])):
            if t0 <= 0.0 or not model.get("layers" if p in _SIZE_INPUTS else key):
                continue  # no stated shape: the kernel derives the shape from the size (formulas.model_shape)
            moved = ({"layers": int(schema.layers_for_size(shape["layers"], total, v))} if p in _SIZE_INPUTS
                     else {key: int(v)})
            try:
                t1, a1 = shape_params({**shape, **moved})
            except ScenarioError:  # not a shape the counter takes (more KV heads than heads): the plain move
                continue
            params_b = min(round(total * t1 / t0, 4), BY_PATH["model.params_b"].hi)
            xv = x.copy()  # the scenario's vector with the model's keys moved (no validation per call)
            for k2, v2 in moved.items():
                xv[IX[f"model.{k2}"]] = float(v2)
            xv[IX["model.params_b"]] = params_b
            if active > 0.0:
                xv[IX["model.active_params_b"]] = round(min(active * a1 / a0, params_b), 4)
            out[j] = (xv, params_b)
    return out


def _clean_ranges(ranges):
    """The tornado's per-input (low, high), checked: None, or {setting: (low, high)} in its range."""
    if ranges is None:
        return None
    if not isinstance(ranges, Mapping):
        raise ScenarioError("ranges", "must be a mapping of setting to (low, high)")
    try:  # a dict subclass is read with dict's own methods; another mapping's may raise anything
        pairs = list(dict.items(ranges)) if isinstance(ranges, dict) else list(ranges.items())
    except Exception:  # noqa: BLE001
        raise ScenarioError("ranges", "must be a mapping of setting to (low, high) that can be read") from None
    clean = {}
    for p, lh in pairs:
        checks.setting("ranges", p, _NUMERIC)
        if (not isinstance(lh, (tuple, list, np.ndarray)) or isinstance(lh, np.ndarray) and lh.ndim != 1
                or len(lh) != 2):  # a set has no low and high; a 0-d array no length
            raise ScenarioError(f"ranges.{p}", "must be a pair (low, high)")
        f = BY_PATH[p]
        clean[p] = (checks.number(f"ranges.{p}", lh[0], f.lo, f.hi), checks.number(f"ranges.{p}", lh[1], f.lo, f.hi))
    return clean


def _with_model_variants(scn, x, paths, lo, hi, idx, cols):
    """``(idx, cols)`` with the size and shape variants made whole models (:func:`_model_variants`): the
    model keys they move become columns; a size's ends (``lo``, ``hi``, in place) become the count held."""
    variants = _model_variants(scn, x, paths, lo, hi)
    if not variants:
        return idx, cols
    k = len(paths)
    differ = np.zeros(x.shape[0], dtype=bool)
    for xv, _ in variants.values():
        differ |= xv != x
    differ[idx] = False
    idx = np.concatenate([idx, np.nonzero(differ)[0].astype(np.int64)])
    cols = np.vstack([cols, np.repeat(x[idx[k:]][:, None], 2 * k, axis=1)])
    for j, (xv, params_b) in variants.items():
        moved = xv[idx] != x[idx]
        cols[moved, j] = xv[idx][moved]
        if paths[j // 2] in _SIZE_INPUTS:  # the size the moved depth holds is the end shown
            (lo if j % 2 == 0 else hi)[j // 2] = params_b
    return idx, cols


def tornado(scenario, inputs: Sequence[str] | None = None, rel: float = 0.2,
            ranges: Mapping[str, tuple[float, float]] | None = None) -> Tornado:
    """Move every numeric input to low/high (±rel, or per-input (low, high)) one at a time.

    A parallel degree (TP, PP, CP, EP, micro-batch), the GPUs per node and the model's head and
    expert counts are halved and doubled (:func:`is_doubling`), the next layouts down and up; a
    width moves to a multiple of 128. A shape input (layers, widths, heads, experts) moves as a
    model of that shape: its parameter counts move with it (:data:`SHAPE_INPUTS`).

    Returns the total and per-stage cost at both ends and the swing, sorted by
    the swing of the total (largest first). Inputs at 0 with no meaning of
    their own are skipped; "auto" MFU and checkpoint interval are moved
    around the value the core resolved.
    """
    rel = checks.number("rel", rel, 0.0, 1.0, lo_open=True)
    scn, x, res = _base(scenario)
    if inputs is not None and (isinstance(inputs, (str, bytes, Mapping)) or not hasattr(inputs, "__iter__")):
        raise ScenarioError("inputs", "must be a list of setting names")
    try:  # the container's own __len__ / __iter__ run here
        paths = list(inputs) if inputs is not None else numeric_inputs(scn)
    except Exception:  # noqa: BLE001 - a foreign container may raise anything
        raise ScenarioError("inputs", "must be a list of setting names that can be read") from None
    if len(paths) > len(schema.FIELDS):
        raise ScenarioError("inputs", f"has {len(paths):,} names; there are {len(schema.FIELDS)} settings")
    for p in paths:
        checks.setting("inputs", p, _NUMERIC)
    ranges = _clean_ranges(ranges)
    cur = current_values(paths, scn, res)
    keep = [i for i, p in enumerate(paths) if not (cur[i] == 0.0 and (ranges is None or p not in ranges))
            and not (p in _SKIP_ZERO_AUTO and cur[i] == 0.0)
            and not (p == "model.active_params_b" and cur[i] >= float(schema.effective_value(scn, "model.params_b")))]
    # a dense model's active parameters are all of them: moving them up would make more active than exist
    paths = [paths[i] for i in keep]
    cur = cur[keep]
    k = len(paths)
    if k == 0:
        raise ScenarioError("inputs", "no numeric input to move")
    lo, hi = _tornado_ends(scn, paths, cur, rel, ranges)
    idx = np.array([IX[p] for p in paths], dtype=np.int64)
    # Every row keeps the scenario's own values ("auto" stays auto) except the one input it moves.
    cols = np.repeat(x[idx][:, None], 2 * k, axis=1)  # (inputs, variants)
    rows = np.arange(k)
    cols[rows, 2 * rows] = lo
    cols[rows, 2 * rows + 1] = hi
    idx, cols = _with_model_variants(scn, x, paths, lo, hi, idx, cols)
    out = kernel.evaluate_batch(x, idx, cols)[:, :, 0]
    tot = out.sum(axis=1)
    t_lo, t_hi = tot[0::2], tot[1::2]
    df = pd.DataFrame({"input": paths, "value": cur, "low": lo, "high": hi, "total_low": t_lo,
                       "total_high": t_hi, "swing": t_hi - t_lo, "abs_swing": np.abs(t_hi - t_lo)})
    for si, s in enumerate(STAGES):
        if s in res.stages:
            df[f"swing_{s}"] = out[1::2, si] - out[0::2, si]
    df["unit"] = [BY_PATH[p].unit for p in paths]
    df["choice"] = [is_layout_choice(p) for p in paths]  # a layout or shape choice (is_layout_choice)
    df = df.sort_values("abs_swing", ascending=False, kind="stable").reset_index(drop=True)
    return Tornado(table=df, base_total=res.total_usd)


def sweep(scenario, key: str, values: Sequence[float], full: bool = False) -> pd.DataFrame:
    """Cost of every stage for each value of one input (a long table: value, stage[, resource], usd)."""
    checks.setting("key", key, _VARIABLE)
    full = checks.flag("full", full)
    scn, x, res = _base(scenario)
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ScenarioError(key, "needs a list of values")
    if BY_PATH[key].kind == "enum":  # read once, safely: a foreign __len__ / __iter__ may raise anything
        values = api.values_list(key, values, "one of its choices")
    if full:
        out = api.batch(scn, {key: values}, full=True, vector=x)
        feasible = out[:, :, len(schema.RESOURCES) + kernel.BATCH_EXTRA.index("fits")].min(axis=1) > 0.5
    else:
        out, feasible = api.batch(scn, {key: values}, vector=x, fits=True)
    if BY_PATH[key].kind != "enum":  # batch has checked them: a flat column of numbers
        values = np.asarray(values, dtype=float)
    rows = []
    for i, v in enumerate(values):
        ok = bool(feasible[i])
        for si, s in enumerate(STAGES):
            if s not in res.stages:
                continue
            if full:
                for ri, r in enumerate(schema.RESOURCES):
                    rows.append({"value": v, "stage": s, "resource": r, "usd": float(out[i, si, ri]),
                                 "feasible": ok})
            else:
                rows.append({"value": v, "stage": s, "usd": float(out[i, si]), "feasible": ok})
    return pd.DataFrame(rows)


# What a layout change says, field by field, in the order a reader weighs them (DP alone is left out: it is the
# GPUs over the other degrees and moves with every GPU count)
_CHANGE_WORDS = (("tp", lambda v: f"TP {v}"), ("pp", lambda v: f"PP {v}"), ("cp", lambda v: f"CP {v}"),
                 ("ep", lambda v: f"EP {v}"), ("micro_batch", lambda v: f"micro-batch {v}"),
                 ("zero", fmt.zero_words), ("recompute", fmt.recompute_words),  # as fmt.plan_words says them
                 ("interleave", lambda v: "no interleaving" if v == 1 else f"interleaved, {v} chunks a stage"),
                 ("schedule", lambda v: "DualPipe" if v == "dualpipe" else "1F1B"),
                 ("sequence_parallel", lambda v: "sequence parallel" if v else "no sequence parallel"))


def layout_change_words(was: dict, now: dict) -> str:
    """What differs between two job layouts (api.PLAN_LAYOUT_KEYS dicts), in words: "full recompute (was selective
    recompute), micro-batch 1 (was 2)"; "" when only the data-parallel degree differs, or nothing does."""
    return ", ".join(f"{say(now[k])} (was {say(was[k])})" for k, say in _CHANGE_WORDS if now[k] != was[k])


JUMP_MEDIAN_MULTIPLE = 4.0  # a step between two sweep points this many times the stage's median step is a jump...
JUMP_SHARE = 0.03  # ... when it is also this share of the stage's cost at the point before


def sweep_jumps(scenario, key: str, sw: pd.DataFrame) -> pd.DataFrame:
    """The jumps of a sweep (``sweep``'s table: value, stage, usd) that a change of the stage's searched job
    layout explains: one row per (value, stage) whose cost moves by more than ``JUMP_MEDIAN_MULTIPLE`` times
    the stage's median step between neighbouring values and by more than ``JUMP_SHARE`` of its cost, and whose
    layout at that value differs from the one at the value before. Columns value, previous, stage, usd_before,
    usd_after, change (in words, :func:`layout_change_words`). A larger model that no longer fits its GPUs with
    selective recompute takes full recompute, and its cost steps up: the sweep says so where it happens."""
    checks.setting("key", key, _VARIABLE)
    cols = ["value", "previous", "stage", "usd_before", "usd_after", "change"]
    if not isinstance(sw, pd.DataFrame) or not {"value", "stage", "usd"} <= set(sw.columns):
        raise ScenarioError("sweep", "must be the table sweep() returns (columns value, stage and usd)")
    if sw.empty or BY_PATH[key].kind == "enum":
        return pd.DataFrame(columns=cols)
    scn, x, _ = _base(scenario)
    found = []
    for stage, g in sw.groupby("stage", sort=False):
        v, usd = g["value"].to_numpy(float), g["usd"].to_numpy(float)
        step = np.abs(np.diff(usd))
        if len(step) < 2:
            continue
        big = (step > JUMP_MEDIAN_MULTIPLE * np.median(step)) & (step > JUMP_SHARE * np.abs(usd[:-1]))
        found += [(stage, v[i], v[i + 1], usd[i], usd[i + 1]) for i in np.nonzero(big)[0]]
    if not found:
        return pd.DataFrame(columns=cols)
    points = sorted({p for f in found for p in f[1:3]})
    layouts = dict(zip(points, api.batch_layouts(scn, {key: points}, vector=x)))
    rows = []
    for stage, before, after, usd_before, usd_after in found:
        was, now = layouts[before].get(stage), layouts[after].get(stage)
        words = layout_change_words(was, now) if was and now else ""
        if words:
            rows.append({"value": after, "previous": before, "stage": stage, "usd_before": usd_before,
                         "usd_after": usd_after, "change": words})
    return pd.DataFrame(rows, columns=cols)


def heatmap(scenario, key_x: str, xs: Sequence[float], key_y: str, ys: Sequence[float],
            feasible: bool = False):
    """Total cost on a grid: result[j, i] for ys[j], xs[i].

    With ``feasible=True`` returns ``(totals, fits)``, ``fits[j, i]`` True where every enabled stage
    of that variant fits in GPU memory (infeasible cells are still computed, and marked).
    """
    checks.setting("key_x", key_x, _NUMERIC)
    checks.setting("key_y", key_y, _NUMERIC)
    if key_x == key_y:
        raise ScenarioError("key_y", "must differ from key_x")
    feasible = checks.flag("feasible", feasible)
    scn, x, _ = _base(scenario)
    xs = api._numeric_column(key_x, xs)
    ys = api._numeric_column(key_y, ys)
    if len(xs) * len(ys) > api.MAX_BATCH_ROWS:
        raise ScenarioError("xs", f"the grid has {len(xs) * len(ys):,} cells; at most {api.MAX_BATCH_ROWS:,}")
    gx, gy = np.meshgrid(xs, ys)
    out, ok = api.batch(scn, {key_x: gx.ravel(), key_y: gy.ravel()}, vector=x, fits=True)
    totals = out.sum(axis=1).reshape(len(ys), len(xs))
    return (totals, ok.reshape(len(ys), len(xs))) if feasible else totals


# ---------------------------------------------------------------------------
# Monte Carlo
# ---------------------------------------------------------------------------
@dataclass
class Dist:
    """A distribution on one input, relative to its current value unless absolute=True.

    kind: "triangular" (low, mode, high), "uniform" (low, high), "lognormal" (sigma a; median = current x b,
    b = 1 unless a track record says the model errs one way: costcore/data/calibration.yaml stage_bands).
    """
    kind: str
    a: float = 1.0
    b: float = 1.0
    c: float = 1.0
    absolute: bool = False
    why: str = ""

    def check(self, path: str) -> None:
        """ScenarioError unless the kind is known and the parameters are finite numbers."""
        checks.choice(f"dists.{path}.kind", self.kind, ("triangular", "uniform", "lognormal"))
        for name in ("a", "b", "c"):
            checks.number(f"dists.{path}.{name}", getattr(self, name), -1e12, 1e12)
        checks.flag(f"dists.{path}.absolute", self.absolute)
        a, b, c = float(self.a), float(self.b), float(self.c)
        if self.kind == "triangular" and not a <= b <= c:
            raise ScenarioError(f"dists.{path}", f"a triangular distribution needs low <= mode <= high "
                                                 f"(got {a:g}, {b:g}, {c:g})", allowed="low <= mode <= high")
        if self.kind == "uniform" and not a <= b:
            raise ScenarioError(f"dists.{path}", f"a uniform distribution needs low <= high (got {a:g}, {b:g})",
                                allowed="low <= high")
        if self.kind == "lognormal":
            checks.number(f"dists.{path}.a", a, 0.0, 10.0)  # sigma of the log; exp(10 sigma) already overflows
            checks.number(f"dists.{path}.b", b, 1e-3, 1e3)  # the median, a factor of the current value

    def units(self, center: float) -> tuple[int, float, float, float]:
        """(kind code, a, b, c) of :func:`costcore.engine.sampling.ppf` in the input's units around ``center``:
        triangular (low, mode, high), uniform (low, high, -), lognormal (median, sigma, -). Relative bounds are
        sorted, so a negative current value flips low and high."""
        scale = 1.0 if self.absolute else center
        if self.kind == "triangular":
            lo, mode, hi = sorted((self.a * scale, self.b * scale, self.c * scale))
            return sampling.KIND_TRIANGULAR, lo, mode, hi
        if self.kind == "uniform":
            lo, hi = sorted((self.a * scale, self.b * scale))
            return sampling.KIND_UNIFORM, lo, hi, 0.0
        if self.kind == "lognormal":
            return sampling.KIND_LOGNORMAL, center * self.b, max(float(self.a), 0.0), 0.0
        raise ScenarioError("distribution", f"unknown kind {self.kind!r}; use triangular, uniform or lognormal")

    def ppf(self, u: np.ndarray, center: float) -> np.ndarray:
        """The inverse of the distribution's CDF at probabilities ``u`` in (0, 1), in the input's units."""
        return sampling.quantiles(*self.units(center), np.ascontiguousarray(u, dtype=np.float64))

    def sample(self, seed: int, center: float, n: int, stratified: bool = True) -> np.ndarray:
        """``n`` draws (:func:`costcore.engine.sampling.draw`, stream ``seed``). Stratified (Latin hypercube,
        McKay, Beckman & Conover 1979, Technometrics 21(2)): one draw in each of ``n`` equal-probability slices,
        in a random order of their own, so every input covers its whole range evenly and percentiles of a total
        that adds the inputs' effects settle with fewer samples than independent draws
        (benchmarks/bench_mc_precision.py)."""
        kind, a, b, c = self.units(center)
        return sampling.draw([kind], [[a, b, c]], [-np.inf], [np.inf], [0.0], [False], n, seed, stratified)[0]


def draw_inputs(dists: Mapping[str, "Dist"], centers: Sequence[float], n: int, seed: int) -> np.ndarray:
    """A (len(dists), n) matrix of stratified draws, row j of input j around ``centers[j]``, moved into what a
    batch accepts (its range, whole numbers for integers, not between 0 and its smallest set value: the rules
    api.batch checks); one jitted pass, the rows in parallel."""
    fields = [BY_PATH[p] for p in dists]
    units = [d.units(float(c)) for d, c in zip(dists.values(), centers)]
    return sampling.draw([u[0] for u in units], [u[1:] for u in units], [f.lo for f in fields],
                         [f.hi for f in fields], [f.min_nonzero or 0.0 for f in fields],
                         [f.kind == "int" for f in fields], n, seed)


def default_distributions(scenario) -> dict[str, Dist]:
    """Sensible uncertainty on the inputs nobody knows in advance (documented in the page)."""
    scn = api.load_scenario(scenario)
    d: dict[str, Dist] = {
        "hardware.usd_per_gpu_hour": Dist("triangular", 0.8, 1.0, 1.3),
        "reliability.failures_per_gpu_hour": Dist("lognormal", 0.5),
        "reliability.failed_run_fraction": Dist("triangular", 0.0, 1.0, 3.0),
        "reliability.idle_fraction": Dist("triangular", 0.5, 1.0, 3.0),
    }
    for s in scn.get("stages", {}):
        p = f"stages.{s}."
        if s != "eval":
            if uses_default_mfu(scn, s):
                d[p + "mfu"] = Dist("lognormal", default_mfu_log_sigma(s), math.exp(default_mfu_log_median(s)),
                                    why="out-of-sample error of the default MFU on published runs of this kind "
                                        "of stage (data/calibration.yaml)")
            else:
                d[p + "mfu"] = Dist("triangular", 0.75, 1.0, 1.15, why="your MFU: assumption")
        d[p + "experiments"] = Dist("triangular", 0.5, 1.0, 2.0)
        if s in ("pretrain", "cpt"):
            d[p + "tokens_b"] = Dist("uniform", 0.9, 1.1)
        if s in ("sft", "dpo"):
            d[p + "usd_per_label"] = Dist("triangular", 0.7, 1.0, 1.5)
        if s == "rl":
            d[p + "response_tokens"] = Dist("triangular", 0.7, 1.0, 1.6)
            d[p + "steps"] = Dist("triangular", 0.8, 1.0, 1.5)
        if s == "eval":
            d[p + "runs"] = Dist("triangular", 0.8, 1.0, 2.0)
        if s in schema.MM_STAGES:  # text per sample is rarely measured before the data is built
            d[p + "text_tokens_per_sample"] = Dist("triangular", 0.7, 1.0, 1.5)
    return d


P90_Z = 1.2815515655446004  # standard normal quantile of 0.9


def mfu_band(scenario, z: float = P90_Z, res: api.Result | None = None) -> tuple[float, float] | None:
    """Total cost ($) at the P10 and P90 of the default MFU's out-of-sample error, or None.

    Every stage on the default MFU moves together (they share the model's
    error) by exp(median +- z sigma), the lognormal of the stage's kind in costcore/data/calibration.yaml
    (its published runs predicted out of sample). Higher MFU gives the
    lower cost. One batch call of two variants; pass ``res`` (the scenario's
    estimate) to skip estimating it again.
    """
    scn, x, res = _base(scenario) if res is None else (res.scenario, res.vector, res)
    stages = [s for s in res.stages if uses_default_mfu(scn, s)]
    if not stages:
        return None
    paths = [f"stages.{s}.mfu" for s in stages]
    cur = current_values(paths, scn, res)
    med, sig = ({p: g(s) for p, s in zip(paths, stages)} for g in (default_mfu_log_median, default_mfu_log_sigma))
    cols = {p: np.clip(c * np.exp(med[p] + np.array([z, -z]) * sig[p]), BY_PATH[p].min_nonzero or 0.01, BY_PATH[p].hi)
            for p, c in zip(paths, cur)}
    totals = api.batch(scn, cols, vector=x).sum(axis=1)
    return float(totals[0]), float(totals[1])


@dataclass
class MonteCarlo:
    totals: np.ndarray  # (n,)
    stages: np.ndarray  # (n, stages)
    percentiles: pd.DataFrame  # rows: total + stages; columns P10, P50, P90, mean
    p_over_budget: float | None
    deterministic_total: float
    feasible: np.ndarray | None = None  # (n,) True where every enabled stage of the sample fits in memory
    p_infeasible: float = 0.0  # share of samples that do not fit (still computed, and counted above)
    infeasible_driver: str | None = None  # the sampled input whose draws go most with not fitting
    p_relaid: float = 0.0  # share of samples laid out again because the kept layout did not hold them
    relaid_driver: str | None = None  # the sampled input whose draws go most with being laid out again


def _infeasible_driver(cols: Mapping[str, np.ndarray], fits: np.ndarray) -> str | None:
    """The sampled input most correlated (|Pearson r| of its draws with not fitting) with samples that do
    not fit in GPU memory, or None when every sample fits or every one fails."""
    bad = (~np.asarray(fits, dtype=bool)).astype(np.float64)
    if bad.min() == bad.max():
        return None
    n = len(bad)
    mb = float(bad.mean())
    sd_b = float(np.sqrt(max(mb - mb * mb, 0.0)))  # a 0/1 variable's standard deviation
    best, best_r = None, 0.0
    for p, v in cols.items():
        v = np.asarray(v, dtype=np.float64)
        mv = float(v.sum()) / n
        # moments by dot products (one pass each, BLAS): cov = E[v bad] - E[v] E[bad], var = E[v^2] - E[v]^2
        var = max(float(v @ v) / n - mv * mv, 0.0)
        if var > 1e-12 * mv * mv:  # constant up to rounding (E[v^2] - E[v]^2 cancels): no spread to correlate
            r = abs(float(v @ bad) / n - mv * mb) / (np.sqrt(var) * sd_b)
            if r > best_r:
                best, best_r = p, r
    return best


def monte_carlo(scenario, n: int = 100_000, seed: int = 0, dists: Mapping[str, Dist] | None = None,
                budget_usd: float | None = None) -> MonteCarlo:
    """Sample uncertain inputs, evaluate every sample in one batch call, summarize.

    Samples are clipped to each field's allowed range. With every spread zero
    the distribution collapses on the deterministic estimate.
    """
    n = checks.count("n", n, 1, api.MAX_BATCH_ROWS)
    seed = checks.count("seed", seed, 0, 2**63 - 1)
    if budget_usd is not None:
        budget_usd = checks.number("budget_usd", budget_usd, 0.0, BUDGET_MAX_USD, lo_open=True)
    scn, x, res = _base(scenario)
    if dists is not None and not isinstance(dists, Mapping):
        raise ScenarioError("dists", "must be a mapping of setting to Dist")
    try:  # a dict subclass is read with dict's own methods; another mapping's may raise anything
        dists = (default_distributions(scn) if dists is None else
                 dict(dict.items(dists)) if isinstance(dists, dict) else dict(dists.items()))
    except Exception:  # noqa: BLE001
        raise ScenarioError("dists", "must be a mapping of setting to Dist that can be read") from None
    for p, dist in dists.items():
        checks.setting("dists", p, _NUMERIC)
        if not isinstance(dist, Dist):
            raise ScenarioError(f"dists.{p}", "must be a Dist (triangular, uniform or lognormal)")
        dist.check(p)
    paths = list(dists)
    mat = draw_inputs(dists, current_values(paths, scn, res), n, seed)
    cols = {p: mat[j] for j, p in enumerate(paths)}  # rows of one matrix: the batch reads it without a copy
    if cols:
        (out, fits), relaid = api.batch(scn, cols, vector=x, fits=True, replan=False, refit=True)
    else:
        out = np.tile(np.array([res.stat(s, "usd_total") for s in STAGES]), (n, 1))
        fits = np.full(n, res.feasible)
        relaid = np.zeros(n, dtype=bool)
    totals = out.sum(axis=1)
    rows = {"total": totals}
    for si, s in enumerate(STAGES):
        if s in res.stages:
            rows[s] = out[:, si]
    pct = pd.DataFrame({k: dict(zip(("P10", "P50", "P90"), np.percentile(v, (10, 50, 90))), mean=float(v.mean()))
                        for k, v in rows.items()}).T
    p_over = float((totals > budget_usd).mean()) if budget_usd is not None else None
    return MonteCarlo(totals=totals, stages=out, percentiles=pct, p_over_budget=p_over,
                      deterministic_total=res.total_usd, feasible=fits, p_infeasible=float(1.0 - fits.mean()),
                      infeasible_driver=_infeasible_driver(cols, fits) if cols else None,
                      p_relaid=float(relaid.mean()), relaid_driver=_infeasible_driver(cols, ~relaid) if cols else None)


# ---------------------------------------------------------------------------
# Budget solver
# ---------------------------------------------------------------------------
TOKENS_PER_PARAM = 20.0  # Hoffmann et al. 2022 (Chinchilla), compute-optimal ~20 tokens per parameter


@dataclass
class Solution:
    params_b: float
    tokens_b: float
    total_usd: float
    next_total_usd: float  # one step larger
    step: float  # relative step of the final search grid
    result: api.Result
    limit: str = "budget"  # what stops one step larger: "budget", "memory" (it does not fit its GPUs) or "range"
    key: str = ""  # mode "amount": the setting bought (stages.sft.samples ...)
    value: float = math.nan  # mode "amount": its largest value within the budget


# Mode "amount" of the solver: each stage's main quantity (what a team asks "how much of it does the budget buy")
SOLVER_AMOUNTS = {"pretrain": "tokens_b", "cpt": "tokens_b", "mm_align": "samples", "mm_cpt": "samples",
                  "mm_tune": "samples", "sft": "samples", "dpo": "pairs", "rl": "steps", "eval": "runs"}


def solver_amounts(scenario) -> list[str]:
    """The settings :func:`solve_budget` can buy in mode ``"amount"``: the main quantity of each stage switched
    on (pre-training tokens, SFT samples, DPO pairs, RL steps, evaluation runs ...), in stage order."""
    return _amounts_of(_base(scenario)[2])


def _amounts_of(res: api.Result) -> list[str]:
    return [f"stages.{s}.{SOLVER_AMOUNTS[s]}" for s in STAGES if s in res.stages and s in SOLVER_AMOUNTS]


def _largest_within(f_cost, lo: float, hi: float, budget: float, rounds: int = 3, points: int = 64):
    """Largest x on a geometric grid with cost(x) <= budget, refined; returns (x, x_next, costs).

    Three rounds of 64 points bracket the answer to a relative step of about 5e-5 over the size
    range (0.01-5,000 B: 1.23x, then 1.0033x, then 1.00005x), far below the 3 significant digits
    shown, in 192 evaluations (four rounds of 256 took 1,024, a quarter second per page rerun).

    Cost is not monotonic at the very small end (tiny models sit at the MFU floor while fixed
    costs stay), so the search starts from the first affordable grid point, not from ``lo``.
    """
    grid = np.geomspace(lo, hi, points)
    cost = f_cost(grid)
    ok = np.nonzero(cost <= budget)[0]
    if len(ok) == 0:
        if np.all(np.isinf(cost)):  # the cost functions price a plan that does not fit at infinity
            raise ScenarioError("budget_usd", "no size the solver tries gives a plan that fits in GPU memory; "
                                              "unpin the layout or add GPUs")
        raise ScenarioError("budget_usd", f"even the cheapest option costs more than ${budget:,.0f}")
    start = ok[0]
    over = np.nonzero(cost[start:] > budget)[0]
    if len(over) == 0:
        return grid[-1], None, cost[-1], None
    j = start + over[0]
    a, b = grid[j - 1], grid[j]
    for _ in range(rounds - 1):
        grid = np.geomspace(a, b, points)
        cost = f_cost(grid)
        over = np.nonzero(cost > budget)[0]
        if len(over) == 0:  # numerical edge: the whole bracket fits
            return grid[-1], b, cost[-1], f_cost(np.array([b]))[0]
        j = over[0]
        if j == 0:
            break
        a, b = grid[j - 1], grid[j]
    return a, b, f_cost(np.array([a]))[0], f_cost(np.array([b]))[0]


# the largest budget a scenario may state (schema: budget.total_usd's maximum, $10 trillion): a solver or a
# Monte Carlo budget of 1e30 read "the plan costs $16.4M of $1,000,000,000,000,000,000T"
BUDGET_MAX_USD = BY_PATH["budget.total_usd"].hi


def solve_budget(scenario, budget_usd: float, mode: str = "compute_optimal",
                 tokens_per_param: float = TOKENS_PER_PARAM, key: str | None = None) -> Solution:
    """Largest plan that fits a budget (whole scenario total, all enabled stages).

    mode "compute_optimal": model size N and pre-training tokens D = 20 N
    (Hoffmann et al. 2022) grow together; "tokens": the model stays, the
    pre-training tokens grow; "amount": one stage's main quantity ``key`` grows
    (:func:`solver_amounts`: SFT samples, DPO pairs, RL steps ...; a whole number
    where the setting is one), everything else as planned, so a plan without
    pre-training can be sized too. Returns the answer, its cost (<= budget) and the
    cost one grid step larger (> budget). A size whose plan does not fit in GPU
    memory (a pinned layout, too few GPUs) is not bought whatever it costs: the
    answer is the largest plan that is affordable and runs, and ``limit`` says
    which of the two stopped it.
    """
    budget_usd = checks.number("budget_usd", budget_usd, 0.0, BUDGET_MAX_USD, lo_open=True)
    mode = checks.choice("mode", mode, ("compute_optimal", "tokens", "amount"))
    tokens_per_param = checks.number("tokens_per_param", tokens_per_param, 0.0, 1e6, lo_open=True)
    scn, x, res = _base(scenario)
    if mode == "amount":
        amounts = _amounts_of(res)  # the estimate in hand, not a second one
        if not isinstance(key, str) or key not in amounts:
            raise ScenarioError("key", "must name the amount to buy, one of " + ", ".join(amounts)
                                if amounts else "has nothing to buy: no stage is switched on")
        return _solve_amount(scn, x, budget_usd, key)
    if "pretrain" not in res.stages:
        raise ScenarioError("stages.pretrain", "the budget solver sizes pre-training in this mode: switch it on, "
                                               "or buy an amount of a stage (mode amount)")
    fp = BY_PATH["model.params_b"]
    ft = BY_PATH["stages.pretrain.tokens_b"]

    if mode == "compute_optimal":
        lo_b, hi_b = max(fp.lo, 0.01), min(fp.hi, ft.hi / tokens_per_param)
        # a stated shape grows by its depth (schema.layers_for_size), up to the schema's most layers
        hi_b = min(hi_b, schema.largest_size_for_depth(float(schema.effective_value(scn, "model.layers") or 0),
                                                       float(schema.effective_value(scn, "model.params_b"))))

        def cost(ps):
            out, fits = api.batch(scn, {"model.params_b": ps, "stages.pretrain.tokens_b": ps * tokens_per_param},
                                  vector=x, fits=True)
            return np.where(fits, out.sum(axis=1), np.inf)  # a plan that does not run is not bought
        p, p_next, c, c_next = _largest_within(cost, lo_b, hi_b, budget_usd)
        params_b, tokens_b = p, p * tokens_per_param
        step = (p_next / p - 1) if p_next else 0.0
        final = schema.set_path(schema.with_size(scn, params_b), "stages.pretrain.tokens_b", tokens_b)
    elif mode == "tokens":
        def cost(ts):
            out, fits = api.batch(scn, {"stages.pretrain.tokens_b": ts}, vector=x, fits=True)
            return np.where(fits, out.sum(axis=1), np.inf)
        t, t_next, c, c_next = _largest_within(cost, ft.lo, ft.hi, budget_usd)
        params_b, tokens_b = float(schema.effective_value(scn, "model.params_b")), t
        step = (t_next / t - 1) if t_next else 0.0
        final = schema.set_path(scn, "stages.pretrain.tokens_b", tokens_b)
    else:
        raise ScenarioError("mode", "must be compute_optimal or tokens")
    final_res = api.estimate(final)
    limit, next_usd = "range", math.inf
    if c_next is not None:  # one step larger: over the budget, or a plan that does not fit (its cost all the same)
        nxt = (schema.set_path(schema.with_size(scn, p_next), "stages.pretrain.tokens_b",
                               p_next * tokens_per_param) if mode == "compute_optimal"
               else schema.set_path(scn, "stages.pretrain.tokens_b", t_next))
        nxt_res = api.estimate(nxt)
        limit = "budget" if nxt_res.feasible else "memory"
        next_usd = nxt_res.total_usd
    return Solution(params_b=params_b, tokens_b=tokens_b, total_usd=final_res.total_usd,
                    next_total_usd=next_usd, step=step, result=final_res, limit=limit)


def _solve_amount(scn: dict, x: np.ndarray, budget_usd: float, key: str) -> Solution:
    """:func:`solve_budget` in mode "amount": the largest value of ``key`` whose plan costs at most the budget
    and runs (whole numbers for a whole-number setting)."""
    f = BY_PATH[key]
    whole = f.kind == "int"
    cur = float(schema.effective_value(scn, key))
    lo = max(float(f.lo), 1.0) if whole else max(float(f.lo), cur * 1e-6, 1e-9)

    def rounded(v):
        return np.floor(v) if whole else v

    def cost(vs):
        out, fits = api.batch(scn, {key: rounded(vs)}, vector=x, fits=True)
        return np.where(fits, out.sum(axis=1), np.inf)

    def sized(v):
        return schema.set_path(scn, key, int(v) if whole else float(v))

    v, v_next, _, c_next = _largest_within(cost, lo, float(f.hi), budget_usd)
    if whole and v_next is not None:  # the grid's last step is ~5e-5 of the value: close it to one unit
        a, b = float(np.floor(v)), float(np.ceil(v_next))
        while b - a > 1.0:
            cand = np.unique(np.round(np.linspace(a, b, int(min(b - a + 1.0, 64.0)))))
            a = float(cand[cost(cand) <= budget_usd].max())
            b = float(cand[cand > a].min())
        v, v_next = a, b
    v = float(rounded(v))
    final = sized(v)
    final_res = api.estimate(final)
    limit, next_usd, step = "range", math.inf, 0.0
    if c_next is not None and v_next is not None:
        v_next = float(v_next)
        nxt_res = api.estimate(sized(v_next))
        limit = "budget" if nxt_res.feasible else "memory"
        next_usd, step = nxt_res.total_usd, v_next / v - 1.0
    return Solution(params_b=float(schema.effective_value(final, "model.params_b")),
                    tokens_b=float(schema.effective_value(final, "stages.pretrain.tokens_b")),
                    total_usd=final_res.total_usd, next_total_usd=next_usd, step=step, result=final_res,
                    limit=limit, key=key, value=v)

