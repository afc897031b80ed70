"""Scenario schema: the single place that knows the float64 vector layout.

The layout is derived from ``costcore/data/schema.yaml`` (fields, defaults,
ranges, units, sources) and ``costcore/data/hardware.yaml`` (the GPU
catalog). Global sections come first, in file order; then one block per
stage, in :data:`STAGES` order. Every stage block has the same shape at its
start (``enabled`` + the ``run``, ``train``, ``peft`` and ``data`` groups), so
the kernel reads shared fields as ``STAGE_BASE[s] + S_<FIELD>``; the fields
specific to a stage follow and are addressed by absolute index constants
(``SFT_SAMPLES`` ...). A stage accepts in YAML only the keys of the groups it
declares.

Enums are stored as the index of their choice, booleans as 0/1.
"""
from __future__ import annotations

import copy
import difflib
import math
import numbers
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

DATA_DIR = Path(__file__).resolve().parent.parent / "data"

STAGES = ("pretrain", "cpt", "mm_align", "mm_cpt", "mm_tune", "sft", "dpo", "rl", "eval")
MM_STAGES = ("mm_align", "mm_cpt", "mm_tune")  # the multimodal phases (issue 17): media through an encoder
RESOURCES = ("compute", "storage", "network", "data", "labor", "ops", "hidden")
# What a reader sees for each resource (legends, table cells, CLI columns); exports keep the keys.
RESOURCE_LABELS = {"compute": "Compute", "storage": "Storage", "network": "Network", "data": "Data",
                   "labor": "Labor", "ops": "Operations", "hidden": "Hidden costs"}
GROUP_ORDER = ("run", "train", "peft", "data")
TOP_LEVEL_KEYS = ("name", "description", "model", "hardware", "efficiency", "reliability",
                  "storage", "network", "data", "labor", "ops", "multimodal", "stages", "budget", "schedule", "lifecycle", "tags")


from costcore.errors import ScenarioError  # noqa: E402,F401  (re-exported: the one public exception type)
from costcore.scenario.checks import _is_real, _shown as _show, as_float  # noqa: E402  (one way to show a value)
from costcore import fmt  # noqa: E402
from costcore.scenario.yamlio import MAX_DEPTH, NUMBER_TEXT  # noqa: E402  (one depth limit, one number rule)


def _load_yaml(name: str) -> dict:
    with open(DATA_DIR / name, encoding="utf-8") as fh:  # our own data files: safe loading, C parser if built
        return yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506


CATALOG: dict[str, dict] = _load_yaml("hardware.yaml")
GPU_NAMES: tuple[str, ...] = tuple(CATALOG)
ENCODERS: dict[str, dict] = _load_yaml("encoders.yaml")["encoders"]  # "custom": a user-described one
ENCODER_NAMES: tuple[str, ...] = tuple(ENCODERS)
_SCHEMA = _load_yaml("schema.yaml")
# multimodal.<field> -> the encoders.yaml key it defaults to (the encoder's figures, as the GPU's for hardware)
ENCODER_KEYS = {"encoder_params_b": "params_b", "encoder_layers": "layers", "encoder_hidden": "hidden",
                "patch_px": "patch_px", "resolution_px": "resolution_px", "max_resolution_px": "max_resolution_px",
                "encoder_tokens": "encoder_tokens", "audio_tokens_per_second": "tokens_per_second",
                "max_seconds": "max_seconds"}
CATALOG_KEYS = ("usd_per_gpu_hour", "peak_tflops", "memory_gb", "mem_bandwidth_tbs", "attn_efficiency",
                "fp8_peak_tflops", "gemm_efficiency", "intra_node_gbs", "inter_node_gbs", "gpus_per_node",
                "pcie_gbs")


@dataclass(frozen=True)
class Field:
    """One input: its dotted path, vector index, type, default and range."""
    path: str
    index: int
    kind: str = "float"
    default: Any = 0.0
    lo: float = -math.inf
    hi: float = math.inf
    unit: str = ""
    doc: str = ""
    source: str = ""
    choices: tuple = field(default_factory=tuple)
    min_nonzero: float = 0.0  # for "0 = auto" fields: the smallest meaningful explicit value
    label: str = ""  # words for screens and charts ("Pre-training: Tensor parallelism"), never the key

    def encode(self, value) -> float:
        if self.index < 0:
            raise ValueError(f"{self.path} is a planning setting, not a kernel input")
        if self.kind == "enum":
            return float(self.choices.index(value))
        if self.kind == "bool":
            return 1.0 if value else 0.0
        if self.kind == "str":  # text (model.hf_config) is resolved by validate; its slot stays 0
            return 0.0
        return float(value)

    def decode(self, x: float):
        if self.kind == "enum":
            return self.choices[int(round(x))]
        if self.kind == "bool":
            return bool(x)
        if self.kind == "int":
            return int(round(x))
        return float(x)

    def allowed(self) -> str:
        if self.kind == "str":
            return "text of at most 100 characters"
        if self.kind == "date":
            return "a date written YYYY-MM-DD between 2000-01-01 and 2100-12-31"
        if self.kind == "enum":
            return "one of " + ", ".join(self.choices)
        if self.kind == "bool":
            return "true or false"
        kind = "a whole number" if self.kind == "int" else "a number"
        unit = str(self.unit or "")
        if unit.startswith("$"):  # from $0 to $10 trillion, from $0.01 to $1,000/GPU-hour
            return f"{kind} from ${_fmt(self.lo)} to ${_fmt(self.hi)}{unit[1:]}"
        if unit.startswith("of ") and 0 <= self.lo and self.hi <= 1:  # a share: 0.01 to 1 (1% to 100% of each budget)
            return (f"{kind} from {_fmt(self.lo)} to {_fmt(self.hi)} ({_fmt(self.lo * 100)}% to "
                    f"{_fmt(self.hi * 100)}% {unit})")
        if unit == "fraction":
            return f"{kind} from {_fmt(self.lo)} to {_fmt(self.hi)} (a fraction)"
        return f"{kind} from {_fmt(self.lo)} to {_fmt(self.hi)}" + (f" {unit}" if unit else "")


def _fmt(v: float) -> str:
    """A range end in words: 1,000,000 as written, 10 trillion past a billion when round."""
    for scale, word in ((1e12, "trillion"), (1e9, "billion")):
        if abs(v) >= scale and v / scale == round(v / scale, 3):
            return f"{v / scale:,g} {word}"
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    return f"{v:g}"


def _make_field(path: str, spec: dict, index: int, default_override=None) -> Field:
    kind = spec.get("type", "float")
    choices: tuple = ()
    if kind == "enum":
        choices = {"catalog": GPU_NAMES, "encoders": ENCODER_NAMES}.get(spec["choices"]) if isinstance(
            spec["choices"], str) else tuple(str(c) for c in spec["choices"])
    default = spec.get("default", 0)
    if default_override is not None:
        default = default_override
    if default == "catalog":
        key = path.rsplit(".", 1)[1]
        default = CATALOG[_SCHEMA["sections"]["hardware"]["gpu"]["default"]][key]
    elif default == "encoder":
        key = path.rsplit(".", 1)[1]
        default = ENCODERS[_SCHEMA["sections"]["multimodal"]["encoder"]["default"]].get(ENCODER_KEYS[key], 0)
    return Field(path=path, index=index, kind=kind, default=default,
                 lo=float(spec.get("min", -math.inf)) if kind in ("float", "int") else 0.0,
                 hi=float(spec.get("max", math.inf)) if kind in ("float", "int") else float(max(len(choices) - 1, 1)),
                 unit=str(spec.get("unit", "")), doc=str(spec.get("doc", "")),
                 source=str(spec.get("source", "")), choices=choices,
                 min_nonzero=float(spec.get("min_nonzero", 0.0)), label=_label(path, spec))


def _label(path: str, spec: dict) -> str:
    """A field's words: its schema label, prefixed by the stage's for a stage field."""
    words = str(spec.get("label", "")) or path
    parts = path.split(".")
    if parts[0] == "stages" and len(parts) > 2:
        return f"{_SCHEMA['stages'][parts[1]]['label']}: {words}"
    return words


def _build_layout():
    fields: list[Field] = []
    for section, specs in _SCHEMA["sections"].items():
        for key, spec in specs.items():
            fields.append(_make_field(f"{section}.{key}", spec, len(fields)))
    stage_base, stage_keys = [], {}
    groups = _SCHEMA["groups"]
    for stage in STAGES:
        sspec = _SCHEMA["stages"][stage]
        stage_base.append(len(fields))
        prefix = f"stages.{stage}."
        fields.append(Field(path=prefix + "enabled", index=len(fields), kind="bool", default=False,
                            lo=0, hi=1, doc="Stage is part of the plan (present in the file).",
                            label=f"{sspec['label']}: Included"))
        accepted = {"enabled"}
        for gname in GROUP_ORDER:
            for key, spec in groups[gname].items():
                fields.append(_make_field(prefix + key, spec, len(fields), sspec.get("defaults", {}).get(key)))
                if gname in sspec["groups"]:
                    accepted.add(key)
        for key, spec in sspec["fields"].items():
            fields.append(_make_field(prefix + key, spec, len(fields), sspec.get("defaults", {}).get(key)))
            accepted.add(key)
        stage_keys[stage] = accepted
    return fields, tuple(stage_base), stage_keys


FIELDS, STAGE_BASE, STAGE_KEYS = _build_layout()
NF = len(FIELDS)
IX: dict[str, int] = {f.path: f.index for f in FIELDS}
# Planning settings (budget, schedule, lifecycle, tags): validated and shared like inputs, not in the vector.
PLAN_FIELDS = [_make_field(f"{sec}.{key}", spec, -1) for sec, specs in _SCHEMA["plan"].items()
               for key, spec in specs.items()]
PLAN_SECTIONS = tuple(_SCHEMA["plan"])
BY_PATH: dict[str, Field] = {f.path: f for f in FIELDS + PLAN_FIELDS}
STAGE_LABELS = {s: _SCHEMA["stages"][s]["label"] for s in STAGES}


