"""A model's shape from a Hugging Face ``config.json``, a shipped config, or its size alone.

The planner describes a model by these keys (:data:`MODEL_KEYS`)::

    params_b, active_params_b, layers, hidden, heads, kv_heads, ffn, vocab,
    experts, experts_active, shared_experts, moe_ffn, gated

``params_b`` and ``active_params_b`` are in billions of parameters (floats); the rest are
whole numbers. ``gated`` is 1 for a three-matrix MLP (SwiGLU, GeGLU) and 0 for a two-matrix
one (GELU, ReLU); ``experts`` is 0 for a dense model; ``moe_ffn`` is the inner size of one
routed expert (0 for dense) and ``ffn`` the inner size of a dense layer's MLP. A parsed config also
gives :data:`ATTENTION_KEYS`: ``sliding_window``, the keys a windowed layer attends to (0: none), and
``sliding_window_share``, the fraction of layers windowed, and :data:`ROUTING_KEYS`: ``expert_node_limit``,
the most nodes a token's experts lie on (DeepSeek-V3's ``topk_group``; 0: no limit).

Public functions:

:func:`parse_hf_config`
    a ``config.json`` (text, bytes or a parsed mapping) -> the model keys, with the
    parameter count computed from the shape;
:func:`read_hf_config`
    a local file or directory, pasted JSON text, or a shipped config's name -> the same;
:func:`family_shape`
    a size (and family) -> a plausible shape, from ``costcore/data/model_families.yaml``;
:func:`shipped_configs`
    the configs under ``costcore/data/hf_configs/`` with their label and source;
:func:`shape_params`
    (total, active) parameters of a shape.

Nothing here reaches the network, and the module imports only the standard library (the
data files are YAML written in YAML's JSON subset, plus ``#`` comment lines, so ``json``
reads them). Every bad input raises :class:`~costcore.errors.ScenarioError` with one plain
sentence naming the key and the allowed range.
"""
from __future__ import annotations

import functools
import json
import math
import numbers
import os
import re
from pathlib import Path

from costcore.errors import ScenarioError

DATA = Path(__file__).resolve().parent.parent / "data"
CONFIG_DIR = DATA / "hf_configs"
FAMILIES_FILE = DATA / "model_families.yaml"

MODEL_KEYS = ("params_b", "active_params_b", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
              "experts", "experts_active", "shared_experts", "moe_ffn", "gated")
# How the layers attend, besides the shape: parse_hf_config returns these after MODEL_KEYS (0 and 1: no window).
ATTENTION_KEYS = ("sliding_window", "sliding_window_share")
# How a MoE routes across nodes: parse_hf_config returns it too (0: no limit; DeepSeek-V3's topk_group).
ROUTING_KEYS = ("expert_node_limit",)

MAX_TEXT = 1_000_000  # characters (text) or bytes (bytes, files); a real config.json is under 10 KB
MAX_DEPTH = 20        # nesting levels; real configs nest 3-4 (rope_scaling, text_config, vision_config)
MAX_NODES = 200_000   # values in a parsed mapping
PARAMS_RANGE_B = (0.01, 5000.0)  # the planner's model.params_b range (data/schema.yaml)

WHAT = "model.hf_config"


class _Refused(Exception):
    """Raised inside json.loads hooks; turned into a ScenarioError by the caller."""


# ----------------------------------------------------------------------------------------------
# Small helpers: how a value is shown, how a whole number is read
# ----------------------------------------------------------------------------------------------

def _shown(v) -> str:
    """A value as a message shows it: one printable line of at most 40 characters."""
    try:
        s = repr(v)
    except Exception:  # noqa: BLE001 - an int too long to print, or a foreign repr
        return type(v).__name__
    s = "".join(ch for ch in " ".join(s.split()) if ch.isprintable())
    return s if len(s) <= 40 else s[:37] + "..."


def _not_a_number(v) -> bool:
    """Bools (Python's and numpy's) and numpy's dates and durations are not numbers here."""
    return isinstance(v, bool) or type(v).__name__ in ("bool_", "timedelta64", "datetime64")


def _whole(v, key: str, what: str, lo: int, hi: int) -> int:
    """``v`` as an int in [lo, hi]: an integer (numpy's too) or an integral float; not a bool, text or NaN."""
    allowed = f"a whole number from {lo:,} to {hi:,}"
    if not _not_a_number(v) and not isinstance(v, (int, float)) and isinstance(v, numbers.Integral):
        try:
            v = int(v)
        except Exception:  # noqa: BLE001 - a foreign __int__ may raise anything
            pass
    if _not_a_number(v) or not isinstance(v, (int, float)):
        raise ScenarioError(what, f"{key} must be {allowed} (got {_shown(v)})", value=v, allowed=allowed)
    if isinstance(v, float):
        if not math.isfinite(v) or not v.is_integer():
            raise ScenarioError(what, f"{key} must be {allowed} (got {_shown(v)})", value=v, allowed=allowed)
    if not lo <= v <= hi:
        raise ScenarioError(what, f"{key} must be {allowed} (got {_shown(v)})", value=v, allowed=allowed)
    return int(v)


def _flag(v, key: str, what: str) -> bool:
    if not isinstance(v, bool):
        raise ScenarioError(what, f"{key} must be true or false (got {_shown(v)})", value=v,
                            allowed="true or false")
    return v


_REQUIRED = object()


def _get(cfg: dict, names: tuple, prefix: str, what: str, lo: int, hi: int, default=_REQUIRED,
         label: str = ""):
    """The first of ``names`` present (and not null) in ``cfg``, as a whole number in [lo, hi]."""
    for n in names:
        if cfg.get(n) is not None:
            return _whole(cfg[n], prefix + n, what, lo, hi)
    if default is _REQUIRED:
        also = f" (also read as {', '.join(names[1:])})" if len(names) > 1 else ""
        raise ScenarioError(what, f"{prefix}{names[0]} is missing: {label or 'it'} must be a whole number "
                                  f"from {lo:,} to {hi:,}{also}", allowed=f"a whole number from {lo:,} to {hi:,}")
    return default


# ----------------------------------------------------------------------------------------------
# Reading JSON safely
# ----------------------------------------------------------------------------------------------

def _constant(name):
    """NaN, Infinity and -Infinity read as floats, so that _walk refuses them by their key."""
    return float(name)


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _Refused(f"the key {_shown(k)} appears twice")
        out[k] = v
    return out


def _as_text(text, what: str) -> str:
    if isinstance(text, (bytes, bytearray, memoryview)):
        if len(text) > MAX_TEXT:
            raise ScenarioError(what, f"is {len(text):,} bytes, over the 1 MB limit (at most {MAX_TEXT:,} bytes)")
        try:
            return bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise ScenarioError(what, f"is not UTF-8 text (a bad byte at position {err.start:,})") from None
    if isinstance(text, str):
        if len(text) > MAX_TEXT:
            raise ScenarioError(what, f"is {len(text):,} characters, over the 1 MB limit "
                                      f"(at most {MAX_TEXT:,} characters)")
        return text[1:] if text.startswith("\ufeff") else text
    raise ScenarioError(what, "must be the text of a config.json, its bytes, or a mapping "
                              f"(got {type(text).__name__})")