def global_batch_unit(stage: str) -> str:
    """What a stage's global batch counts, in words: DPO's holds preference pairs, the others sequences."""
    return "preference pairs" if stage == "dpo" else "sequences"
# The stage's short name where room is tight (chart axes, the CLI table's first column).
STAGE_SHORT = {"pretrain": "Pre-train", "cpt": "CPT", "mm_align": "Multimodal align", "mm_cpt": "Multimodal CPT",
               "mm_tune": "Multimodal tune", "sft": "SFT", "dpo": "DPO", "rl": "RL", "eval": "Eval"}
NS = len(STAGES)
# Every input key standing alone in a text (not part of a longer key, a URL or an assignment), longest first.
_KEY_IN_TEXT = re.compile(r"(?<![\w.=/])(" + "|".join(map(re.escape, sorted(BY_PATH, key=len, reverse=True)))
                          + r")(?![\w])")


def error_in_words(err, labels: Mapping[str, str] | None = None) -> str:
    """A :class:`ScenarioError`'s sentence for a person at a form: each setting it names by its dotted key
    (``stages.mm_align.items_per_sample``, for a program and in a link) named by its label in words
    (schema.yaml), the first one as the subject ("Multimodal alignment: Media items per sample: ...") and
    any inside the sentence in quotation marks. A text with no known key is returned as it is.

    ``labels``: {key: the words a form shows for it} where a page words a setting its own way (the
    multimodal page's "Images per sample" for an image model); a stage's name is kept in front of them.
    """
    labels = labels or {}

    def words(path: str) -> str:
        full = BY_PATH[path].label
        shown = labels.get(path)
        if not shown:
            return full
        stage = full.rsplit(": ", 1)[0] if ": " in full else ""
        return f"{stage}: {shown}" if stage and not shown.startswith(stage) else shown

    text = str(err)
    path = getattr(err, "path", "")
    head = ""
    if path in BY_PATH and text.startswith(path + ": "):
        head, text = words(path) + ": ", text[len(path) + 2:]
    return head + _KEY_IN_TEXT.sub(lambda m: f"“{words(m.group(1))}”", text)


def _stage_offset(key: str) -> int:
    """Offset of a shared stage field inside every stage block."""
    off = IX[f"stages.{STAGES[0]}.{key}"] - STAGE_BASE[0]
    for s, base in zip(STAGES, STAGE_BASE):
        assert IX[f"stages.{s}.{key}"] - base == off
    return off


# --- Index constants read by the numba kernel (derived above, never typed by hand) ---
M_PARAMS_B = IX["model.params_b"]
M_ACTIVE_B = IX["model.active_params_b"]
M_LAYERS = IX["model.layers"]
M_HIDDEN = IX["model.hidden"]
M_HEADS = IX["model.heads"]
M_KV_HEADS = IX["model.kv_heads"]
M_FFN = IX["model.ffn"]
M_VOCAB = IX["model.vocab"]
M_GATED = IX["model.gated"]
M_WINDOW = IX["model.sliding_window"]
M_NODE_LIMIT = IX["model.expert_node_limit"]
M_WINDOW_SHARE = IX["model.sliding_window_share"]
M_EXPERTS = IX["model.experts"]
M_EXPERTS_ACTIVE = IX["model.experts_active"]
M_SHARED_EXPERTS = IX["model.shared_experts"]
M_MOE_FFN = IX["model.moe_ffn"]
H_GPU = IX["hardware.gpu"]
H_NUM_GPUS = IX["hardware.num_gpus"]
H_USD_GPU_H = IX["hardware.usd_per_gpu_hour"]
H_RESERVED = IX["hardware.reserved"]
H_RESERVED_MONTHS = IX["hardware.reserved_months"]
H_RESERVED_GPUS = IX["hardware.reserved_gpus"]
H_PEAK_TFLOPS = IX["hardware.peak_tflops"]
H_MEM_GB = IX["hardware.memory_gb"]
H_BW_TBS = IX["hardware.mem_bandwidth_tbs"]
H_ATTN_EFF = IX["hardware.attn_efficiency"]
H_FP8_TFLOPS = IX["hardware.fp8_peak_tflops"]
H_GEMM_EFF = IX["hardware.gemm_efficiency"]
H_INTRA_GBS = IX["hardware.intra_node_gbs"]
H_PCIE_GBS = IX["hardware.pcie_gbs"]
H_INTER_GBS = IX["hardware.inter_node_gbs"]
H_GPUS_PER_NODE = IX["hardware.gpus_per_node"]
H_PRECISION = IX["hardware.precision"]
E_GEMM_HALF = IX["efficiency.gemm_half_dim"]
E_TRAFFIC = IX["efficiency.memory_traffic"]
E_COLL_EFF = IX["efficiency.collective_efficiency"]
E_DP_OVERLAP = IX["efficiency.dp_overlap"]
E_GRAD_BYTES = IX["efficiency.grad_reduce_bytes"]
E_FP8_EFF = IX["efficiency.fp8_gemm_efficiency"]
E_BUFFER_GB = IX["efficiency.comm_buffer_gb"]
E_LOGIT_BYTES = IX["efficiency.logit_bytes"]
E_CONTENTION = IX["efficiency.overlap_contention"]
E_TP_OVERLAP = IX["efficiency.tp_overlap"]
E_DUAL_SMS = IX["efficiency.dualpipe_comm_sm_share"]
E_SUSTAINED = IX["efficiency.sustained_fraction"]
E_CPU_OPT_GBS = IX["efficiency.cpu_optimizer_gbs"]
E_INFER_MFU = IX["efficiency.inference_mfu"]
E_USABLE_MEM = IX["efficiency.usable_memory_fraction"]
R_FAIL_RATE = IX["reliability.failures_per_gpu_hour"]
R_RESTART_H = IX["reliability.restart_hours"]
R_WRITE_GBPS = IX["reliability.ckpt_write_gbps_per_gpu"]
R_IDLE = IX["reliability.idle_fraction"]
R_FAILED_RUNS = IX["reliability.failed_run_fraction"]
ST_HOT = IX["storage.hot_usd_per_gb_month"]
ST_COLD = IX["storage.cold_usd_per_gb_month"]
ST_OBJECT = IX["storage.object_usd_per_gb_month"]
ST_COLD_AFTER_D = IX["storage.cold_after_days"]
ST_RETENTION_MO = IX["storage.retention_months"]
ST_VERSIONS = IX["storage.dataset_versions"]
ST_FINISHED_WEIGHTS = IX["storage.finished_weights_only"]
ST_BYTES_PER_TOKEN = IX["storage.bytes_per_token"]
ST_FULL_CKPT_BPP = IX["storage.full_ckpt_bytes_per_param"]
ST_WEIGHTS_CKPT_BPP = IX["storage.weights_ckpt_bytes_per_param"]
N_USD_PER_GB = IX["network.usd_per_gb"]
N_DATASET_MOVES = IX["network.dataset_transfers"]
N_CKPT_REPLICAS = IX["network.ckpt_replicas"]
N_EXPORTS = IX["network.model_exports"]
D_SYNTH_USD_PER_M = IX["data.usd_per_m_synthetic_tokens"]
D_REVIEW = IX["data.review_fraction"]
L_ROLES = tuple((IX[f"labor.{r}.fte"], IX[f"labor.{r}.usd_per_month"])
                for r in ("researcher", "ml_engineer", "data_engineer", "infra_engineer"))
O_USD_PER_MONTH = IX["ops.usd_per_month"]

S_ENABLED = _stage_offset("enabled")
S_NUM_GPUS = _stage_offset("num_gpus")
S_SETUP_MO = _stage_offset("setup_months")
S_EXPERIMENTS = _stage_offset("experiments")
S_EXP_SIZE = _stage_offset("experiment_size")
S_MFU = _stage_offset("mfu")
S_TOK_PER_GPU_S = _stage_offset("tokens_per_gpu_s")
S_TFLOPS = _stage_offset("tflops_per_gpu")
S_SEQ_LEN = _stage_offset("seq_len")
S_MICRO_BATCH = _stage_offset("micro_batch")
S_RECOMPUTE = _stage_offset("recompute")
S_ZERO = _stage_offset("zero_stage")
S_TP = _stage_offset("tp")
S_PP = _stage_offset("pp")
S_DP = _stage_offset("dp")
S_CP = _stage_offset("cp")
S_EP = _stage_offset("ep")
S_INTERLEAVE = _stage_offset("interleave")
S_SEQ_PAR = _stage_offset("sequence_parallel")
S_SCHEDULE = _stage_offset("schedule")
S_GLOBAL_BATCH = _stage_offset("global_batch")
S_GLOBAL_BATCH_TOKENS = _stage_offset("global_batch_tokens")
S_CKPT_INTERVAL_H = _stage_offset("ckpt_interval_h")
S_CKPT_TYPE = _stage_offset("ckpt_type")
S_KEEP_LAST = _stage_offset("keep_last")
S_MILESTONE = _stage_offset("milestone_every")
S_METHOD = _stage_offset("method")
S_LORA_RANK = _stage_offset("lora_rank")
S_LORA_TARGETS = _stage_offset("lora_targets")
S_QLORA_DEQ = _stage_offset("qlora_dequant_overhead")
S_BASE_BITS = _stage_offset("base_bits")
S_OPTIMIZER = _stage_offset("optimizer")
S_OFFLOAD = _stage_offset("offload")
S_GRAD_ACCUM = _stage_offset("grad_accum")
S_LOADER_TPS = _stage_offset("loader_tokens_per_s_per_node")
S_ACQ_USD_B = _stage_offset("acquisition_usd_per_b_tokens")
S_CLEAN_USD_B = _stage_offset("cleaning_usd_per_b_tokens")
S_LABELS = _stage_offset("labels")
S_USD_PER_LABEL = _stage_offset("usd_per_label")
S_SYNTH_M = _stage_offset("synthetic_tokens_m")

PT_TOKENS_B = IX["stages.pretrain.tokens_b"]
PT_EPOCHS = IX["stages.pretrain.epochs"]
CPT_TOKENS_B = IX["stages.cpt.tokens_b"]
CPT_EPOCHS = IX["stages.cpt.epochs"]
SFT_SAMPLES = IX["stages.sft.samples"]
SFT_TOK_PER_SAMPLE = IX["stages.sft.tokens_per_sample"]
SFT_EPOCHS = IX["stages.sft.epochs"]
DPO_PAIRS = IX["stages.dpo.pairs"]
DPO_CHOSEN = IX["stages.dpo.chosen_tokens"]
DPO_REJECTED = IX["stages.dpo.rejected_tokens"]
DPO_EPOCHS = IX["stages.dpo.epochs"]
DPO_REFERENCE = IX["stages.dpo.reference"]
RL_ALGO = IX["stages.rl.algorithm"]
RL_STEPS = IX["stages.rl.steps"]
RL_PROMPTS = IX["stages.rl.prompts_per_step"]
RL_SAMPLES = IX["stages.rl.samples_per_prompt"]
RL_PROMPT_TOK = IX["stages.rl.prompt_tokens"]
RL_RESPONSE_TOK = IX["stages.rl.response_tokens"]
RL_UPDATE_EPOCHS = IX["stages.rl.update_epochs"]
RL_ROLLOUT_EFF = IX["stages.rl.rollout_efficiency"]
RL_ROLLOUT_TP = IX["stages.rl.rollout_tp"]
RL_ROLLOUT_BATCH = IX["stages.rl.rollout_batch"]
RL_REWARD = IX["stages.rl.reward"]
RL_REWARD_B = IX["stages.rl.reward_params_b"]
RL_VERIFIER_USD = IX["stages.rl.verifier_usd_per_sample"]
RL_REFERENCE = IX["stages.rl.reference"]
RL_CRITIC_B = IX["stages.rl.critic_params_b"]
EV_RUNS = IX["stages.eval.runs"]
EV_BENCH_M = IX["stages.eval.benchmark_tokens_m"]
EV_GEN_M = IX["stages.eval.generated_tokens_m"]
EV_CONTEXT = IX["stages.eval.context_tokens"]
EV_DECODE_BATCH = IX["stages.eval.decode_batch"]
EV_DECODE_EFF = IX["stages.eval.decode_efficiency"]
EV_DECODE_TP = IX["stages.eval.decode_tp"]
EV_WEIGHT_BITS = IX["stages.eval.weight_bits"]
EV_HUMAN = IX["stages.eval.human_samples"]
EV_USD_HUMAN = IX["stages.eval.usd_per_human_sample"]
EV_MEDIA_K = IX["stages.eval.media_items_k"]

# The multimodal block (one per scenario) and the fields every multimodal stage has at the same offset.
MM_MODALITY = IX["multimodal.modality"]
MM_ENC_B = IX["multimodal.encoder_params_b"]
MM_ENC_L = IX["multimodal.encoder_layers"]
MM_ENC_D = IX["multimodal.encoder_hidden"]
MM_PATCH = IX["multimodal.patch_px"]
MM_RES = IX["multimodal.resolution_px"]
MM_ENC_TOK = IX["multimodal.encoder_tokens"]
MM_AUDIO_TPS = IX["multimodal.audio_tokens_per_second"]
MM_MAX_S = IX["multimodal.max_seconds"]
MM_TILES = IX["multimodal.tiles_per_item"]
MM_FRAMES = IX["multimodal.frames_per_item"]
MM_SECONDS = IX["multimodal.seconds_per_item"]
MM_TOK_ITEM = IX["multimodal.tokens_per_item"]
MM_CONNECTOR = IX["multimodal.connector"]
MM_QUERIES = IX["multimodal.connector_queries"]
MM_COMPRESS = IX["multimodal.token_compression"]
MM_CONN_B = IX["multimodal.connector_params_b"]
MM_RAW_MB = IX["multimodal.raw_mb_per_item"]
MM_SHARDS = IX["multimodal.shard_copies"]
MM_PRECOMP = IX["multimodal.precomputed_features"]
MM_CPU_S = IX["multimodal.preprocess_cpu_s_per_item"]
MM_ONLINE = IX["multimodal.preprocessing"]
MM_LOADER_CORES = IX["multimodal.loader_cores_per_node"]
MM_USD_CPU_H = IX["multimodal.usd_per_cpu_hour"]
MM_TRANSFERS = IX["multimodal.media_transfers"]


def _mm_offset(key: str) -> int:
    """Offset of a multimodal stage's own field inside its block (the same for every multimodal stage)."""
    off = IX[f"stages.{MM_STAGES[0]}.{key}"] - STAGE_BASE[STAGES.index(MM_STAGES[0])]
    for s in MM_STAGES:
        assert IX[f"stages.{s}.{key}"] - STAGE_BASE[STAGES.index(s)] == off
    return off


MS_SAMPLES = _mm_offset("samples")
MS_ITEMS = _mm_offset("items_per_sample")
MS_TEXT = _mm_offset("text_tokens_per_sample")
MS_SHARE = _mm_offset("media_share")
MS_EPOCHS = _mm_offset("epochs")
MS_TOK_ITEM = _mm_offset("tokens_per_item")
MS_RES = _mm_offset("resolution_px")
MS_TRAIN_CONN = _mm_offset("train_connector")
MS_TRAIN_LLM = _mm_offset("train_llm")
MS_TRAIN_ENC = _mm_offset("train_encoder")
MS_LICENSE = _mm_offset("license_usd_per_item")
MS_CAPTION = _mm_offset("caption_usd_per_item")

# Enum codes the kernel compares against (derived from the choices lists).
RECOMPUTE_AUTO = BY_PATH["stages.sft.recompute"].choices.index("auto")
RECOMPUTE_NONE = BY_PATH["stages.sft.recompute"].choices.index("none")
RECOMPUTE_FULL = BY_PATH["stages.sft.recompute"].choices.index("full")
RECOMPUTE_SELECTIVE = BY_PATH["stages.sft.recompute"].choices.index("selective")
SEQ_PAR_ON = BY_PATH["stages.sft.sequence_parallel"].choices.index("on")
SEQ_PAR_OFF = BY_PATH["stages.sft.sequence_parallel"].choices.index("off")
SCHEDULE_DUALPIPE = BY_PATH["stages.sft.schedule"].choices.index("dualpipe")
SCHEDULE_SEARCH = BY_PATH["stages.sft.schedule"].choices.index("search")
PRECISION_FP8 = BY_PATH["hardware.precision"].choices.index("fp8")
METHOD_QLORA = BY_PATH["stages.sft.method"].choices.index("qlora")
CKPT_WEIGHTS = BY_PATH["stages.sft.ckpt_type"].choices.index("weights")
DPO_REF_PRECOMPUTED = BY_PATH["stages.dpo.reference"].choices.index("precomputed")
RL_PPO = BY_PATH["stages.rl.algorithm"].choices.index("ppo")
RL_REWARD_MODEL = BY_PATH["stages.rl.reward"].choices.index("model")
RL_REFERENCE_LIVE = BY_PATH["stages.rl.reference"].choices.index("live")
MODALITY_VIDEO = BY_PATH["multimodal.modality"].choices.index("video")
MODALITY_AUDIO = BY_PATH["multimodal.modality"].choices.index("audio")
PREPROCESS_ONLINE = BY_PATH["multimodal.preprocessing"].choices.index("online")
CONNECTOR_CODES = {c: i for i, c in enumerate(BY_PATH["multimodal.connector"].choices)}


def default_vector() -> np.ndarray:
    """The vector of every default (default GPU's catalog values, no stage enabled)."""
    return np.array([f.encode(f.default) for f in FIELDS], dtype=np.float64)


DEFAULT_VECTOR = default_vector()
DEFAULT_VECTOR.setflags(write=False)


# ----------------------------------------------------------------------------
# Validation
# ----------------------------------------------------------------------------
def _flatten_keys(d: dict, prefix: str, out: dict) -> None:
    for k, v in d.items():
        if not isinstance(k, str):
            where = ".".join(_key(p) for p in prefix.rstrip(".").split(".")) if prefix else "scenario"
            raise ScenarioError(where, f"keys must be text, got {_show(k)}")  # a parent key shown safely
        if isinstance(v, dict):
            _flatten_keys(v, prefix + k + ".", out)
        else:
            if prefix + k in out:
                raise ScenarioError(prefix + k, "is given twice (once nested, once with a dotted key)")
            out[prefix + k] = v


def _check_value(f: Field, v):
    path = f.path
    if f.kind == "str":
        if not isinstance(v, str) or len(v) > 100 or not _text_ok(v):
            raise ScenarioError(path, f"must be {f.allowed()} {TEXT_RULE} (got {_show(v)})",
                                value=v, allowed=f.allowed())
        return v
    if f.kind == "date":
        import datetime as _dt
        if isinstance(v, _dt.date) and not isinstance(v, _dt.datetime):
            v = v.isoformat()
        try:
            d = _dt.date.fromisoformat(v) if isinstance(v, str) and len(v) == 10 else None
        except ValueError:
            d = None
        if d is None or not (_dt.date(2000, 1, 1) <= d <= _dt.date(2100, 12, 31)):
            raise ScenarioError(path, f"must be {f.allowed()} (got {_show(v)})", value=v, allowed=f.allowed())
        return d.isoformat()
    if f.kind == "enum":
        if not isinstance(v, str) or v not in f.choices:
            raise ScenarioError(path, f"must be {f.allowed()} (got {_show(v)})", value=v, allowed=f.allowed())
        return v
    if f.kind == "bool":
        if not isinstance(v, bool):
            raise ScenarioError(path, f"must be {f.allowed()} (got {_show(v)})", value=v, allowed=f.allowed())
        return v
    if not _is_real(v):
        raise ScenarioError(path, f"must be {f.allowed()} (got {_show(v)})", value=v, allowed=f.allowed())
    if isinstance(v, np.integer):
        v = int(v)
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 2**1024:
        digits = int(v.bit_length() * 0.30103) + 1
        raise ScenarioError(path, f"must be {f.allowed()} (got a number with about {digits:,} digits)",
                            allowed=f.allowed())
    fv = float(v) if type(v) in (float, int) else as_float(path, v, f.allowed())  # plain numbers cannot fail
    if not math.isfinite(fv):
        raise ScenarioError(path, f"must be a finite number: {f.allowed()} (got {_show(v)})", value=v,
                            allowed=f.allowed())
    if fv < f.lo or fv > f.hi:
        raise ScenarioError(path, f"must be {f.allowed()} (got {_show(v)})", value=v, allowed=f.allowed())
    if f.min_nonzero and 0.0 < fv < f.min_nonzero:
        raise ScenarioError(path, f"must be 0 (auto) or from {_fmt(f.min_nonzero)} to {_fmt(f.hi)}"
                                  + (f" {f.unit}" if f.unit else "") + f" (got {_show(v)})")
    if f.kind == "int":
        if fv != math.floor(fv):
            raise ScenarioError(path, f"must be {f.allowed()} (got {_show(v)})", value=v, allowed=f.allowed())
        return int(fv)
    return fv