# json's messages in words (the parser's own read "Expecting property name enclosed in double quotes")
_JSON_WORDS = {"Expecting property name enclosed in double quotes": "needs a key in double quotes (or has a comma too many)",
               "Expecting value": "needs a value there (a number, text in double quotes, true, false, null, [ or {)",
               "Expecting ',' delimiter": "needs a comma between two entries",
               "Expecting ':' delimiter": "needs a colon after the key",
               "Unterminated string starting at": "has text whose closing double quote is missing",
               "Invalid control character at": "has a line break or tab inside text in double quotes",
               "Invalid \\escape": "has a backslash that starts no known escape",
               "Extra data": "has more after the end of the JSON object"}


def _loads(text: str, what: str):
    """``json.loads`` refusing duplicate keys, huge numbers and deep nesting (NaN is _walk's)."""
    try:
        return json.loads(text, parse_constant=_constant, object_pairs_hook=_no_duplicates)
    except _Refused as err:
        raise ScenarioError(what, f"is refused: {err}") from None
    except json.JSONDecodeError as err:
        said = _JSON_WORDS.get(err.msg, "has a syntax error")
        raise ScenarioError(what, f"is not valid JSON: line {err.lineno}, column {err.colno} {said}") from None
    except RecursionError:
        raise ScenarioError(what, f"nests deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # an integer literal of more than 4,300 digits
        raise ScenarioError(what, "holds a number too long to read") from None


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]{1,40}")


def _key_path(path: tuple) -> str:
    """A key path as messages show it: plain keys as they are, any other key by its safe repr."""
    parts = [p if isinstance(p, str) and _PLAIN_KEY.fullmatch(p) else f"[{p}]" if type(p) is int else _shown(p)
             for p in path[:6]]
    return (".".join(parts).replace(".[", "[") + ("..." if len(path) > 6 else "")) or "the top level"