_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_.\-]{1,80}\Z")  # \Z: "$" also matches before a final newline


def _key(k) -> str:
    """A key as it should appear in a message: plain keys as they are, others quoted (blank, odd, long)."""
    if isinstance(k, str) and _PLAIN_KEY.match(k):
        return k
    return _show(k)


def _path(*parts) -> str:
    return ".".join(_key(p) for p in parts)


def _did_you_mean(key, known) -> str:
    """ " did you mean x?" for a misspelt or shortened setting name (a known name that starts or ends with it, or
    one difflib finds close: lora_r -> lora_rank, prompts -> prompts_per_step, gpus -> num_gpus), "" when none is near."""
    if not isinstance(key, str) or not key:
        return ""
    near = [k for k in known if (k.startswith(key) or k.endswith("_" + key)) and k != key][:2]
    near += [k for k in difflib.get_close_matches(key, list(known), n=2, cutoff=0.75) if k not in near]
    return f" did you mean {' or '.join(near[:2])}?" if near else ""


def _text_ok(v, multiline: bool = False) -> bool:
    """Text that can be written out safely: UTF-8 encodable and free of :data:`costcore.fmt.UNSAFE_TEXT`
    (controls, text-direction characters, line separators); a multi-line field (the description) may
    hold newlines and tabs."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return (fmt.UNSAFE_TEXT_MULTILINE if multiline else fmt.UNSAFE_TEXT).search(v) is None


TEXT_RULE = "with no control or text-direction characters"


def not_a_mapping(data, what: str = "scenario") -> ScenarioError:
    """The refusal of a scenario that is not a mapping, in words ("(got NoneType)" for an empty file)."""
    got = {type(None): "nothing", list: "a list", str: "a line of text"}.get(type(data), "a single value")
    holds = "" if what == "scenario" else "holds no scenario: it "
    return ScenarioError(what, f"{holds}must be a mapping of sections such as model: and stages: (got {got})")


def validate(data: Any) -> dict:
    """Check a scenario mapping and return a normalized deep copy.

    Raises :class:`ScenarioError` naming the first bad field and its allowed
    range. Never raises anything else for any input.
    """
    if not isinstance(data, dict):
        raise not_a_mapping(data)
    check_depth(data)
    data = _plain(data)  # from here on only built-in dicts and lists are read
    data = custom_encoder(_custom_gpu(_model_name(data)))
    out: dict = {}
    for key in data:
        if key not in TOP_LEVEL_KEYS:
            raise ScenarioError(_key(key), "unknown section; allowed: " + ", ".join(TOP_LEVEL_KEYS))
    name = data.get("name", "Untitled scenario")
    if not isinstance(name, str) or len(name) > 200 or not _text_ok(name):
        raise ScenarioError("name", f"must be one line of text of at most 200 characters {TEXT_RULE}",
                            value=name, allowed="text of at most 200 characters")
    out["name"] = name
    desc = data.get("description", "")
    if not isinstance(desc, str) or len(desc) > 5000 or not _text_ok(desc, multiline=True):
        raise ScenarioError("description", f"must be text of at most 5,000 characters {TEXT_RULE}",
                            value=desc, allowed="text of at most 5,000 characters")
    if desc:
        out["description"] = desc
    for section in list(_SCHEMA["sections"]) + list(PLAN_SECTIONS):
        sec = data.get(section)
        if sec is None:
            continue
        if not isinstance(sec, dict):
            raise ScenarioError(section, "must be a mapping of settings")
        flat: dict = {}
        _flatten_keys(sec, section + ".", flat)
        clean = {}
        for path, v in flat.items():
            f = BY_PATH.get(path)
            if f is None:
                names = [p.split(".", 1)[1] for p in BY_PATH if p.startswith(section + ".")]
                hint = _did_you_mean(path.split(".", 1)[1], names)
                raise ScenarioError(_path(*path.split(".")),
                                    f"unknown setting;{hint} allowed in {section}: {', '.join(names)}")
            clean[path] = _check_value(f, v)
        if clean:
            out[section] = _unflatten({p.split(".", 1)[1]: v for p, v in clean.items()})
    for key in ("name", "hf_config"):  # an empty name is no name (a share link of a resized model writes one)
        if (out.get("model") or {}).get(key) == "":
            del out["model"][key]
    _resolve_hf_config(out)
    _active_rule(out)
    _shape_rules(out)
    stages = data.get("stages", {})
    if stages is None:
        stages = {}
    if not isinstance(stages, dict):
        raise ScenarioError("stages", "must be a mapping of stage names to settings")
    out["stages"] = {}
    for sname, sdata in stages.items():
        if sname not in STAGES:
            raise ScenarioError(_path("stages", sname), f"unknown stage;{_did_you_mean(sname, STAGES)} allowed: "
                                + ", ".join(STAGES))
        if sdata is None:
            sdata = {}
        if not isinstance(sdata, dict):
            raise ScenarioError(f"stages.{sname}", "must be a mapping of settings (or {})")
        clean = {}
        for k, v in with_train_list(sname, _with_plan_keys(sname, sdata)).items():
            path = f"stages.{sname}.{k}"
            if not isinstance(k, str) or k not in STAGE_KEYS[sname]:
                raise ScenarioError(_path("stages", sname, k), f"unknown setting;{_did_you_mean(k, STAGE_KEYS[sname])}"
                                    " allowed: " + ", ".join(sorted(STAGE_KEYS[sname])))
            clean[k] = _check_value(BY_PATH[path], v)
        _stage_rules(sname, clean)
        out["stages"][sname] = clean
    multimodal_rules(out, data)
    _throughput_rules(out)
    return out


# FP8 tensor cores run at most twice the BF16 rate (H100, H200, B200, GB200, MI300X, Gaudi 2 datasheets: 2.0x;
# the L40S 2.02x of its dense figures); data/hardware.yaml holds every catalog GPU within this.
FP8_OVER_BF16_MAX = 2.05


def _throughput_rules(out: dict) -> None:
    """A stage's measured TFLOP/s per GPU cannot exceed the GPU's peak (FP8's when the precision is FP8):
    it sets the stage's MFU (tflops / peak), which would pass 100%. A job in FP8 runs its matmuls at the
    FP8 peak and quotes its MFU against the BF16 one, so an FP8 peak above twice the BF16 peak (a lowered
    hardware.peak_tflops on an H100: MFU 370%) is refused too."""
    fp8 = effective_value(out, "hardware.precision") == "fp8"
    bf16, fp8_peak = (float(effective_value(out, f"hardware.{k}")) for k in ("peak_tflops", "fp8_peak_tflops"))
    if fp8 and fp8_peak > FP8_OVER_BF16_MAX * bf16:
        raise ScenarioError("hardware.fp8_peak_tflops", f"{fp8_peak:,.4g} TFLOP/s is more than twice the BF16 peak "
                            f"of {bf16:,.4g} (hardware.peak_tflops); FP8 tensor cores run at most 2x the BF16 rate, "
                            "so lower the FP8 peak with the BF16 one", value=fp8_peak,
                            allowed=f"0 to {FP8_OVER_BF16_MAX * bf16:,.4g}")
    peak = fp8_peak if fp8 else bf16
    for sname, clean in out["stages"].items():
        tflops = float(clean.get("tflops_per_gpu") or 0)
        if tflops > peak > 0:
            raise ScenarioError(f"stages.{sname}.tflops_per_gpu", f"{tflops:,.4g} TFLOP/s per GPU is above the "
                                f"GPU's {'FP8' if fp8 else 'BF16'} peak of {peak:,.4g}; give a measured rate up "
                                "to the peak", value=tflops, allowed=f"0 to {peak:,.4g}")


# hardware.gpu as a mapping (a custom GPU): its keys -> the hardware fields they set.
CUSTOM_GPU_KEYS = {"name": "gpu_name", "peak_tflops": "peak_tflops", "fp8_peak_tflops": "fp8_peak_tflops",
                   "memory_gb": "memory_gb", "mem_bandwidth_tbs": "mem_bandwidth_tbs",
                   "gpus_per_node": "gpus_per_node", "intra_node_gbs": "intra_node_gbs",
                   "inter_node_gbs": "inter_node_gbs", "pcie_gbs": "pcie_gbs",
                   "usd_per_gpu_hour": "usd_per_gpu_hour", "gemm_efficiency": "gemm_efficiency",
                   "attn_efficiency": "attn_efficiency"}
CUSTOM_GPU_REQUIRED = ("peak_tflops", "memory_gb")


def _unfold_figures(section: dict, name: str, key: str, keys: dict, what: str) -> dict:
    """``section`` with its ``key`` (a mapping of a custom GPU's or encoder's figures) unfolded into the
    section's fields ``keys`` names; a figure also set directly in the section must agree."""
    out = {k: v for k, v in section.items() if k != key}
    for k, v in section[key].items():
        if not isinstance(k, str) or k not in keys:
            raise ScenarioError(_path(name, key, k), f"unknown figure of a custom {what}; allowed: " + ", ".join(keys))
        target = keys[k]
        if target in out and out[target] != v:
            raise ScenarioError(_path(name, key, k), f"conflicts with {name}.{target}; set it in one place")
        out[target] = v
    return out


def _custom_gpu(data: dict) -> dict:
    """``hardware.gpu`` given as a mapping of figures -> gpu ``custom`` plus those hardware fields.

    The figures it does not give are the ``custom`` catalog entry's placeholders; keys set
    directly in ``hardware`` conflict. The result is an ordinary scenario, so a custom GPU is
    validated, exported and shared like any other setting.
    """
    hw = data.get("hardware")
    if not isinstance(hw, dict) or not isinstance(hw.get("gpu"), dict):
        return data
    spec = hw["gpu"]
    out = _unfold_figures(hw, "hardware", "gpu", CUSTOM_GPU_KEYS, "GPU")
    for k in CUSTOM_GPU_REQUIRED:
        if k not in spec:
            f = BY_PATH["hardware." + k]
            raise ScenarioError(f"hardware.gpu.{k}", f"a custom GPU needs its {f.label.lower()}: {f.allowed()}",
                                allowed=f.allowed())
    out["gpu"] = "custom"
    return dict(data, hardware=out)


def _model_name(data: dict) -> dict:
    """``model.name`` (a shipped model) -> ``model.hf_config`` of that name, checked against the list."""
    model = data.get("model")
    if not isinstance(model, dict) or model.get("name") in (None, ""):
        return data
    name = model["name"]
    from costcore.scenario.hfconfig import shipped_configs
    known = shipped_configs()
    if not isinstance(name, str) or name not in known:
        raise ScenarioError("model.name", f"must be a shipped model (python -m costcore models lists them), "
                            f"e.g. {', '.join(list(known)[:4])} (got {_show(name)})", value=name,
                            allowed="a shipped model's name")
    if model.get("hf_config") not in (None, "", name):
        raise ScenarioError("model.name", "conflicts with model.hf_config; set one of them")
    return dict(data, model=dict(model, hf_config=name))


BASE_BITS = (16, 8, 4)


def _stage_rules(sname: str, clean: dict) -> None:
    """Settings of one training stage that only make sense together (one sentence naming the field)."""
    bits = clean.get("base_bits", 16)
    method = clean.get("method", "full")
    where = f"stages.{sname}.base_bits"
    if bits not in BASE_BITS:
        raise ScenarioError(where, f"must be 16, 8 or 4 bits (got {bits})", value=bits, allowed="16, 8 or 4")
    if clean.get("weight_bits", 16) not in BASE_BITS:  # an evaluation's decoding weights: the same three widths
        raise ScenarioError(f"stages.{sname}.weight_bits", f"must be 16, 8 or 4 bits (got {clean['weight_bits']})",
                            value=clean["weight_bits"], allowed="16, 8 or 4")
    if method == "full" and bits != 16:
        raise ScenarioError(where, "full fine-tuning trains 16-bit weights; a 8- or 4-bit base needs method "
                            "lora or qlora", value=bits, allowed="16 with method full")
    if method == "qlora" and bits == 8:
        raise ScenarioError(where, "QLoRA stores its base in 4 bits; for an 8-bit base use method lora",
                            value=bits, allowed="4 or 16 with method qlora")
    if clean.get("schedule") == "dualpipe":
        pp, v = clean.get("pp", 0), clean.get("interleave", 0)
        if pp == 1 or pp % 2:
            raise ScenarioError(f"stages.{sname}.pp", f"DualPipe needs an even pipeline degree of 2 or more "
                                f"(pp is {pp}); set pp to 0 to search it", value=pp, allowed="0 or an even number")
        if v > 1:
            raise ScenarioError(f"stages.{sname}.interleave", f"DualPipe runs its own two chunks per GPU and is not "
                                f"interleaved (interleave is {v}); set it to 0 or 1", value=v, allowed="0 or 1")
    offload = clean.get("offload", "none")
    zero = clean.get("zero_stage", -1)
    need = {"optimizer": 2, "optimizer_and_params": 3}.get(offload, 0)
    if zero >= 0 and zero < need:
        what = {"optimizer": "optimizer states", "optimizer_and_params": "optimizer states and weights"}[offload]
        stage_words = "ZeRO stage 2 or 3" if need == 2 else "ZeRO stage 3"
        raise ScenarioError(f"stages.{sname}.offload", f"offloading the {what} to the CPU needs {stage_words} "
                            f"(DeepSpeed ZeRO-Offload), and this stage pins ZeRO stage {zero}; set its ZeRO stage "
                            f"to searched or to {need} (Job layout page)", value=offload,
                            allowed=f"none with ZeRO stage {zero}")




# A stage's `plan:` block (issue contract) -> the stage's own keys; each key optional.
PLAN_ALIASES = {"tp": "tp", "pp": "pp", "dp": "dp", "cp": "cp", "ep": "ep", "micro_batch": "micro_batch",
                "recompute": "recompute", "zero": "zero_stage", "interleave": "interleave",
                "sequence_parallel": "sequence_parallel", "schedule": "schedule"}


def _with_plan_keys(sname: str, sdata: dict) -> dict:
    """The stage's settings with a ``plan:`` mapping unfolded into its keys (the stage's own win on conflict)."""
    if "plan" not in sdata:
        return sdata
    plan = sdata["plan"]
    if not isinstance(plan, dict):
        raise ScenarioError(f"stages.{sname}.plan", "must be a mapping of plan settings: " + ", ".join(PLAN_ALIASES))
    out = {k: v for k, v in sdata.items() if k != "plan"}
    for k, v in plan.items():
        if not isinstance(k, str) or k not in PLAN_ALIASES:
            raise ScenarioError(_path("stages", sname, "plan", k), "unknown plan setting; allowed: "
                                + ", ".join(PLAN_ALIASES))
        if k == "sequence_parallel" and isinstance(v, bool):  # YAML 1.1 reads `on` / `off` as booleans
            v = "on" if v else "off"
        target = PLAN_ALIASES[k]
        if target in out and out[target] != v:
            raise ScenarioError(_path("stages", sname, "plan", k), f"conflicts with stages.{sname}.{target}; "
                                "set it in one place")
        out[target] = v
    return out


# A given dense shape may hold up to 1.5x fewer parameters than params_b (more, and the FLOPs of the size
# outrun the shape's step: MFU over 100%) and up to 3x more (a batch size column moves the depth only, so a
# small size keeps its embeddings: Llama-3.1-8B's shape at 1B holds 1.9B).
SHAPE_SIZE_TOLERANCE = 1.5
SHAPE_SIZE_SLACK_BELOW = 3.0


def _active_rule(out: dict) -> None:
    """The parameters active per token are at most the model's: FLOPs follow model.active_params_b, the
    layout's matmuls the model's shape, so 20B active on a 6.74B model gave an MFU of 119%."""
    active = float((out.get("model") or {}).get("active_params_b") or 0)
    size = float(effective_value(out, "model.params_b"))
    if active > size * (1.0 + 1e-9):
        raise ScenarioError("model.active_params_b", f"cannot exceed the model's {size:,.4g}B parameters "
                            "(model.params_b); give 0 for a dense model, whose parameters are all active",
                            value=active, allowed=f"0 to {size:,.4g}")


def _shape_rules(out: dict) -> None:
    """A dense model whose size and whole shape are both given must agree on its parameters.

    The FLOPs per token follow model.params_b (6N), the layout's matmuls the shape: a 7B shape called
    500B gave an MFU of 2,941%. The shape's count is formulas.dense_params (per layer q, o, k, v and the
    MLP, plus untied embeddings); the shipped configs sit within 1.31x of their published sizes (GPT-2 and
    Llama-3.2-1B tie their embeddings). Refused: a size over 1.5x what the shape holds, or under a third.
    """
    from costcore.engine.formulas import dense_params  # here: importing it loads numba, which `actuals` never needs
    m = out.get("model") or {}
    size, f, L, d = (float(m.get(k) or 0) for k in ("params_b", "ffn", "layers", "hidden"))
    active = float(m.get("active_params_b") or 0)
    if min(size, f, L, d) <= 0 or m.get("experts") or (0 < active < 0.95 * size):
        return
    heads = float(m.get("heads") or max(1.0, math.floor(d / 128.0 + 0.5)))
    kv = float(m.get("kv_heads") or heads)
    vocab = float(effective_value(out, "model.vocab"))
    mats = 3.0 if effective_value(out, "model.gated") else 2.0
    n_b = dense_params(L, d, d, kv * d / heads, f, vocab, mats) / 1e9

    def words(b):  # 6.74B, 2.51T
        return f"{b / 1000:.3g}T" if b >= 1000 else f"{b:.3g}B"
    if not n_b / SHAPE_SIZE_SLACK_BELOW <= size <= n_b * SHAPE_SIZE_TOLERANCE:
        raise ScenarioError("model.params_b", f"the shape given ({L:,.0f} layers of width {d:,.0f}, MLP {f:,.0f}, "
                            f"vocabulary {vocab:,.0f}) holds about {words(n_b)} parameters, not {words(size)}; give "
                            "a size that matches it, or leave out layers, hidden and ffn to have the shape derived "
                            "from the size", value=size,
                            allowed=f"{words(n_b / SHAPE_SIZE_SLACK_BELOW)} to {words(n_b * SHAPE_SIZE_TOLERANCE)}")


def _resolve_hf_config(out: dict) -> None:
    """Fill the model keys a ``model.hf_config`` gives (path or shipped name) that the scenario does not set."""
    model = out.get("model") or {}
    src = model.get("hf_config")
    if not src:
        return
    from costcore.scenario.hfconfig import read_hf_config
    shape = read_hf_config(src)  # ScenarioError (field model.hf_config) on a bad source
    for key, v in shape.items():
        path = "model." + key
        if key in model or path not in BY_PATH:
            continue
        f = BY_PATH[path]
        if f.kind == "bool":
            v = bool(v)
        elif f.kind == "float":
            v = round(float(v), 4)
        model[key] = _check_value(f, v)
    out["model"] = model


SHAPE_KEYS = ("layers", "hidden", "heads", "kv_heads", "ffn", "moe_ffn", "hf_config", "name")


def layers_for_size(layers: float, params_b: float, new_params_b):
    """Layers of a stated shape moved to another size by its depth alone (count; array or scalar).

    The width, heads and expert layout stay and the depth follows the size: a 70B of 80 x 8,192 at
    56B has 64 such layers. What a batch (sweep, heatmap, budget solver) or the tornado does with a
    size column on a scenario whose shape is stated: moved with the shape held, the layout would
    hold a 10B or a 500B in the 70B's 80 layers, and the size would barely move the cost (the
    step time is counted from the shape). The size slider instead takes the family table's shape
    (:func:`resize_model`); by depth, the current size keeps the current shape exactly.
    """
    out = np.maximum(1.0, np.round(layers * np.asarray(new_params_b, dtype=np.float64) / params_b))
    most = BY_PATH["model.layers"].hi
    if np.any(out > most):  # else a sweep evaluated 5,666 layers silently and an estimate blamed model.layers
        raise ScenarioError("model.params_b", f"the stated shape ({layers:,.0f} layers at {params_b:,.3g} billion "
                            f"parameters) follows the size by its depth, so a size above "
                            f"{largest_size_for_depth(layers, params_b):,.4g} billion parameters would need more "
                            f"than {most:,.0f} layers; state a wider shape for a larger model")
    return out


def largest_size_for_depth(layers: float, params_b: float) -> float:
    """The largest size (billion parameters) :func:`layers_for_size` can move a stated shape to: the one
    whose depth rounds to the schema's most layers (model.layers' maximum); any size without a stated
    shape (``layers`` 0) up to model.params_b's maximum."""
    if layers <= 0:
        return BY_PATH["model.params_b"].hi
    return min(BY_PATH["model.params_b"].hi, params_b * (BY_PATH["model.layers"].hi + 0.5) / layers)


def with_size(scn: dict, params_b: float) -> dict:
    """A copy of validated ``scn`` at ``params_b`` as a batch column of that size evaluates it: a stated
    shape's depth follows the size (:func:`layers_for_size`) and the active parameters keep their
    share of the total."""
    out = set_path(scn, "model.params_b", params_b)
    model = dict(out.get("model") or {})
    old = float(effective_value(scn, "model.params_b"))
    layers = float(effective_value(scn, "model.layers") or 0)
    if layers > 0:
        model["layers"] = int(layers_for_size(layers, old, params_b))
    if model.get("active_params_b"):
        model["active_params_b"] = min(float(model["active_params_b"]) * params_b / old, params_b)
    return dict(out, model=model)


def resize_model(scn: dict, params_b) -> dict:
    """A copy of ``scn`` whose model has ``params_b`` parameters and the shape of that size.

    The explicit shape (layers, hidden, heads, KV heads, FFN, expert width, vocabulary, a Hugging
    Face config or a shipped model's name) belongs to the old size, so it is dropped and the new
    one comes from the family table (:func:`_family_shape`: 8B is Llama-3.1-8B's 32 x 4096, 70B
    Llama-3.1-70B's 80 x 8192, vocabulary 128,256); a MoE's active parameters keep their share of
    the total. What the size slider does: without it a "7B" on a 70B preset kept the 70B's 80 x
    8192 shape.
    """
    model = {k: v for k, v in (scn.get("model") or {}).items() if k not in SHAPE_KEYS}
    old = float(effective_value(scn, "model.params_b"))
    if model.get("active_params_b") and old > 0 and _is_real(params_b):
        model["active_params_b"] = round(float(model["active_params_b"]) * float(params_b) / old, 4)
    model["params_b"] = params_b
    return _unpin_what_the_model_refuses(dict(scn, model=_family_shape(model)))


def refused_pins(pins: dict, heads: float, layers: float, experts: float, kv_heads: float = 0.0) -> list[str]:
    """The pinned degrees (``pins``: pp, tp, ep; 0 or absent = searched) a model of these heads, layers and experts
    cannot take, in that order: more pipeline stages than layers, a tensor degree that splits the attention
    heads or the key/value heads (engine.formulas.tp_splits_heads), an expert degree that does not divide the
    experts. Megatron-LM's argument checks refuse each. A count of 0 is unknown: nothing is refused for it. The
    one rule behind the feasibility sentence (engine/feasibility.py) and the unpinning of a new size
    (:func:`resize_model`)."""
    from costcore.engine.formulas import tp_splits_heads  # deferred: loads numba (tests/test_imports.py)
    limits = {"pp": (layers, lambda v, n: v > n), "tp": (heads, lambda v, n: tp_splits_heads(v, n, kv_heads)),
              "ep": (experts, lambda v, n: n % v != 0)}
    return [k for k, (n, bad) in limits.items()
            if _is_real(pins.get(k)) and pins[k] > 0 and n > 0 and bad(float(pins[k]), float(n))]


def _unpin_what_the_model_refuses(scn: dict) -> dict:
    """``scn`` (a new model's size or shape) without the stage layout pins the new model cannot take: a tensor
    degree that does not divide its attention heads, more pipeline stages than layers, an expert degree that
    does not divide its experts. The pins belonged to the old model as its shape did: the 70B preset's TP 8 on a
    5.6B shape's 28 heads made every stage infeasible as the size slider passed. Those stages search instead."""
    try:
        valid = validate(scn)
    except ScenarioError:  # validate says what is wrong where the scenario is used
        return scn
    heads, layers, experts, kv = (float(effective_value(valid, f"model.{k}") or 0)
                                  for k in ("heads", "layers", "experts", "kv_heads"))
    stages = dict(scn.get("stages") or {})
    for name, st in stages.items():
        if not isinstance(st, dict):
            continue
        drop = refused_pins({k: st.get(k) for k in ("pp", "tp", "ep")}, heads, layers, experts, kv)
        if drop:  # 0 = searched, stated (a link then says so, and reads back the same scenario)
            stages[name] = {k: (0 if k in drop else v) for k, v in st.items()}
    return dict(scn, stages=stages)


def size_alone(raw: dict, params_b) -> dict:
    """``raw`` with model.params_b set as the size slider sets it (pages/common.apply): a new size is a model of
    that size, its shape from the family table (resize_model), whatever shape ``raw`` states. A link or
    ``--set`` giving ``model.params_b=35`` on the 70B preset kept its 80 x 8,192 shape while the header said
    "35B model" (a size within the stated shape's range was not refused), so the link cost $37.9M where the
    slider's 35B cost $26.4M. The size ``raw`` already has keeps its stated shape; a model that states no shape
    takes the size alone (the core derives its shape); what is not a number is set as given, for validate to
    refuse in words."""
    model = raw.get("model") if isinstance(raw.get("model"), dict) else {}
    if any(k in model for k in SHAPE_KEYS) and isinstance(params_b, (int, float)) and not isinstance(params_b, bool) \
            and _is_real(params_b):
        try:
            now = float(effective_value(raw, "model.params_b"))
        except (TypeError, ValueError):
            now = math.nan
        if params_b != now:
            return resize_model(raw, params_b)
    return set_path(raw, "model.params_b", params_b)


def set_value(raw: dict, path: str, value, size_moves_shape: bool = True) -> dict:
    """``raw`` with one setting changed (not validated): a size goes through :func:`size_alone` when
    ``size_moves_shape`` (the caller changes none of the model's shape keys: SHAPE_LINK_KEYS), any other
    setting through :func:`set_path`. One rule for share links, ``--set`` and ``Scenario.with_value``."""
    if path == "model.params_b" and size_moves_shape:
        return size_alone(raw, value)
    if path == "model.name" and isinstance(value, str) and value and value != (raw.get("model") or {}).get("name"):
        # a shipped model brings its size and shape, as the picker does: a link's model.name=llama-2-70b on a 13B
        # preset was refused for the preset's 13B "active parameters" the user never gave
        return pick_model(raw, value)
    return set_path(raw, path, value)


SHAPE_LINK_KEYS = tuple(f"model.{k}" for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "name",
                                                "hf_config", "experts", "moe_ffn"))


def whole_shape(raw: dict) -> bool:
    """Whether the scenario states a dense model's whole shape (its FFN given or named)."""
    try:
        return bool(validate(raw).get("model", {}).get("ffn"))
    except ScenarioError:
        return False


def _family_shape(model: dict) -> dict:
    """The model's shape from the family table (hfconfig.family_shape: Llama-style dense anchors, or
    DeepSeek-style MoE) for its new size; outside the table's range the keys stay unset and the
    core derives the shape (formulas.model_shape). Keys of the family's: layers, hidden, heads,
    KV heads, MLP widths, vocabulary, gating, experts."""
    from costcore.scenario.hfconfig import family_shape
    size, active = model.get("params_b"), model.get("active_params_b") or 0.0
    moe = bool(model.get("experts")) or (_is_real(active) and _is_real(size) and 0 < active < size)
    node_limit = model.get("expert_node_limit")  # a MoE's routing policy, not its shape: it stays a MoE's
    for k in ("experts", "experts_active", "shared_experts", "expert_node_limit", "vocab", "gated", "sliding_window",
              "sliding_window_share"):
        model.pop(k, None)
    try:
        shape = family_shape(float(size), "moe" if moe else "dense", float(active) if moe else 0.0)
    except (ScenarioError, TypeError, ValueError):  # out of the table's range, or not a number (validate says so)
        return model
    out = _set_shape(model, shape, with_size=False)
    if moe and node_limit is not None:
        out["expert_node_limit"] = node_limit
    return out