def _walk(obj, what: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH, non-finite floats and more than MAX_NODES values."""
    stack = [(obj, ())]
    seen = 0
    while stack:
        v, path = stack.pop()
        seen += 1
        if seen > MAX_NODES:
            raise ScenarioError(what, f"holds more than {MAX_NODES:,} values")
        if isinstance(v, float) and not math.isfinite(v):
            raise ScenarioError(what, f"{_key_path(path)} must be a finite number (got {_shown(v)})", value=v)
        if isinstance(v, (dict, list, tuple)):
            if len(path) >= MAX_DEPTH:
                raise ScenarioError(what, f"{_key_path(path[:3])}... nests deeper than {MAX_DEPTH} levels")
            items = dict.items(v) if isinstance(v, dict) else enumerate(v)
            stack.extend((child, path + (k,)) for k, child in items)


def _load_config(text, what: str) -> dict:
    if isinstance(text, dict):
        cfg = text
    else:
        cfg = _loads(_as_text(text, what), what)
    if not isinstance(cfg, dict):
        raise ScenarioError(what, f"must be a JSON object ({{...}}), not {_json_kind(cfg)}")
    _walk(cfg, what)
    return cfg


def _json_kind(v) -> str:
    return {list: "a list", str: "text", bool: "true/false", type(None): "null",
            int: "a number", float: "a number"}.get(type(v), type(v).__name__)


# ----------------------------------------------------------------------------------------------
# Architecture facts by model_type (transformers' modeling_<type>.py)
# ----------------------------------------------------------------------------------------------

# Three-matrix MLPs (gate, up, down): SwiGLU (Llama, Mistral, Qwen, DeepSeek, Phi-3) or GeGLU (Gemma).
GATED_TYPES = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_vl", "qwen2_5_vl",
    "deepseek_v2", "deepseek_v3", "gemma", "gemma2", "gemma3", "gemma3_text", "phi3", "olmo", "olmo2",
    "olmoe", "cohere", "cohere2", "granite", "granitemoe", "internlm2", "exaone"})
# Two-matrix MLPs (up, down) with GELU or ReLU.
UNGATED_TYPES = frozenset({"gpt2", "gpt_neox", "gptj", "gpt_neo", "opt", "falcon", "refinedweb",
                           "refinedwebmodel", "bloom", "gpt_bigcode", "phi", "mpt", "starcoder2"})
# LayerNorm with a bias (2 vectors per norm) instead of RMSNorm (1 vector).
LAYERNORM_TYPES = frozenset({"gpt2", "gpt_neox", "gptj", "gpt_neo", "opt", "falcon", "refinedweb",
                             "refinedwebmodel", "bloom", "gpt_bigcode", "phi", "starcoder2"})
# Bias vectors on every linear layer (attention and MLP).
ALL_BIAS_TYPES = frozenset({"gpt2", "gpt_neox", "opt", "bloom", "gpt_bigcode", "phi", "starcoder2"})
# Bias on the q, k and v projections only (Qwen2 family).
QKV_BIAS_TYPES = frozenset({"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"})
# RMSNorm over each head of q and k (Qwen3, Gemma-3): 2 x head_dim per layer.
QK_NORM_TYPES = frozenset({"qwen3", "qwen3_moe", "gemma3", "gemma3_text"})
# Learned absolute position embeddings (OPT's table has 2 extra rows).
LEARNED_POSITION_TYPES = {"gpt2": 0, "gpt_bigcode": 0, "gpt_neo": 0, "opt": 2}
# Types whose config class defaults to tie_word_embeddings=True when the key is absent.
TIED_DEFAULT_TYPES = frozenset({"gemma", "gemma2", "gemma3", "gemma3_text", "gpt2", "gpt_bigcode", "gpt_neo",
                                "opt", "falcon", "refinedweb", "refinedwebmodel", "bloom", "mpt"})
# Norms per layer: Gemma-2/3 add post-attention and post-MLP norms; parallel-attention blocks share one.
FOUR_NORM_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text"})
ONE_NORM_TYPES = frozenset({"gptj", "phi"})

LANGUAGE_PARTS = ("text_config", "language_config", "llm_config")  # multimodal wrappers (Llava, Qwen2-VL, ...)

N_LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
N_HIDDEN = ("hidden_size", "n_embd", "d_model")
N_HEADS = ("num_attention_heads", "n_head", "num_heads", "n_heads")
N_KV = ("num_key_value_heads", "num_kv_heads", "n_head_kv")
N_FFN = ("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size")
N_VOCAB = ("vocab_size", "padded_vocab_size", "n_vocab")
N_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
N_TOPK = ("num_experts_per_tok", "num_experts_per_token", "moe_top_k")
N_ACT = ("hidden_act", "hidden_activation", "activation_function")


def _model_type(cfg: dict) -> str:
    t = cfg.get("model_type")
    if isinstance(t, str):
        return t.strip().lower()
    arch = cfg.get("architectures")
    if isinstance(arch, list) and arch and isinstance(arch[0], str):
        a = arch[0].lower()
        for name, typ in (("llama", "llama"), ("mistral", "mistral"), ("mixtral", "mixtral"),
                          ("qwen2moe", "qwen2_moe"), ("qwen3moe", "qwen3_moe"), ("qwen3", "qwen3"),
                          ("qwen2", "qwen2"), ("gemma2", "gemma2"), ("gemma", "gemma"), ("phi3", "phi3")):
            if a.startswith(name):
                return typ
    return ""


def _language_part(cfg: dict) -> tuple[dict, str]:
    """The language model's part of a config and the key prefix errors name it with."""
    if any(cfg.get(n) is not None for n in N_HIDDEN):
        for name in LANGUAGE_PARTS:  # a wrapper whose text_config carries the shape wins
            sub = cfg.get(name)
            if isinstance(sub, dict) and any(sub.get(n) is not None for n in N_HIDDEN):
                return sub, name + "."
        return cfg, ""
    for name in LANGUAGE_PARTS:
        if isinstance(cfg.get(name), dict):
            return cfg[name], name + "."
    return cfg, ""


# ----------------------------------------------------------------------------------------------
# config.json -> the full shape (the model keys plus the details the count needs)
# ----------------------------------------------------------------------------------------------

def _core(cfg: dict, pre: str, what: str) -> dict:
    """Layers, widths, heads and vocabulary, under any of their spellings."""
    layers = _get(cfg, N_LAYERS, pre, what, 1, 1000, label="the layer count")
    hidden = _get(cfg, N_HIDDEN, pre, what, 8, 100_000, label="the hidden size")
    heads = _get(cfg, N_HEADS, pre, what, 1, min(1024, hidden), label="the attention head count")
    if cfg.get("multi_query") is not None and _flag(cfg["multi_query"], pre + "multi_query", what) \
            and all(cfg.get(n) is None for n in N_KV):
        kv = 1
    else:
        kv = _get(cfg, N_KV, pre, what, 1, heads, default=heads, label="the key/value head count")
    head_dim = _get(cfg, ("head_dim",), pre, what, 1, 4096, default=0) or hidden / heads
    vocab = _get(cfg, N_VOCAB, pre, what, 1000, 1_000_000, label="the vocabulary size")
    ffn = _get(cfg, N_FFN, pre, what, 1, 500_000, default=4 * hidden)
    return {"layers": layers, "hidden": hidden, "heads": heads, "kv_heads": kv, "head_dim": head_dim,
            "vocab": vocab, "ffn": ffn}


def _moe_layer_count(cfg: dict, pre: str, what: str, layers: int) -> int:
    """How many layers hold experts: DeepSeek's first_k_dense_replace/moe_layer_freq, or Qwen-MoE's
    decoder_sparse_step/mlp_only_layers (modeling_deepseek_v3.py, modeling_qwen2_moe.py)."""
    first = _get(cfg, ("first_k_dense_replace",), pre, what, 0, layers, default=0)
    freq = _get(cfg, ("moe_layer_freq",), pre, what, 1, layers, default=1)
    step = _get(cfg, ("decoder_sparse_step",), pre, what, 1, layers, default=1)
    only = cfg.get("mlp_only_layers")
    if only is None:
        only = []
    if not isinstance(only, list) or len(only) > layers:
        raise ScenarioError(what, f"{pre}mlp_only_layers must be a list of at most {layers:,} layer numbers "
                                  f"(got {_shown(only)})")
    dense = {_whole(i, f"{pre}mlp_only_layers[{j}]", what, 0, layers - 1) for j, i in enumerate(only)}
    return sum(1 for i in range(layers)
               if i >= first and i % freq == 0 and (i + 1) % step == 0 and i not in dense)


def _moe(cfg: dict, pre: str, what: str, core: dict) -> dict:
    """Routed and shared experts (Mixtral, Qwen-MoE, Qwen3-MoE, DeepSeek-V2/V3 spellings)."""
    experts = _get(cfg, N_EXPERTS, pre, what, 0, 4096, default=0)
    if experts < 2:
        return {"experts": 0, "experts_active": 0, "shared_experts": 0, "moe_ffn": 0}
    top = _get(cfg, N_TOPK, pre, what, 1, experts, label="the experts used per token")
    moe_ffn = _get(cfg, ("moe_intermediate_size",), pre, what, 1, 500_000, default=core["ffn"])
    n_shared = _get(cfg, ("n_shared_experts", "num_shared_experts"), pre, what, 0, 256, default=0)
    shared_ffn = _get(cfg, ("shared_expert_intermediate_size",), pre, what, 0, 2_000_000,
                      default=n_shared * moe_ffn)
    if shared_ffn and not n_shared:
        n_shared = max(1, round(shared_ffn / moe_ffn))
    out = {"experts": experts, "experts_active": top, "shared_experts": n_shared, "moe_ffn": moe_ffn,
           "shared_ffn": shared_ffn, "moe_layers": _moe_layer_count(cfg, pre, what, core["layers"])}
    groups = _get(cfg, ("n_group",), pre, what, 0, 4096, default=0)
    if groups > 1:  # group-limited routing (DeepSeek-V3: 8 groups, one per node, top-4 of them per token)
        out["expert_node_limit"] = _get(cfg, ("topk_group",), pre, what, 1, groups, default=groups)
    if shared_ffn and "shared_expert_intermediate_size" in cfg:
        out["shared_gate"] = 1  # Qwen-MoE's sigmoid gate on the shared expert: hidden x 1
    return out


def _mla(cfg: dict, pre: str, what: str) -> dict:
    """Multi-head latent attention (DeepSeek-V2/V3; arXiv:2405.04434 Sec. 2.1): low-rank q and kv."""
    if cfg.get("kv_lora_rank") is None:
        return {}
    return {"kv_lora_rank": _get(cfg, ("kv_lora_rank",), pre, what, 1, 100_000),
            "q_lora_rank": _get(cfg, ("q_lora_rank",), pre, what, 1, 100_000, default=0),
            "qk_rope_head_dim": _get(cfg, ("qk_rope_head_dim",), pre, what, 1, 4096, label="the rope head size"),
            "qk_nope_head_dim": _get(cfg, ("qk_nope_head_dim",), pre, what, 0, 4096, label="the nope head size"),
            "v_head_dim": _get(cfg, ("v_head_dim",), pre, what, 1, 4096, label="the value head size")}


def _activation(cfg: dict, pre: str, what: str) -> str:
    for n in N_ACT:
        v = cfg.get(n)
        if v is not None:
            if not isinstance(v, str) or len(v) > 100:
                raise ScenarioError(what, f"{pre}{n} must be the name of an activation such as \"silu\" "
                                          f"(got {_shown(v)})")
            return v.strip().lower()
    return ""


def _style(cfg: dict, pre: str, what: str, typ: str) -> dict:
    """Gating, tying, biases, norms and position tables: what the key list does not say."""
    act = _activation(cfg, pre, what)
    gated = 1 if typ in GATED_TYPES else 0 if typ in UNGATED_TYPES else \
        int("glu" in act or act in ("silu", "swish", ""))
    tie = cfg.get("tie_word_embeddings")
    tie = typ in TIED_DEFAULT_TYPES if tie is None else _flag(tie, pre + "tie_word_embeddings", what)
    flags = {}
    for n in ("attention_bias", "mlp_bias", "bias", "new_decoder_architecture", "parallel_attn",
              "do_layer_norm_before"):
        if cfg.get(n) is not None:
            flags[n] = _flag(cfg[n], pre + n, what)
    every = typ in ALL_BIAS_TYPES or flags.get("bias", False)
    norms = 4 if typ in FOUR_NORM_TYPES else 1 if typ in ONE_NORM_TYPES else 2
    if typ in ("falcon", "refinedweb", "refinedwebmodel") and not flags.get("new_decoder_architecture") \
            and flags.get("parallel_attn", True):
        norms = 1  # Falcon-7B: one input_layernorm feeds attention and MLP in parallel
    out = {"gated": gated, "tie_embeddings": int(tie), "norms_per_layer": norms,
           "norm_bias": int(typ in LAYERNORM_TYPES),
           "qkv_bias": int(every or typ in QKV_BIAS_TYPES or flags.get("attention_bias", False)),
           "o_bias": int(every or flags.get("attention_bias", False)),
           "mlp_bias": int(every or flags.get("mlp_bias", False)),
           "qk_norm": int(typ in QK_NORM_TYPES),
           "final_norm": int(flags.get("do_layer_norm_before", True))}
    if typ in LEARNED_POSITION_TYPES:
        out["positions"] = LEARNED_POSITION_TYPES[typ] + _get(
            cfg, ("n_positions", "max_position_embeddings"), pre, what, 1, 10_000_000, default=0)
    if typ == "opt":
        out["embed_dim"] = _get(cfg, ("word_embed_proj_dim",), pre, what, 1, 100_000, default=0)
    return out


# Model types that are not transformers of the shape above (state-space, recurrent, encoder-decoder
# or diffusion models): the planner cannot count their FLOPs or memory, and says so by name.
UNMODELLED_TYPES = frozenset({"mamba", "mamba2", "rwkv", "rwkv5", "rwkv6", "jamba", "recurrent_gemma", "xlstm",
                              "t5", "mt5", "bart", "mbart", "whisper", "bert", "roberta", "deberta", "deberta-v2",
                              "electra", "marian", "pegasus", "vit", "clip", "siglip", "dinov2", "unet"})


def _full_shape(cfg: dict, what: str) -> dict:
    part, pre = _language_part(cfg)
    typ = _model_type(part) or _model_type(cfg)
    if typ in UNMODELLED_TYPES:
        raise ScenarioError(what, f"model_type {_shown(typ)} is not a decoder-only transformer the planner can "
                            "model (state-space, recurrent, encoder-decoder and encoder-only models are not). "
                            "Pick a shipped model of its size, or choose 'Any size' and set the size in the sidebar",
                            value=typ, allowed="a decoder-only transformer config")
    shape = _core(part, pre, what)
    shape.update(_moe(part, pre, what, shape))
    shape.update(_mla(part, pre, what))
    shape.update(_style(part, pre, what, typ))
    shape.update(_window(part, pre, what, typ))
    return shape


# Models whose config gives a sliding window but no per-layer list: the share of windowed layers by
# model_type (Gemma 2 alternates local and global layers, transformers modeling_gemma2.py).
WINDOW_SHARE_BY_TYPE = {"gemma2": 0.5}


def _window(cfg: dict, pre: str, what: str, typ: str) -> dict:
    """Sliding-window attention: ``sliding_window`` (keys per query) and the share of layers using it.

    The share comes from ``layer_types`` (its "sliding_attention" entries; Olmo 3, GPT-OSS, newer
    Gemma and Qwen configs), else ``sliding_window_pattern`` (Gemma 3: every n-th layer global), else the
    model type (Gemma 2: every other layer), else every layer (Mistral 7B v0.1). ``use_sliding_window``
    false (Qwen2/2.5, whose configs carry a window they do not use) or a null window: none.
    """
    w = cfg.get("sliding_window")
    if w is None or cfg.get("use_sliding_window") is False:
        return {}
    w = _whole(w, pre + "sliding_window", what, 0, 10_000_000)
    if w <= 0:
        return {}
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list) and kinds:
        if not all(isinstance(k, str) for k in kinds) or len(kinds) > 100_000:
            raise ScenarioError(what, f"{pre}layer_types must be a list of layer kinds such as "
                                      "\"sliding_attention\" and \"full_attention\"", allowed="a list of strings")
        share = sum(k == "sliding_attention" for k in kinds) / len(kinds)
    elif cfg.get("sliding_window_pattern") is not None:
        n = _whole(cfg["sliding_window_pattern"], pre + "sliding_window_pattern", what, 1, 1000)
        share = (n - 1) / n
    else:
        share = WINDOW_SHARE_BY_TYPE.get(typ, 1.0)
    return {"sliding_window": w, "sliding_window_share": round(share, 4)} if share > 0 else {}