MODEL_IDENTITY_KEYS = SHAPE_KEYS + ("params_b", "active_params_b", "vocab", "gated", "experts", "experts_active",
                                   "shared_experts", "expert_node_limit", "sliding_window", "sliding_window_share")


def pick_model(scn: dict, name: str) -> dict:
    """A copy of ``scn`` whose model is the shipped model ``name``: the old model's size and shape go,
    the config's come (through ``model.name`` when validated). ``name`` "" keeps the old size with
    the family table's shape for it (:func:`resize_model`)."""
    old = scn.get("model") or {}
    model = {k: v for k, v in old.items() if k not in MODEL_IDENTITY_KEYS}
    if name:
        model["name"] = name
        return _unpin_what_the_model_refuses(dict(scn, model=model))
    model["params_b"] = effective_value(scn, "model.params_b")
    return _unpin_what_the_model_refuses(dict(scn, model=_family_shape(model)))


def use_shape(scn: dict, shape: dict) -> dict:
    """A copy of ``scn`` whose model is ``shape`` (the keys hfconfig.parse_hf_config returns), set explicitly."""
    old = scn.get("model") or {}
    model = {k: v for k, v in old.items() if k not in MODEL_IDENTITY_KEYS}
    return dict(scn, model=_set_shape(model, shape, with_size=True))


def _set_shape(model: dict, shape: dict, with_size: bool) -> dict:
    """``model`` with the keys of ``shape`` (hfconfig's MODEL_KEYS) typed as the schema's fields; the
    size (params_b, active_params_b) too when ``with_size``, else it stays the caller's."""
    for key, v in shape.items():
        f = BY_PATH.get("model." + key)
        if f is None or (not with_size and key in ("params_b", "active_params_b")):
            continue
        model[key] = bool(v) if f.kind == "bool" else (round(float(v), 4) if f.kind == "float" else int(v))
    return model


def check_depth(data, limit: int = MAX_DEPTH, what: str = "scenario") -> None:
    """Refuse structures nested deeper than ``limit`` or holding themselves, without recursion."""
    stack = [(data, 1, frozenset())]
    while stack:
        obj, depth, above = stack.pop()
        if isinstance(obj, (dict, list, tuple)):
            if id(obj) in above:
                raise ScenarioError(what, "contains itself (a self-referencing mapping or list)")
            if depth > limit:
                raise ScenarioError(what, f"is nested more than {limit} levels deep")
            inner = above | {id(obj)}
            stack.extend((c, depth + 1, inner) for c in _children(obj))


def _children(obj):
    """The items of a dict, list or tuple read by the built-in methods, so a subclass's own
    ``__iter__``/``items``/``values`` (which may raise anything) never runs."""
    if isinstance(obj, dict):
        return dict.values(obj)
    return list(list.__iter__(obj)) if isinstance(obj, list) else list(tuple.__iter__(obj))


def _plain(obj):
    """A copy with every dict, list and tuple (subclasses included) as the plain built-in type.

    Called after :func:`check_depth`, so the recursion is at most ``MAX_DEPTH`` deep.
    """
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in dict.items(obj)}
    if isinstance(obj, (list, tuple)):
        items = [_plain(v) for v in _children(obj)]
        return items if isinstance(obj, list) else tuple(items)
    return obj


def _unflatten(flat: dict) -> dict:
    out: dict = {}
    for k, v in flat.items():
        parts = k.split(".")
        d = out
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = v
    return out


def iter_values(scn: dict, plan: bool = True):
    """Yield (dotted path, value) for every explicit setting of a validated scenario."""
    for section in list(_SCHEMA["sections"]) + (list(PLAN_SECTIONS) if plan else []):
        flat: dict = {}
        _flatten_keys(scn.get(section, {}) or {}, section + ".", flat)
        yield from flat.items()
    for sname, sdata in scn.get("stages", {}).items():
        for k, v in sdata.items():
            yield f"stages.{sname}.{k}", v


def to_vector(scn: dict) -> np.ndarray:
    """Flatten a *validated* scenario into the kernel's float64 vector."""
    x = DEFAULT_VECTOR.copy()
    gpu = (scn.get("hardware") or {}).get("gpu", BY_PATH["hardware.gpu"].default)
    for key in CATALOG_KEYS:
        x[IX["hardware." + key]] = float(CATALOG[gpu][key])
    enc = (scn.get("multimodal") or {}).get("encoder", BY_PATH["multimodal.encoder"].default)
    for key, table_key in ENCODER_KEYS.items():
        x[IX["multimodal." + key]] = float(ENCODERS[enc].get(table_key, 0))
    for sname, sdata in scn.get("stages", {}).items():
        x[IX[f"stages.{sname}.enabled"]] = 1.0
    for path, v in iter_values(scn, plan=False):
        x[IX[path]] = BY_PATH[path].encode(v)
    return x


THROUGHPUT_KEYS = ("mfu", "tokens_per_gpu_s", "tflops_per_gpu")


def uses_default_mfu(scn: dict, stage: str) -> bool:
    """True when a training stage takes its MFU from the default model (no MFU or throughput given)."""
    return stage != "eval" and not any(float(effective_value(scn, f"stages.{stage}.{k}")) > 0
                                       for k in THROUGHPUT_KEYS)


# A number written as text (--set, URL parameters): yamlio.NUMBER_TEXT, ASCII digits only, optional sign,
# decimal point and exponent. No "inf"/"nan", no "1_000", no "0x10", no Arabic-Indic or fullwidth digits
# (Python's float() accepts all of those). YAML files read their plain scalars by the same rule.


def parse_number_text(path: str, text: str):
    """The number ``text`` spells for the field at ``path``, or :class:`ScenarioError`.

    The one rule for numbers written as text (CLI ``--set`` and share links): :data:`NUMBER_TEXT`
    after stripping spaces, tabs and line ends. Whole numbers come back as ``int`` for integer
    fields; range checks are left to :func:`validate`.
    """
    f = BY_PATH.get(path)
    s = text.strip(" \t\r\n") if isinstance(text, str) else text
    if not isinstance(s, str) or not NUMBER_TEXT.fullmatch(s):
        what = f.allowed() if f is not None and f.kind in ("float", "int") else "a number"
        examples = "7 or 1e3" if f is not None and f.kind == "int" else "7, 0.5 or 3e-5"
        raise ScenarioError(path, f"must be {what}, written with the digits 0-9 such as {examples} "
                                  f"(got {_show(text)})")
    v = float(s)
    if f is not None and f.kind == "int" and math.isfinite(v) and v == int(v):
        return int(v)
    return v


def coerce_text(path: str, value):
    """A value for ``path`` with numbers written as text read by :func:`parse_number_text`.

    Text for a numeric field that is not a number by that rule raises :class:`ScenarioError`;
    other values are returned unchanged.
    """
    f = BY_PATH.get(path)
    if f is not None and f.kind in ("float", "int") and isinstance(value, str):
        return parse_number_text(path, value)
    return value


def validate_change(scn: dict, path: str, value) -> dict:
    """``validate(set_path(scn, path, value))`` for a scenario ``scn`` that :func:`validate` returned.

    A number of the multimodal block is checked as validate checks it, for less: its own range
    (``_check_value``) and :func:`multimodal_rules` (the only rules that read those numbers), on a
    copy that shares every section but the one changed. A sweep over media inputs checks each
    value this way (tests/test_multimodal.py compares it with the full validate). Any other path
    runs the full validate. Raises :class:`ScenarioError` as validate does.
    """
    f = BY_PATH.get(path)
    if f is None or not path.startswith("multimodal.") or f.kind not in ("int", "float"):
        return validate(set_path(scn, path, value))
    clean = _check_value(f, value)
    out = dict(scn)
    out["multimodal"] = dict(scn.get("multimodal") or {}, **{path.split(".", 1)[1]: clean})
    multimodal_rules(out, out)
    return out


def set_path(scn: dict, path: str, value) -> dict:
    """Return a copy of a scenario with one dotted path set (not validated)."""
    out = copy.deepcopy(scn)
    parts = path.split(".")
    d = out
    for p in parts[:-1]:
        nxt = d.get(p)
        if not isinstance(nxt, dict):
            nxt = {}
            d[p] = nxt
        d = nxt
    d[parts[-1]] = value
    return out


# The parallel layout of a stage: the plan keys the search decides unless pinned, less recompute and ZeRO
# (memory techniques the user chooses).
LAYOUT_KEYS = tuple(k for k in PLAN_ALIASES.values() if k not in ("recompute", "zero_stage"))


def pinned_layout(scn: dict, stage: str) -> dict:
    """The stage's pinned layout settings: key -> value for each of LAYOUT_KEYS set to other than searched."""
    sdata = (scn.get("stages") or {}).get(stage) or {}
    return {k: sdata[k] for k in LAYOUT_KEYS if k in sdata and sdata[k] not in (0, "auto", None)}


_LAYOUT_VALUE_WORDS = {"schedule": {"dualpipe": "DualPipe", "search": "1F1B or DualPipe, the faster"}}


def pinned_layout_words(scn: dict, stage: str) -> list[str]:
    """The stage's pinned layout in words, one phrase per setting: ["tensor parallelism 8"]."""
    return [f"{BY_PATH[f'stages.{stage}.{k}'].label.split(': ', 1)[1].lower()} "
            f"{_LAYOUT_VALUE_WORDS.get(k, {}).get(v, v)}" for k, v in pinned_layout(scn, stage).items()]


def without_layout_pins(scn: dict, stage: str) -> dict:
    """A validated copy of ``scn`` whose stage searches every parallel layout (LAYOUT_KEYS unpinned), so its
    ``min_gpus`` is the fewest GPUs over all plans rather than over the pinned ones."""
    stages = dict(scn.get("stages") or {})
    stages[stage] = {k: v for k, v in (stages.get(stage) or {}).items() if k not in LAYOUT_KEYS}
    return validate(dict(scn, stages=stages))


def get_path(scn: dict, path: str, default=None):
    """The value at a dotted path of a scenario (a dict, or a validated Scenario: its ``data``), else ``default``."""
    d: Any = scn if isinstance(scn, dict) else getattr(scn, "data", scn)
    for p in path.split("."):
        if not isinstance(d, dict) or p not in d:
            return default
        d = d[p]
    return d


def effective_value(scn: dict, path: str):
    """The value the core will use for a path: explicit, catalog or default."""
    v = get_path(scn, path)
    if v is not None:
        return v
    if path.startswith("hardware.") and path.split(".", 1)[1] in CATALOG_KEYS:
        gpu = get_path(scn, "hardware.gpu", BY_PATH["hardware.gpu"].default)
        return CATALOG[gpu][path.split(".", 1)[1]]
    if path.startswith("multimodal.") and path.split(".", 1)[1] in ENCODER_KEYS:
        enc = get_path(scn, "multimodal.encoder", BY_PATH["multimodal.encoder"].default)
        return ENCODERS[enc].get(ENCODER_KEYS[path.split(".", 1)[1]], 0)
    return BY_PATH[path].default