# ----------------------------------------------------------------------------------------------
# Counting parameters
# ----------------------------------------------------------------------------------------------

# (key, lowest, highest, default) of the whole-number keys shape_params reads; None = required.
_SHAPE_KEYS = (
    ("layers", 1, 1000, None), ("hidden", 1, 100_000, None), ("vocab", 1, 1_000_000, None),
    ("heads", 0, 1024, 0), ("kv_heads", 0, 1024, 0), ("ffn", 0, 500_000, 0), ("gated", 0, 1, 1),
    ("experts", 0, 4096, 0), ("experts_active", 0, 4096, 0), ("shared_experts", 0, 256, 0),
    ("moe_ffn", 0, 500_000, 0),
    # details a config.json gives and the key list does not (see shape_params)
    ("shared_ffn", 0, 2_000_000, -1), ("moe_layers", 0, 1000, -1), ("shared_gate", 0, 1, 0),
    ("tie_embeddings", 0, 1, 0), ("embed_dim", 0, 100_000, 0), ("positions", 0, 10_000_000, 0),
    ("norms_per_layer", 0, 8, 2), ("norm_bias", 0, 1, 0), ("final_norm", 0, 1, 1),
    ("qkv_bias", 0, 1, 0), ("o_bias", 0, 1, 0), ("mlp_bias", 0, 1, 0), ("qk_norm", 0, 1, 0),
    ("q_lora_rank", 0, 100_000, 0), ("kv_lora_rank", 0, 100_000, 0), ("qk_rope_head_dim", 0, 4096, 0),
    ("qk_nope_head_dim", 0, 4096, 0), ("v_head_dim", 0, 4096, 0),
)