# ----------------------------------------------------------------------------
# The multimodal block and phases (issue 17): one plain sentence naming the field.
# ``multimodal.encoder`` given as a mapping of figures becomes the ``custom`` encoder plus those
# fields (as a custom GPU does for ``hardware.gpu``); a phase's ``train: [connector, llm, encoder]``
# list becomes its three ``train_*`` switches; the rules that need several fields at once are
# checked on the validated scenario with the kernel's own formulas (costcore.engine.formulas), so
# the message and the estimate count the same tokens. costcore.scenario.media re-exports them.
# ----------------------------------------------------------------------------

TRAIN_PARTS = ("connector", "llm", "encoder")
MEDIA_WORDS = {"image": "images", "video": "clips", "audio": "recordings"}  # what an item is called, plural
# multimodal.encoder as a mapping: its keys -> the multimodal fields they set.
CUSTOM_ENCODER_KEYS = {"name": "encoder_name", "params_b": "encoder_params_b", "layers": "encoder_layers",
                       "hidden": "encoder_hidden", "patch_px": "patch_px", "resolution_px": "resolution_px",
                       "max_resolution_px": "max_resolution_px", "tokens_per_item": "encoder_tokens",
                       "tokens_per_second": "audio_tokens_per_second", "max_seconds": "max_seconds"}
CUSTOM_ENCODER_REQUIRED = ("params_b",)


def custom_encoder(data: dict) -> dict:
    """``multimodal.encoder`` as a mapping -> encoder ``custom`` plus the fields its keys set.

    ``tokens_per_item`` of the mapping is the encoder's own output per image (or window), before
    the connector; keys also set directly in ``multimodal`` must agree.
    """
    mm = data.get("multimodal")
    if not isinstance(mm, dict) or not isinstance(mm.get("encoder"), dict):
        return data
    spec = mm["encoder"]
    out = _unfold_figures(mm, "multimodal", "encoder", CUSTOM_ENCODER_KEYS, "encoder")
    for k in CUSTOM_ENCODER_REQUIRED:
        if k not in spec:
            raise ScenarioError(f"multimodal.encoder.{k}", "a custom encoder needs its size in billions of "
                                "parameters (params_b), e.g. {params_b: 0.4, tokens_per_item: 729}")
    out["encoder"] = "custom"
    return dict(data, multimodal=out)


def with_train_list(sname: str, sdata: dict) -> dict:
    """A multimodal phase's ``train:`` list (connector, llm, encoder) unfolded into its three switches."""
    if sname not in MM_STAGES or "train" not in sdata:
        return sdata
    parts = sdata["train"]
    if isinstance(parts, str):
        parts = [parts]
    where = f"stages.{sname}.train"
    if not isinstance(parts, list) or not all(isinstance(p, str) and p in TRAIN_PARTS for p in parts):
        raise ScenarioError(where, "must be a list of what the phase trains, from: " + ", ".join(TRAIN_PARTS)
                            + f" (got {_show(sdata['train'])})", allowed="a list from " + ", ".join(TRAIN_PARTS))
    out = {k: v for k, v in sdata.items() if k != "train"}
    for part in TRAIN_PARTS:
        key = f"train_{part}"
        flag = part in parts
        if key in out and out[key] is not flag:
            raise ScenarioError(where, f"conflicts with stages.{sname}.{key}; set it in one place")
        out[key] = flag
    return out


def multimodal_rules(scn: dict, raw: dict) -> None:
    """The rules of the multimodal block and phases that need several fields (one sentence each)."""
    raw_mm = raw.get("multimodal") if isinstance(raw.get("multimodal"), dict) else {}
    if raw_mm.get("tokens_per_item", None) == 0 and not isinstance(raw_mm.get("tokens_per_item"), bool):
        raise ScenarioError("multimodal.tokens_per_item", "0 media tokens per item would give the language model "
                            "nothing to see; give 1 to 10,000,000 tokens, or leave it out to derive it from the "
                            "encoder", value=0, allowed="1 to 10,000,000, or unset")
    phases = [s for s in MM_STAGES if s in scn.get("stages", {})]
    if not phases and "multimodal" not in scn:
        return

    def ev(path):
        return effective_value(scn, path)

    modality, encoder = ev("multimodal.modality"), ev("multimodal.encoder")
    enc_kind = ENCODERS[encoder].get("modality", "image")
    label = ENCODERS[encoder].get("label", encoder)
    if encoder != "custom" and (enc_kind == "audio") != (modality == "audio"):
        want = "an audio encoder (a Whisper encoder)" if modality == "audio" else "an image encoder (CLIP, SigLIP ...)"
        raise ScenarioError("multimodal.encoder", f"{label} encodes {enc_kind}, but the media type is {modality}; "
                            f"pick {want} or change multimodal.modality", value=encoder)
    own = [(f"stages.{s}.resolution_px", float(ev(f"stages.{s}.resolution_px"))) for s in phases
           if float(ev(f"stages.{s}.resolution_px")) > 0]  # a phase's own resolution, where it states one
    if modality == "audio":
        said = [p for p, _ in own] + (["multimodal.resolution_px"] if "resolution_px" in (scn.get("multimodal") or {})
                                      else [])
        if said:
            raise ScenarioError(said[0], "applies to images and video, not to audio; set "
                                "multimodal.seconds_per_item for the clips' length")
    else:
        patch, top = float(ev("multimodal.patch_px")), float(ev("multimodal.max_resolution_px"))
        if patch > top:
            raise ScenarioError("multimodal.patch_px", f"a patch of {patch:,.0f} pixels is larger than the largest "
                                f"input {label} takes ({top:,.0f} pixels a side)", value=patch,
                                allowed=f"1 to {top:,.0f} pixels")
        for path, res in [("multimodal.resolution_px", float(ev("multimodal.resolution_px")))] + own:
            if res < patch or res > top:
                raise ScenarioError(path, f"{label} takes images from {patch:,.0f} to {top:,.0f} pixels a side "
                                    f"(got {res:,.0f}); use multimodal.tiles_per_item for more detail, or an "
                                    "encoder that takes larger inputs", value=res,
                                    allowed=f"{patch:,.0f} to {top:,.0f} pixels")
    _phase_rules(scn, phases, ev)


def phase_resolution(scn: dict, stage: str) -> float:
    """The input resolution a phase feeds its encoder (pixels a side): its own (stages.<phase>.resolution_px), else
    the multimodal block's. An evaluation takes the block's."""
    own = float(effective_value(scn, f"stages.{stage}.resolution_px") or 0) if stage in MM_STAGES else 0.0
    return own or float(effective_value(scn, "multimodal.resolution_px"))


def media_tokens(scn: dict, stage: str) -> tuple[float, float]:
    """(encoder tokens per pass, LLM tokens per item) of a phase, by the kernel's formulas."""
    import costcore.engine.formulas as fm  # deferred: plain functions of floats (tests/test_imports.py)

    def ev(path):
        v = effective_value(scn, path)
        f = BY_PATH[path]
        return float(f.choices.index(v)) if f.kind == "enum" else float(v)

    mod = ev("multimodal.modality")
    t_pass = fm.encoder_tokens_per_pass(mod, phase_resolution(scn, stage), ev("multimodal.patch_px"),
                                        ev("multimodal.encoder_tokens"), ev("multimodal.audio_tokens_per_second"),
                                        ev("multimodal.max_seconds"))
    passes = fm.encoder_passes_per_item(mod, ev("multimodal.tiles_per_item"), ev("multimodal.frames_per_item"),
                                        ev("multimodal.seconds_per_item"), ev("multimodal.max_seconds"))
    tok = ev(f"stages.{stage}.tokens_per_item") or ev("multimodal.tokens_per_item")
    if tok <= 0:
        tok = fm.media_tokens_per_item(mod, passes, t_pass, ev("multimodal.seconds_per_item"),
                                       ev("multimodal.max_seconds"), ev("multimodal.connector"),
                                       ev("multimodal.connector_queries"), ev("multimodal.token_compression"))
    return float(t_pass), float(tok)


def _phase_rules(scn: dict, phases: list, ev) -> None:
    modality = ev("multimodal.modality")
    words = MEDIA_WORDS[modality]
    for s in phases:
        if not any(ev(f"stages.{s}.train_{p}") for p in TRAIN_PARTS):
            raise ScenarioError(f"stages.{s}.train", "a phase that trains nothing has nothing to plan; train the "
                                "connector, the llm or the encoder", allowed="a list from " + ", ".join(TRAIN_PARTS))
        if ev(f"stages.{s}.train_encoder") and ev("multimodal.precomputed_features"):
            raise ScenarioError("multimodal.precomputed_features", f"{STAGE_LABELS[s]} trains the encoder, so its "
                                "features change every step and cannot be computed once; turn one of them off")
        t_pass, tok = media_tokens(scn, s)
        if t_pass <= 0 or tok <= 0:
            raise ScenarioError("multimodal.encoder_tokens", "the encoder gives 0 tokens per item with these "
                                "settings; set its tokens per item, or the audio tokens per second")
        items, text, seq = float(ev(f"stages.{s}.items_per_sample")), float(ev(f"stages.{s}.text_tokens_per_sample")), \
            float(ev(f"stages.{s}.seq_len"))
        need = text + items * tok
        if need > seq:
            raise ScenarioError(f"stages.{s}.items_per_sample",
                                f"{items:,.10g} {words if items != 1 else words[:-1]} x {tok:,.0f} tokens + {text:,.0f} text tokens = {need:,.0f} "
                                f"tokens, more than the sequence length of {seq:,.0f} (stages.{s}.seq_len); use fewer "
                                f"{words} per sample, fewer tokens per item or a longer sequence",
                                value=items, allowed=f"at most {math.floor(max(0.0, (seq - text) / tok) * 1000) / 1000:,.10g}")


def pick_encoder(scn: dict, name: str) -> dict:
    """A copy of ``scn`` whose encoder is the shipped encoder ``name``: the old encoder's figures and a
    custom name go (they belong to the old one), so the new one's come from encoders.yaml."""
    mm = {k: v for k, v in (scn.get("multimodal") or {}).items() if k not in ENCODER_KEYS and k != "encoder_name"}
    mm["encoder"] = name
    return dict(scn, multimodal=mm)