def _read_shape(shape, what: str) -> dict:
    if not isinstance(shape, dict):
        raise ScenarioError(what, f"must be a mapping of model keys (got {type(shape).__name__})")
    s = {}
    for key, lo, hi, default in _SHAPE_KEYS:
        v = shape.get(key)
        if v is None:
            if default is None:
                raise ScenarioError(what, f"{key} is missing: it must be a whole number from {lo:,} to {hi:,}")
            s[key] = default
        else:
            s[key] = _whole(v, key, what, lo, hi)
    hd = shape.get("head_dim")
    if hd is not None and (isinstance(hd, bool) or not isinstance(hd, (int, float))
                           or not math.isfinite(hd) or not 0 < hd <= 4096):
        raise ScenarioError(what, f"head_dim must be a number from 1 to 4,096 (got {_shown(hd)})", value=hd)
    s["heads"] = s["heads"] or max(1, s["hidden"] // 128)      # schema: 0 = d/128
    s["kv_heads"] = s["kv_heads"] or s["heads"]                  # schema: 0 = heads
    if s["kv_heads"] > s["heads"]:
        raise ScenarioError(what, f"kv_heads must be a whole number from 0 to heads ({s['heads']:,}) "
                                  f"(got {s['kv_heads']:,})", value=s["kv_heads"])
    s["ffn"] = s["ffn"] or 4 * s["hidden"]                       # schema: 0 = 4 d
    s["head_dim"] = float(hd) if hd else s["hidden"] / s["heads"]
    if s["experts"]:
        if not 1 <= s["experts_active"] <= s["experts"]:
            raise ScenarioError(what, f"experts_active must be a whole number from 1 to experts "
                                      f"({s['experts']:,}) (got {_shown(shape.get('experts_active'))})")
        s["moe_ffn"] = s["moe_ffn"] or s["ffn"]
        s["moe_layers"] = s["layers"] if s["moe_layers"] < 0 else min(s["moe_layers"], s["layers"])
        if s["shared_ffn"] < 0:
            s["shared_ffn"] = s["shared_experts"] * s["moe_ffn"]
    else:
        s["moe_layers"], s["shared_ffn"] = 0, 0
    return s


def _attention(s: dict) -> float:
    """Attention weights of one layer: q, k, v, o (GQA: k and v have kv_heads heads) or MLA."""
    h, heads = s["hidden"], s["heads"]
    if s["kv_lora_rank"]:  # DeepSeek-V2/V3 (modeling_deepseek_v3.py DeepseekV3Attention)
        qk = s["qk_nope_head_dim"] + s["qk_rope_head_dim"]
        qr, kvr = s["q_lora_rank"], s["kv_lora_rank"]
        q = (h * qr + qr + qr * heads * qk) if qr else h * heads * qk
        kv = h * (kvr + s["qk_rope_head_dim"]) + kvr + kvr * heads * (s["qk_nope_head_dim"] + s["v_head_dim"])
        return q + kv + heads * s["v_head_dim"] * h
    hd, kvh = s["head_dim"], s["kv_heads"]
    n = 2 * h * heads * hd + 2 * h * kvh * hd
    if s["qkv_bias"]:
        n += heads * hd + 2 * kvh * hd
    if s["o_bias"]:
        n += h
    if s["qk_norm"]:
        n += 2 * hd
    return n


def _mlp(s: dict, width: float) -> float:
    """One MLP of inner size ``width``: gate, up, down (gated) or up, down, with optional biases."""
    h = s["hidden"]
    n = (3 if s["gated"] else 2) * h * width
    if s["mlp_bias"] and width:
        n += (2 if s["gated"] else 1) * width + h
    return n


def _counts(s: dict) -> tuple[float, float]:
    h, layers = s["hidden"], s["layers"]
    e = s["embed_dim"] or h
    embed = s["vocab"] * e * (1 if s["tie_embeddings"] else 2) + (2 * e * h if e != h else 0)
    embed += s["positions"] * h
    norm = h * (2 if s["norm_bias"] else 1)
    common = embed + s["final_norm"] * norm + layers * (_attention(s) + s["norms_per_layer"] * norm)
    dense = (layers - s["moe_layers"]) * _mlp(s, s["ffn"])
    if not s["moe_layers"]:
        return common + dense, common + dense
    router = s["experts"] * h + (h if s["shared_gate"] and s["shared_ffn"] else 0)
    shared = _mlp(s, s["shared_ffn"])
    expert = _mlp(s, s["moe_ffn"])
    total = common + dense + s["moe_layers"] * (router + shared + s["experts"] * expert)
    active = common + dense + s["moe_layers"] * (router + shared + s["experts_active"] * expert)
    return total, active


def shape_params(shape: dict) -> tuple[float, float]:
    """Total and active parameters of a model shape, in billions.

    Parameters
    ----------
    shape : dict
        The model keys (:data:`MODEL_KEYS`; ``params_b`` and ``active_params_b`` are ignored).
        ``layers``, ``hidden`` and ``vocab`` are required; as in ``data/schema.yaml``,
        ``heads`` 0 means hidden/128, ``kv_heads`` 0 means ``heads`` and ``ffn`` 0 means
        4 x hidden; ``gated`` defaults to 1. Optional details refine the count (the parser
        sets them from a config.json): ``head_dim`` (default hidden/heads),
        ``tie_embeddings`` (0/1, default 0: a separate LM head), ``embed_dim`` (OPT's
        word_embed_proj_dim), ``positions`` (rows of a learned position table),
        ``norms_per_layer`` (default 2), ``norm_bias`` (LayerNorm), ``final_norm``,
        ``qkv_bias``/``o_bias``/``mlp_bias``, ``qk_norm``, ``moe_layers`` (layers holding
        experts; default all of them), ``shared_ffn`` (total inner size of the shared
        experts; default shared_experts x moe_ffn), ``shared_gate`` and the MLA ranks
        ``q_lora_rank``, ``kv_lora_rank``, ``qk_rope_head_dim``, ``qk_nope_head_dim``,
        ``v_head_dim``.

    Returns
    -------
    (total_b, active_b) : tuple of float
        Billions of parameters: all weights, and the weights one token passes through (the
        shared parts plus ``experts_active`` routed and all shared experts of each MoE
        layer; equal to the total for a dense model).

    Raises
    ------
    ScenarioError
        A missing required key, or a value that is not a whole number in its range.

    Notes
    -----
    Embeddings V x d (plus V x d for an untied LM head), per layer attention
    2 d (a h_d) + 2 d (g h_d) for a query heads and g key/value heads (GQA, Ainslie et al.
    2023) or the MLA projections (DeepSeek-V2, arXiv:2405.04434 Sec. 2.1), an MLP of
    3 d f (SwiGLU, Shazeer 2020) or 2 d f, a router of E x d and E experts of 3 d f_e on MoE
    layers (Mixtral, arXiv:2401.04088; DeepSeekMoE, arXiv:2401.06066), and d per RMSNorm
    (2 d per LayerNorm). The layouts are those of transformers' ``modeling_<type>.py``; the
    count matches the published sizes of the shipped configs to within 3% (tests).
    """
    s = _read_shape(shape, "shape")
    total, active = _counts(s)
    return total / 1e9, active / 1e9


# ----------------------------------------------------------------------------------------------
# Public: parse, read, shipped configs
# ----------------------------------------------------------------------------------------------

def _model_keys(full: dict, total_b: float, active_b: float) -> dict:
    out = {"params_b": round(total_b, 4), "active_params_b": round(active_b, 4)}
    for k in MODEL_KEYS[2:]:
        out[k] = int(full.get(k, 0))
    out["sliding_window"] = int(full.get("sliding_window", 0))
    out["sliding_window_share"] = float(full.get("sliding_window_share", 1.0))  # of layers; 1 when no window
    out["expert_node_limit"] = int(full.get("expert_node_limit", 0))
    return out


def parse_hf_config(text: str | bytes | dict, what: str = WHAT) -> dict:
    """The planner's model keys from a Hugging Face ``config.json``.

    Parameters
    ----------
    text : str, bytes or dict
        The file's text (at most 1 MB), its UTF-8 bytes, or the already parsed object.
        Read under the spellings of Llama 1-3, Mistral, Mixtral (``num_local_experts``,
        ``num_experts_per_tok``), Qwen2/2.5/3 and Qwen-MoE (``num_experts``,
        ``moe_intermediate_size``, ``shared_expert_intermediate_size``), DeepSeek-V2/V3
        (``n_routed_experts``, ``n_shared_experts``, ``first_k_dense_replace``,
        ``moe_layer_freq`` and the MLA ranks), Gemma/Gemma-2 (``head_dim``), Phi-3, GPT-2
        (``n_layer``, ``n_embd``, ``n_head``, ``n_inner``), GPT-NeoX, Falcon (``multi_query``,
        ``num_kv_heads``) and OPT (``ffn_dim``, ``word_embed_proj_dim``). A multimodal
        wrapper's ``text_config`` (Llava, Qwen2-VL) is read for the language model.
    what : str
        The field name error messages start with.

    Returns
    -------
    dict
        :data:`MODEL_KEYS`: ``params_b`` and ``active_params_b`` in billions of parameters,
        counted from the shape by :func:`shape_params` (embeddings, untied LM head,
        attention with GQA or MLA, MLP or experts, norms); the rest whole numbers. For MoE
        models ``ffn`` is the config's ``intermediate_size`` (the dense layers' MLP; for
        Mixtral the expert size), and ``heads``/``kv_heads`` are the config's even for MLA.

    Raises
    ------
    ScenarioError
        Text that is not JSON or over 1 MB, NaN/Infinity, duplicate keys, nesting deeper
        than 20 levels, a root that is not an object, a missing hidden size, layer count,
        head count or vocabulary size, a value that is not a whole number in its range
        (true/false are not numbers), or a shape outside the planner's 0.01-5,000 B.

    Notes
    -----
    Sources: the ``config.json`` key names and layer layouts of transformers'
    ``configuration_<type>.py`` and ``modeling_<type>.py``; checked against the published
    sizes in ``costcore/data/hf_configs/SOURCES.yaml``.
    """
    if not isinstance(what, str):
        what = WHAT
    cfg = _load_config(text, what)
    full = _full_shape(cfg, what)
    total, active = _counts(_read_shape(full, what))
    total_b, active_b = total / 1e9, active / 1e9
    lo, hi = PARAMS_RANGE_B
    if not lo <= total_b <= hi:
        raise ScenarioError(what, f"the shape (num_hidden_layers {full['layers']:,}, hidden_size "
                                  f"{full['hidden']:,}) gives {total_b:,.4g} B parameters; the planner takes "
                                  f"{lo:g} to {hi:,.0f} B", value=total_b, allowed=f"{lo:g} to {hi:,.0f} B")
    return _model_keys(full, total_b, active_b)


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


@functools.lru_cache(maxsize=None)
def _data_json(path: str):
    """A data file written in YAML's JSON subset with ``#`` comment lines (read without PyYAML)."""
    return json.loads(_strip_comments(Path(path).read_text(encoding="utf-8")))


@functools.lru_cache(maxsize=None)
def _shipped() -> dict:
    sources = _data_json(str(CONFIG_DIR / "SOURCES.yaml"))["configs"]
    out = {}
    for name, row in sources.items():
        text = (CONFIG_DIR / f"{name}.json").read_bytes()
        out[name] = {"model": parse_hf_config(text, f"hf_configs/{name}.json"),
                     "source": f"huggingface.co/{row['repo']} config.json (checked {row['checked']})",
                     "label": row["label"]}
    return out


def shipped_configs() -> dict[str, dict]:
    """The configs shipped under ``costcore/data/hf_configs/``.

    Returns
    -------
    dict
        name -> ``{"model": <the model keys>, "source": str, "label": str}``, in the order of
        ``SOURCES.yaml`` (which gives each one's Hugging Face repository, published size and
        the date it was checked). A fresh copy on every call.
    """
    return {name: {"model": dict(v["model"]), "source": v["source"], "label": v["label"]}
            for name, v in _shipped().items()}


def _shipped_name(source: str) -> str | None:
    key = source.strip().lower()
    if key in _shipped():
        return key
    rows = _data_json(str(CONFIG_DIR / "SOURCES.yaml"))["configs"]
    for name, row in rows.items():  # a Hugging Face repo id that a shipped config mirrors
        if key == row["repo"].lower():
            return name
    return None


_LINK = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z")


def _read_file(source: str, what: str) -> bytes | None:
    """The bytes of ``source`` (a config.json, or a directory holding one); None if there is none."""
    folder = False
    try:
        p = Path(source).expanduser()
        if p.is_dir():
            folder, p = True, p / "config.json"
        if not p.is_file():  # also refuses devices and pipes, which could block a read
            data = None
        else:
            with p.open("rb") as f:
                data = f.read(MAX_TEXT + 1)
    except (OSError, ValueError, RuntimeError):  # unreadable, a NUL in the name, no home directory
        if "\n" in source or len(source) > 4096:
            return None
        raise ScenarioError(what, f"cannot read the file {_shown(source)}; give a readable config.json "
                                  "or paste its text") from None
    if data is None and folder:
        raise ScenarioError(what, f"the directory {_shown(source)} holds no config.json file")
    if data is not None and len(data) > MAX_TEXT:
        raise ScenarioError(what, f"the file {_shown(source)} is over the 1 MB limit (at most {MAX_TEXT:,} bytes)")
    return data


def read_hf_config(source: str) -> dict:
    """The model keys from a config.json given as a path, a directory, pasted text or a shipped name.

    Parameters
    ----------
    source : str or os.PathLike
        Pasted JSON text (its first non-space character is ``{``); the name of a shipped
        config (:func:`shipped_configs`, e.g. ``"llama-3.1-8b"``) or the Hugging Face
        repository it mirrors (``"meta-llama/Llama-3.1-8B"``); or a local path to a
        config.json or to a directory holding one. Nothing is fetched: a link
        (``https://...``) is refused.

    Returns
    -------
    dict
        As :func:`parse_hf_config`.

    Raises
    ------
    ScenarioError
        A link, a name that is neither a shipped config nor a readable file, a file over
        1 MB, or any refusal of :func:`parse_hf_config`.
    """
    if isinstance(source, os.PathLike):
        try:
            source = os.fspath(source)
        except Exception:  # noqa: BLE001 - a foreign __fspath__ may raise anything
            raise ScenarioError(WHAT, "must be a path, a shipped config name or pasted JSON text") from None
    if not isinstance(source, str):
        raise ScenarioError(WHAT, "must be a path, a shipped config name or pasted JSON text "
                                  f"(got {type(source).__name__})")
    if len(source) > MAX_TEXT:
        raise ScenarioError(WHAT, f"is {len(source):,} characters, over the 1 MB limit "
                                  f"(at most {MAX_TEXT:,} characters)")
    text = source.lstrip().lstrip("\ufeff")
    if text.startswith(("{", "[")):  # pasted JSON (a list is refused there as not an object)
        return parse_hf_config(source, WHAT)
    if _LINK.match(text):
        raise ScenarioError(WHAT, f"{_shown(text)} is a link, and links are not fetched (no network); "
                                  "paste the config.json text or upload the file instead")
    if not text.strip():
        raise ScenarioError(WHAT, "is empty: give a config.json path, a directory holding one, pasted JSON text "
                                  f"or a shipped config ({', '.join(_shipped())})")
    name = _shipped_name(text)
    if name is not None:
        return dict(_shipped()[name]["model"])
    data = _read_file(source, WHAT)
    if data is not None:
        return parse_hf_config(data, WHAT)
    hint = ("; a Hugging Face repository is not fetched (no network): paste its config.json text or upload the "
            "file instead" if _REPO_ID.match(text.strip()) else "")
    raise ScenarioError(WHAT, f"{_shown(text.strip())} is not a config.json file, a directory holding one, "
                              f"pasted JSON text or a shipped config; shipped: {', '.join(_shipped())}{hint}")


# ----------------------------------------------------------------------------------------------
# Public: a shape from a size alone (data/model_families.yaml)
# ----------------------------------------------------------------------------------------------

def _size(v, name: str, lo: float, hi: float) -> float:
    """A real number of billions in [lo, hi] (ints, floats, numpy floats; not bools or dates)."""
    allowed = f"a number from {lo:,g} to {hi:,g} (billions of parameters)"
    bad = _not_a_number(v) or not isinstance(v, numbers.Real)
    try:
        f = None if bad else float(v)
    except Exception:  # noqa: BLE001 - a foreign __float__ may raise anything
        f = None
    if f is None or not math.isfinite(f) or not lo <= f <= hi:
        raise ScenarioError(name, f"must be {allowed} (got {_shown(v)})", value=v, allowed=allowed)
    return f


def _families() -> dict:
    return _data_json(str(FAMILIES_FILE))


@functools.lru_cache(maxsize=None)
def _dense_anchors() -> tuple:
    """(log of the anchor's count in B, anchor row) for the dense family, smallest first."""
    rows = []
    for row in _families()["dense"]["anchors"]:
        shape = {k: row[k] for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab")}
        rows.append((math.log(shape_params(shape)[0]), row))
    return tuple(sorted(rows, key=lambda r: r[0]))


def _round_heads(x: float) -> int:
    step = 8 if x >= 32 else 4 if x >= 16 else 2
    return max(step, int(round(x / step)) * step)


def _kv_for(heads: int, most: int) -> int:
    """The largest divisor of ``heads`` that is at most ``most`` and at most half the heads, a power of two when
    one above 1 divides them: tensor parallelism (a power of two) then splits or copies the key/value heads
    evenly (formulas.tp_splits_heads). 20 heads take 4, not 5, which TP 2 and 4 could not split, so a 2.4B
    lost its tensor-parallel layouts and cost more than a 2.7B."""
    cap = max(1, min(most, heads // 2))
    divisors = [d for d in range(1, cap + 1) if heads % d == 0]
    powers = [d for d in divisors if d > 1 and d & (d - 1) == 0]
    return max(powers or divisors)


def _interpolated(target_b: float, fam: dict) -> dict:
    """Layers, hidden, heads, kv_heads and vocab at ``target_b``, from the anchors around it."""
    anchors = _dense_anchors()
    lt = math.log(target_b)
    i = max(0, min(len(anchors) - 2, sum(1 for x, _ in anchors if x <= lt) - 1))
    (x0, a), (x1, b) = anchors[i], anchors[i + 1]
    span = x1 - x0
    hold = min(fam["hold_log"], span / 4)
    u = lt - x0
    if u <= hold or u >= span - hold:  # an anchor's own shape near it (and beyond the ends)
        row = a if u <= hold else b
        return {k: row[k] for k in ("layers", "hidden", "heads", "kv_heads", "vocab")}
    t = (u - hold) / (span - 2 * hold)
    near = a if t < 0.5 else b
    layers = math.exp((1 - t) * math.log(a["layers"]) + t * math.log(b["layers"]))
    hidden = math.exp((1 - t) * math.log(a["hidden"]) + t * math.log(b["hidden"]))
    head_dim = near["hidden"] // near["heads"]
    heads = _round_heads(hidden / head_dim)
    return {"layers": max(2, 2 * int(round(layers / 2))), "hidden": heads * head_dim, "heads": heads,
            "kv_heads": _kv_for(heads, fam["kv_heads"]), "vocab": near["vocab"]}


def _linear(shape: dict, key: str, a: int, b: int, which: int = 0) -> tuple[float, float]:
    """(intercept, slope) of the total (which=0) or active (1) count in B as ``shape[key]`` goes
    from a to b: the count is linear in each of the keys this is used with."""
    pa = shape_params({**shape, key: a})[which]
    pb = shape_params({**shape, key: b})[which]
    slope = (pb - pa) / (b - a)
    return pa - a * slope, slope


def _fit_ffn(shape: dict, target_b: float, fam: dict) -> dict:
    """Solve the MLP width for the target count. If it falls outside ffn_range x hidden, hold it
    at the nearer end of the range and re-solve the layer count (even), then the width again."""
    h = shape["hidden"]
    step = fam["ffn_multiple"] if h >= 2048 else 64
    lo, hi = (r * h for r in fam["ffn_range"])
    base, slope = _linear(shape, "ffn", step, 2 * step)
    ffn = (target_b - base) / slope
    if not lo <= ffn <= hi:
        held = max(step, round(min(hi, max(lo, ffn)) / step) * step)
        base_l, per_layer = _linear({**shape, "ffn": held}, "layers", 1, 2)
        layers = (target_b - base_l) / per_layer
        shape = {**shape, "layers": max(1, min(1000, 2 * int(round(layers / 2)) if layers >= 2 else 1))}
        base, slope = _linear(shape, "ffn", step, 2 * step)
        ffn = (target_b - base) / slope
    return {**shape, "ffn": int(min(500_000, max(step, round(ffn / step) * step)))}


def _dense_shape(target_b: float) -> dict:
    fam = _families()["dense"]
    shape = _fit_ffn({**_interpolated(target_b, fam), "gated": 1}, target_b, fam)
    shape.update(experts=0, experts_active=0, shared_experts=0, moe_ffn=0)
    return shape


def _default_active(total_b: float, fam: dict) -> float:
    """Active size for a total, log-interpolated between the anchors (end ratios held beyond)."""
    rows = sorted((math.log(r["params_b"]), math.log(r["active_params_b"])) for r in fam["anchors"])
    lt = math.log(total_b)
    if lt <= rows[0][0]:
        return math.exp(lt + rows[0][1] - rows[0][0])
    if lt >= rows[-1][0]:
        return math.exp(lt + rows[-1][1] - rows[-1][0])
    i = max(j for j, (x, _) in enumerate(rows) if x <= lt)
    (x0, y0), (x1, y1) = rows[i], rows[min(i + 1, len(rows) - 1)]
    t = (lt - x0) / (x1 - x0) if x1 > x0 else 0.0
    return math.exp(y0 + t * (y1 - y0))


def _moe_shape(total_b: float, active_b: float, fam: dict) -> dict:
    """Backbone from the active size; expert width from the active MLP budget; count from the total."""
    k, s = fam["experts_active"], fam["shared_experts"]
    shape = dict(_dense_shape(active_b), experts=k + 1, experts_active=k, shared_experts=s)
    for _ in range(12):  # the router (experts x hidden per layer) couples the two solves
        before = (shape["moe_ffn"], shape["experts"])
        base, slope = _linear(shape, "moe_ffn", 64, 128, which=1)
        width = (active_b - base) / slope
        step = 32 if width >= 256 else 8
        shape["moe_ffn"] = int(max(step, round(width / step) * step))
        base, slope = _linear(shape, "experts", k + 1, k + 2)
        shape["experts"] = int(max(k + 1, min(4096, round((total_b - base) / slope))))
        if (shape["moe_ffn"], shape["experts"]) == before:
            break
    shape["ffn"] = (k + s) * shape["moe_ffn"]
    return shape


def _moe_active(total_b: float, active_params_b, fam: dict) -> float:
    lo = max(_families()["dense"]["range_b"][0], total_b / fam["max_total_per_active"])
    hi = total_b / fam["min_total_per_active"]
    active = _size(active_params_b, "active_params_b", 0.0, total_b)
    if active == 0.0:
        return min(hi, max(lo, _default_active(total_b, fam)))
    if not lo <= active <= hi:
        allowed = f"0 (the family's default) or from {lo:,.4g} to {hi:,.4g} B for {total_b:,g} B in total"
        raise ScenarioError("active_params_b", f"must be {allowed} (at most {fam['max_total_per_active']:g} "
                                               f"times fewer, at least {fam['min_total_per_active']:g} times fewer "
                                               f"than params_b; got {_shown(active_params_b)})",
                            value=active_params_b, allowed=allowed)
    return active


def family_shape(params_b: float, family: str = "dense", active_params_b: float = 0.0) -> dict:
    """A plausible shape for a model known only by its size.

    Parameters
    ----------
    params_b : float
        Total parameters, in billions: 0.1 to 2,000 for ``dense``, 1 to 2,000 for ``moe``.
    family : {"dense", "moe"}
        ``dense``: a Llama-style decoder (SwiGLU, GQA with at most 8 key/value heads, head
        size 128 from 3B up, vocabulary 128,256 from 1B up), interpolated in log(params)
        between the anchors of ``costcore/data/model_families.yaml`` (Llama-3.2-1B and 3B,
        Llama-3.1-8B, a Llama-2-13B-like and a Qwen2.5-32B-like model, Llama-3.1-70B and
        405B, and extrapolations above); 7-8 B gives Llama-3-8B's 32 layers of 4,096 and
        70 B Llama-3.1-70B's 80 of 8,192. ``moe``: DeepSeek-style (8 routed experts per
        token plus 1 shared): the active size drives layers and hidden, the total the
        number of routed experts.
    active_params_b : float
        ``moe`` only: parameters per token, in billions, from params_b/32 to params_b/1.25;
        0 picks the family's ratio (OLMoE, Qwen-MoE, Qwen3, DeepSeek-V3 anchors). For
        ``dense`` it must be 0 or params_b.

    Returns
    -------
    dict
        :data:`MODEL_KEYS`, with ``params_b``/``active_params_b`` as requested; the MLP width
        (``ffn``, or ``moe_ffn`` and ``experts``) is solved so that :func:`shape_params` of
        the shape is within 5% of them (an untied LM head counted). For ``moe`` ``ffn`` is
        the width the active experts share, (experts_active + shared_experts) x moe_ffn.

    Raises
    ------
    ScenarioError
        An unknown family, or a size outside the ranges above.
    """
    fams = _families()
    name = family.strip().lower() if isinstance(family, str) else None
    if name not in fams:
        raise ScenarioError("family", f"must be one of: {', '.join(fams)} (got {_shown(family)})",
                            value=family, allowed=", ".join(fams))
    fam = fams[name]
    lo, hi = fam["range_b"]
    total = _size(params_b, "params_b", lo, hi)
    if name == "dense":
        active = _size(active_params_b, "active_params_b", 0.0, hi)
        if active not in (0.0, total):
            raise ScenarioError("active_params_b", "must be 0 or params_b for a dense model (every parameter "
                                                   f"is active); use family \"moe\" (got {_shown(active_params_b)})",
                                value=active_params_b, allowed="0 or params_b")
        shape, active = _dense_shape(total), total
    else:
        active = _moe_active(total, active_params_b, fam)
        shape = _moe_shape(total, active, fam)
    out = {"params_b": total, "active_params_b": active}
    out.update({k: int(shape[k]) for k in MODEL_KEYS[2:]})
    return out
