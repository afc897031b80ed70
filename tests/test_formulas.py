"""Each cost formula with its arithmetic written out by hand.

The numbers in these tests are typed from the papers and tools the
docstrings cite (PaLM App. B, peft, DeepSpeed's memory estimators,
Korthikanti et al. 2022, LLNL scr's Young/Daly script, NCCL's ring
bandwidth), so a change in a formula shows up here as a plain arithmetic
mismatch. The job layout's memory and step pieces (costcore/engine/layout.py)
are checked on one hand-built plan at a time.

Every call passes floats, so numba compiles (or loads from its cache) one
specialization per function. ``test_jit_parity.py`` runs this same file again
with ``NUMBA_DISABLE_JIT=1``.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import reference_model as ref

import costcore
from costcore.engine import formulas as F
from costcore.engine import layout
from costcore.engine.kernel import LINE_ITEMS
from costcore import api
from costcore.scenario import schema

# LLaMA-7B (Touvron et al. 2023, Table 2): 32 layers, d = 4096, 32 heads, SwiGLU FFN 11008, V = 32000.
L7, D7, A7, FFN7, V7 = 32.0, 4096.0, 32.0, 11008.0, 32000.0


# ---------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------
def test_constants():
    assert F.HOURS_PER_MONTH == 8760.0 / 12.0 == 730.0
    assert F.DAYS_PER_MONTH == pytest.approx(365.0 / 12.0, rel=1e-5)
    assert F.HOURS_PER_MONTH == pytest.approx(24.0 * F.DAYS_PER_MONTH, rel=1e-5)
    assert F.NF4_BYTES_PER_PARAM == 4.127 / 8.0  # QLoRA Sec. 3: 4.127 bits per parameter
    assert F.KV_BYTES_PER_VALUE == 2.0  # bf16


def test_reference_line_item_keys_match_kernel():
    assert tuple(k for k, _, _, _ in LINE_ITEMS) == ref.ITEM_KEYS
    assert tuple(k for k, _, fixed, _ in LINE_ITEMS if fixed) == ref.FIXED_ITEM_KEYS
    assert set(ref.STAT_KEYS) <= set(costcore.STATS)


# ---------------------------------------------------------------------------
# Model shape heuristic
# ---------------------------------------------------------------------------
def test_model_shape_7b():
    L, d, a, kv, ffn = F.model_shape(7.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    # L^3 = 7e9 / (12 * 128^2) = 7e9 / 196608 = 35603.8  ->  L = 32.89 -> 33 -> a multiple of 8 above 16: 32
    assert 7e9 / 196608 == pytest.approx(35603.84, rel=1e-6)
    assert L == 32.0
    # d = sqrt(7e9 / (12 * 32)) = 4269.6 -> from 4096 up a multiple of 1024: 4096 (LLaMA-7B: 32 x 4096)
    assert math.sqrt(7e9 / 384.0) == pytest.approx(4269.6, rel=1e-5)
    assert d == 4096.0
    assert a == 32.0 and kv == a  # heads of 128
    assert ffn == 4.0 * d


def test_model_shape_175b_is_gpt3():
    L, d, a, _kv, _ffn = F.model_shape(175.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    # L^3 = 175e9 / 196608 = 890,096  ->  L = 96.2 -> 96 = 8 x 12 (GPT-3 has 96 layers)
    assert L == 96.0
    # d = sqrt(175e9 / 1152) = 12,325 -> 12 x 1024 = 12,288 (GPT-3's d), 96 heads of 128
    assert math.sqrt(175e9 / 1152.0) == pytest.approx(12325.2, rel=1e-5)
    assert d == 12288.0 and a == 96.0


def test_model_shape_smallest_model():
    L, d, a, _kv, _ffn = F.model_shape(0.01, 0.0, 0.0, 0.0, 0.0, 0.0)
    # L^3 = 1e7 / 196608 = 50.86 -> L = 3.70 -> 4 (not rounded to 8 below 17 layers);
    # d = sqrt(1e7 / 48) = 456.4 -> the nearest multiple of 128: 512, 4 heads
    assert L == 4.0
    assert math.sqrt(1e7 / 48.0) == pytest.approx(456.44, rel=1e-4)
    assert d == 512.0 and a == 4.0


def test_model_shape_given_values_are_kept():
    assert F.model_shape(7.0, L7, D7, A7, 8.0, FFN7) == (L7, D7, A7, 8.0, FFN7)
    L, d, a, _kv, _ffn = F.model_shape(7.0, 40.0, 0.0, 0.0, 0.0, 0.0)
    # d = sqrt(7e9 / 480) = 3818.8 -> from 1024 up a multiple of 1024 (heads in eights): 4096, 32 heads
    assert L == 40.0 and d == 4096.0 and a == 32.0
    L, d, a, _kv, _ffn = F.model_shape(0.3, 0.0, 0.0, 0.0, 0.0, 0.0)
    # L^3 = 3e8 / 196608 = 1525.9 -> L = 11.5 -> 12; d = sqrt(3e8 / 144) = 1443.4 -> 1024 x 1.41 -> 1024, 8 heads
    assert L == 12.0 and d == 1024.0 and a == 8.0
    assert F.model_shape(7.0, 0.0, 5000.0, 0.0, 0.0, 0.0)[2] == 39.0  # 5000 / 128 = 39.06 heads -> 39


def test_model_shape_matches_reference():
    for b in (0.01, 0.125, 0.5, 1.1, 7.0, 13.0, 34.0, 70.0, 175.0, 405.0, 1000.0):
        L, d, a, kv, ffn = F.model_shape(b, 0.0, 0.0, 0.0, 0.0, 0.0)
        want = ref.model_shape(b * 1e9, 0, 0, 0, 0, 0, gated=False)
        assert (L, d, a, kv, ffn) == (want["L"], want["d"], want["heads"], want["kv_heads"], want["ffn"]), b


def test_dense_ffn_llama2_7b():
    # Llama-2-7B: 6,738,415,616 parameters, 32 x 4096, 32 heads (q, k, v, o all 4096 x 4096), V 32000, SwiGLU.
    # Attention 4 x 4096^2 = 67,108,864 per layer, x 32 = 2,147,483,648; embeddings 2 x 32000 x 4096 = 262,144,000;
    # left for the MLPs 4,328,787,968 over 32 x 3 x 4096 = 393,216 -> 11,008.6 (config.json: 11,008)
    f = F.dense_ffn(6738415616.0, 32.0, 4096.0, 4096.0, 4096.0, 32000.0, 3.0)
    assert f == pytest.approx(4328787968.0 / 393216.0, rel=1e-12)
    assert abs(f - 11008.0) < 1.0


def test_dense_ffn_never_narrower_than_the_model():
    # 0.5B with a 128k vocabulary at 24 x 2048: embeddings 2 x 128256 x 2048 = 525M alone exceed 0.5e9 -> floor d
    assert F.dense_ffn(0.5e9, 24.0, 2048.0, 2048.0, 512.0, 128256.0, 3.0) == 2048.0


def test_size_slider_cost_never_falls_as_the_model_grows():
    # The size slider resizes the shape (schema.resize_model); the FFN absorbs what the coarse layers
    # and width leave, so a bigger model never costs markedly less on these presets (it did before: a 3.1B
    # llama3-8b cost 8% less than a 3.0B, heads of 25 blocked tensor parallelism). Where the family table
    # steps the width up, the wider shape's larger matmuls may run a little faster per parameter: llama3-8b
    # at 2.6B (24 x 2560) to 2.7B (20 x 3072) on H100 is 0.24% cheaper (pre-training MFU 32.4% -> 33.6%).
    for preset, start in (("llama3-8b", 1.5), ("llama3-8b", 3.0), ("llama2-7b-pretrain", 6.7), ("scratch-7b", 2.5)):
        base = api.load_preset(preset)
        totals = [costcore.estimate(schema.validate(schema.resize_model(base, round(start + 0.1 * k, 6)))).total_usd
                  for k in range(16)]
        assert all(b >= a * 0.995 for a, b in zip(totals, totals[1:])), (preset, totals)


def test_moe_expert_ffn():
    # DeepSeek-V3: 671B total, 37B active, 256 routed experts top-8, 61 layers, d 7168, SwiGLU (3 matrices):
    # the 248 experts a token skips hold 634e9 parameters: f = 634e9 / (248 x 61 x 3 x 7168) = 1949 (config: 2048)
    f = F.moe_expert_ffn(671e9, 37e9, 256.0, 8.0, 61.0, 7168.0, 3.0, 18432.0)
    assert f == pytest.approx(634e9 / (248 * 61 * 3 * 7168), rel=1e-14)
    assert abs(f - 2048) / 2048 < 0.05
    assert F.moe_expert_ffn(7e9, 7e9, 8.0, 2.0, 32.0, 4096.0, 3.0, 11008.0) == 11008.0  # not MoE: the dense FFN
    assert F.moe_expert_ffn(47e9, 13e9, 2.0, 2.0, 32.0, 4096.0, 3.0, 14336.0) == 14336.0  # no expert left unused


# ---------------------------------------------------------------------------
# LoRA trainable parameters
# ---------------------------------------------------------------------------
def test_lora_params_llama7b_qv_r16():
    # q: 16 (4096 + 4096) = 131,072 ; v: the same (no GQA) ; 32 layers
    assert F.lora_trainable_params(L7, D7, D7, FFN7, 16.0, 0.0, 3.0) == 32 * 2 * 131_072 == 8_388_608


def test_lora_params_llama7b_all_linear_r16():
    # attention q,k,v,o: 4 x 131,072 = 524,288
    # MLP gate, up (4096 -> 11008) and down (11008 -> 4096): 3 x 16 x 15,104 = 724,992
    # per layer 1,249,280 ; 32 layers: 39,976,960 (what peft prints for LLaMA-7B, r=16, all linear)
    assert F.lora_trainable_params(L7, D7, D7, FFN7, 16.0, 2.0, 3.0) == 39_976_960
    assert F.lora_trainable_params(L7, D7, D7, FFN7, 16.0, 1.0, 3.0) == 32 * 524_288


def test_lora_params_gqa_llama2_70b_r8_attn():
    # LLaMA-2-70B: L = 80, d = 8192, 64 heads of 128, 8 KV heads -> kv_dim = 1024
    r, d, kv = 8.0, 8192.0, 1024.0
    q = r * (d + d)
    k = v = r * (d + kv)
    o = r * (d + d)
    assert F.lora_trainable_params(80.0, d, kv, 28672.0, r, 1.0, 3.0) == 80 * (q + k + v + o) == 80 * 409_600
    assert F.lora_trainable_params(80.0, d, kv, 28672.0, r, 0.0, 3.0) == 80 * (q + v)


@pytest.mark.parametrize("rank", [1.0, 8.0, 64.0])
@pytest.mark.parametrize("targets", ["qv", "attn", "all"])
def test_lora_params_match_reference(rank, targets):
    shape = ref.model_shape(13e9, 0, 0, 0, 0, 0)
    code = {"qv": 0.0, "attn": 1.0, "all": 2.0}[targets]
    got = F.lora_trainable_params(shape["L"], shape["d"], shape["kv_dim"], shape["ffn"], rank, code, 3.0)
    assert got == pytest.approx(ref.lora_params(shape, rank, targets), rel=1e-14)


# ---------------------------------------------------------------------------
# FLOPs per token
# ---------------------------------------------------------------------------
def test_train_flops_full_7b_at_4096():
    # 6N = 42,000,000,000 ; 12 L d s = 12 x 32 x 4096 x 4096 = 6,442,450,944
    assert 12 * 32 * 4096 * 4096 == 6_442_450_944
    assert F.train_flops_per_token(7e9, L7, D7, 4096.0, 0.0, 0.0) == 48_442_450_944.0


def test_train_flops_lora_and_qlora():
    n_lora = 39_976_960.0  # LLaMA-7B r=16 all linear, see above
    # LoRA: 4N + 12Lds + 6 N_lora = 28e9 + 6,442,450,944 + 239,861,760
    assert F.train_flops_per_token(7e9, L7, D7, 4096.0, 1.0, n_lora) == 34_682_312_704.0
    # QLoRA does the same model FLOPs: its dequantization is time (dequant_seconds), not FLOPs
    assert F.train_flops_per_token(7e9, L7, D7, 4096.0, 2.0, n_lora) == 34_682_312_704.0


def test_frozen_base_bytes_by_method_bits_and_precision():
    # QLoRA: NF4 + double-quantized scales, 4.127 bits, whatever base_bits says (arXiv:2305.14314 Sec. 3)
    assert F.frozen_base_bytes(F.METHOD_QLORA, 16.0, False) == (4.127 / 8.0, 1.0)
    assert F.frozen_base_bytes(F.METHOD_QLORA, 8.0, True) == (4.127 / 8.0, 1.0)
    # LoRA on an LLM.int8 base: a byte, dequantized; on a 16-bit base: BF16, or FP8 in an FP8 job, not dequantized
    assert F.frozen_base_bytes(F.METHOD_LORA, 8.0, False) == (1.0, 1.0)
    assert F.frozen_base_bytes(F.METHOD_LORA, 16.0, False) == (2.0, 0.0)
    assert F.frozen_base_bytes(F.METHOD_LORA, 16.0, True) == (1.0, 0.0)
    # a full fine-tune trains its weights: never a quantized base, whatever base_bits holds
    assert F.frozen_base_bytes(F.METHOD_FULL, 8.0, False) == (2.0, 0.0)


def test_dequant_seconds_reads_the_packed_weights_and_writes_bf16():
    # bitsandbytes MatMul4Bit: F.dequantize_4bit reads 4.127 bits (NF4 + double-quantized scales) and
    # writes 2 bytes of BF16 per weight. 202,375,168 weights (one Llama-7B layer) on an A100 (2.039 TB/s):
    # 202,375,168 x (0.515875 + 2) / 2.039e12 = 249.7 us
    layer = 4 * 4096 * 4096 + 3 * 4096 * 11008
    assert layer == 202_375_168
    assert F.dequant_seconds(layer, 4.127 / 8.0, 2.039e12) == pytest.approx(
        202_375_168 * 2.515875 / 2.039e12, rel=1e-12)
    assert F.dequant_seconds(layer, 4.127 / 8.0, 2.039e12) == pytest.approx(249.7e-6, rel=1e-3)
    # an 8-bit base reads a byte per weight: 3 bytes of traffic instead of 2.52
    assert F.dequant_seconds(1e9, 1.0, 1e12) == 3e-3


def test_forward_flops_is_a_third_of_training():
    # 2N + 4 L d s = 14e9 + 2,147,483,648
    fwd = F.forward_flops_per_token(7e9, L7, D7, 4096.0)
    assert fwd == 16_147_483_648.0
    assert 3.0 * fwd == F.train_flops_per_token(7e9, L7, D7, 4096.0, 0.0, 0.0)


def test_gpu_hours_for_flops():
    # 1e21 FLOPs at 40% of 989 TFLOP/s: 1e21 / 395.6e12 s = 2,527,805.9 s = 702.17 h
    assert F.gpu_hours_for_flops(1e21, 989.0, 0.4) == pytest.approx(1e21 / (989e12 * 0.4) / 3600, rel=1e-15)
    assert F.gpu_hours_for_flops(1e21, 989.0, 0.4) == pytest.approx(702.168, rel=1e-5)


# ---------------------------------------------------------------------------
# KV cache and decoding roofline
# ---------------------------------------------------------------------------
def test_kv_bytes_per_token():
    # LLaMA-2-7B: 2 (K, V) x 32 layers x 32 heads x 128 x 2 bytes = 524,288 = 0.5 MiB per token
    assert F.kv_cache_bytes_per_token(32.0, 32.0, 128.0) == 524_288.0
    # LLaMA-2-70B with GQA (8 KV heads): 2 x 80 x 8 x 128 x 2 = 327,680 = 320 KiB per token
    assert F.kv_cache_bytes_per_token(80.0, 8.0, 128.0) == 327_680.0


def test_inference_tp():
    assert F.inference_tp(14e9, 80.0) == 1.0   # 14 GB of weights fit in 40 GB
    assert F.inference_tp(140e9, 80.0) == 4.0  # 140 / 40 = 3.5 -> 4 GPUs
    assert F.inference_tp(80e9, 80.0) == 2.0   # exactly two halves
    assert F.inference_tp(110e9, 80.0) == 4.0  # 2.75 -> 3 GPUs' worth; tensor parallel is a power of two: 4
    assert F.inference_tp(1342e9, 80.0) == 40.0  # 33.6 -> 34 GPUs' worth: TP 8 in a node x PP 5 nodes
    assert F.inference_tp(1342e9, 80.0, 4.0) == 36.0  # four GPUs a node: TP 4 x PP 9
    assert F.inference_tp(700e9, 80.0, 6.0) == 20.0  # 17.5 -> 18; six a node: TP 4 (a power of two) x PP 5


def test_decode_bandwidth_bound_single_sequence():
    kv = 524_288.0
    dps, t, b = F.decode_gpu_seconds_per_token(7e9, 7e9, kv, 1024.0, 2048.0, 1.0, 989.0, 3.35, 80.0, 1.0)
    # one step reads 14e9 bytes of weights + 1 x 524,288 x 1024 bytes of KV = 14,536,870,912 bytes
    memory_s = 14_536_870_912 / 3.35e12          # 4.34 ms
    compute_s = 2 * 7e9 * 1 / 989e12              # 0.014 ms: bandwidth bound
    assert memory_s > 100 * compute_s
    assert (t, b) == (1.0, 1.0)
    assert dps == pytest.approx(memory_s, rel=1e-14)


def test_decode_batch_capped_by_kv_memory():
    kv = 524_288.0
    # one GPU (the stage has one): room for KV 0.9 x 80e9 - 14e9 = 58e9 bytes; a sequence at 2048 tokens: 1,073,741,824
    dps, t, b = F.decode_gpu_seconds_per_token(7e9, 7e9, kv, 1024.0, 2048.0, 256.0, 989.0, 3.35, 80.0, 0.5, 0.0, 8.0,
                                               1.0)
    assert math.floor(58e9 / 1_073_741_824) == 54
    assert (t, b) == (1.0, 54.0)
    step = (14e9 + 54 * kv * 1024) / 3.35e12 / 0.5
    assert dps == pytest.approx(step / 54, rel=1e-14)
    # with a node to use, the replica grows while it saves 5%: 2 GPUs hold 121 sequences (18% cheaper a token), 4
    # hold 255 (9% cheaper again); 8 would hold the whole batch of 256, 0.04% cheaper: the 4 are kept
    dps4, t4, b4 = F.decode_gpu_seconds_per_token(7e9, 7e9, kv, 1024.0, 2048.0, 256.0, 989.0, 3.35, 80.0, 0.5)
    assert math.floor((0.9 * 160e9 - 14e9) / 1_073_741_824) == 121 and math.floor((0.9 * 320e9 - 14e9) / 1_073_741_824) == 255
    assert (t4, b4) == (4.0, 255.0) and F.DECODE_TP_MIN_SAVING == 0.05
    assert dps4 == pytest.approx((14e9 + 255 * kv * 1024) / 3.35e12 / 0.5 / 255 * 4 / 4, rel=1e-14) and dps4 < dps


def test_decode_compute_bound_large_batch():
    # no KV cache to speak of and 100,000 sequences: the step is 2 N B / peak
    dps, _t, b = F.decode_gpu_seconds_per_token(7e9, 7e9, 0.0, 1024.0, 2048.0, 1e5, 989.0, 3.35, 80.0, 0.5)
    assert b == 1e5
    assert 2 * 7e9 * 1e5 / 989e12 > 14e9 / 3.35e12
    assert dps == pytest.approx(2 * 7e9 / 989e12 / 0.5, rel=1e-14)  # 2 N / (peak x efficiency) per token


def test_decode_moe_reads_all_weights_but_computes_active():
    # 671B total, 37B active, 8 x 80 GB is not enough for 1342 GB of weights: ceil(1342 / 40) = 34 GPUs' worth,
    # laid out as TP 8 x PP 5 = 40
    dps, t, _b = F.decode_gpu_seconds_per_token(671e9, 37e9, 70_000.0, 1000.0, 2000.0, 1.0, 989.0, 3.35, 80.0,
                                                1.0)
    assert t == 40.0
    memory_s = (1342e9 + 70_000.0 * 1000.0) / (40 * 3.35e12)
    assert dps == pytest.approx(memory_s * 40, rel=1e-14)


def test_decode_matches_reference():
    for args in [(7e9, 7e9, 524_288.0, 1536.0, 2560.0, 256.0, 989.0, 3.35, 80.0, 0.5),
                 (70e9, 70e9, 327_680.0, 3000.0, 4000.0, 64.0, 312.0, 2.0, 80.0, 0.7),
                 (671e9, 37e9, 70_000.0, 9000.0, 16000.0, 512.0, 989.0, 4.8, 141.0, 0.3),
                 (110e9, 110e9, 327_680.0, 3000.0, 4000.0, 64.0, 312.0, 2.0, 80.0, 0.7, 0.0, 8.0),
                 (671e9, 37e9, 70_000.0, 9000.0, 16000.0, 512.0, 989.0, 3.35, 80.0, 0.3, 0.0, 4.0)]:
        got = F.decode_gpu_seconds_per_token(*args)
        want = ref.decode(*args)
        assert got == pytest.approx(want, rel=1e-14)


# ---------------------------------------------------------------------------
# Young/Daly checkpoint interval
# ---------------------------------------------------------------------------
def test_young_daly_by_hand():
    delta, M = 0.01, 10.0
    # sqrt(2 delta M) = sqrt(0.2) = 0.447214 ; delta / 2M = 0.0005
    # tau = 0.447214 x (1 + sqrt(0.0005)/3 + 0.0005/9) - 0.01
    #     = 0.447214 x (1 + 0.0074536 + 0.0000556) - 0.01 = 0.450572 - 0.01 = 0.440572 h
    by_hand = math.sqrt(0.2) * (1.0 + math.sqrt(0.0005) / 3.0 + 0.0005 / 9.0) - 0.01
    assert F.young_daly_interval_h(delta, M) == pytest.approx(by_hand, rel=1e-14)
    assert F.young_daly_interval_h(delta, M) == pytest.approx(0.440572, abs=1e-6)
    # Young's first-order sqrt(2 delta M) is close
    assert abs(by_hand - math.sqrt(0.2)) < 0.01


def test_young_daly_limits():
    assert F.young_daly_interval_h(30.0, 10.0) == 10.0  # delta >= 2M: checkpoint every M
    assert F.young_daly_interval_h(20.0, 10.0) == 10.0
    assert F.young_daly_interval_h(0.01, math.inf) == math.inf  # no failures: never
    assert F.young_daly_interval_h(0.01, 0.0) == math.inf
    assert F.young_daly_interval_h(0.0, 10.0) == 0.0


# ---------------------------------------------------------------------------
# Checkpoint retention: keep-last-K plus every M-th
# ---------------------------------------------------------------------------
def simulate_store(n, keep_last, milestone_every):
    """Write checkpoints 1..n into a store that deletes by the retention rule.

    Returns the list of store sizes after each write.
    """
    store, sizes = [], []
    for k in range(1, n + 1):
        store.append(k)
        if keep_last > 0:
            store = [j for j in store
                     if j > k - keep_last or (milestone_every > 0 and j % milestone_every == 0)]
        sizes.append(len(store))
    return sizes


def test_held_checkpoints_examples():
    # keep 3 + every 10th, after the 25th write: 23, 24, 25 + 10, 20
    assert F.held_checkpoints(25.0, 3.0, 10.0) == 5.0
    assert F.held_checkpoints(25.0, 0.0, 10.0) == 25.0  # keep all
    assert F.held_checkpoints(2.0, 3.0, 0.0) == 2.0
    assert F.held_checkpoints(25.0, 3.0, 0.0) == 3.0


def test_held_checkpoints_brute_force():
    N = 45
    for K, M in itertools.product(range(9), range(8)):
        sizes = simulate_store(N, K, M)
        for k in range(1, N + 1):
            assert F.held_checkpoints(float(k), float(K), float(M)) == sizes[k - 1], (k, K, M)


def test_held_checkpoint_sum_closed_form_brute_force():
    N = 60
    for K, M in itertools.product(list(range(13)) + [59, 60, 61, 1000], list(range(10)) + [59, 61]):
        sizes = simulate_store(N, K, M)
        running = 0
        assert F.held_checkpoint_sum(0.0, float(K), float(M)) == 0.0
        for n in range(1, N + 1):
            running += sizes[n - 1]
            assert F.held_checkpoint_sum(float(n), float(K), float(M)) == running, (n, K, M)


@pytest.mark.parametrize("n,K,M", [(10**6, 3, 0), (10**6, 3, 7), (123_457, 5, 1000), (10**6, 0, 0),
                                   (999_999, 100, 1), (2**20, 2, 2)])
def test_held_checkpoint_sum_large_n(n, K, M):
    # exact integer arithmetic: per checkpoint j, the writes k in j..n after which it is still held
    total = 0
    for j in range(1, n + 1):
        forever = K == 0 or (M > 0 and j % M == 0)
        total += (n - j + 1) if forever else min(K, n - j + 1)
    assert F.held_checkpoint_sum(float(n), float(K), float(M)) == pytest.approx(total, rel=1e-15)


def test_reference_checkpoint_counts_grouped_equal_loop():
    """The reference model's no-loop path (long runs) agrees with its loop."""
    for n, K, M in itertools.product(range(30), range(7), range(6)):
        assert ref.stored_checkpoint_intervals(n, K, M) == ref.stored_checkpoint_intervals(
            n, K, M, loop_limit=-1), (n, K, M)
        assert ref.held_after(n, K, M) == ref.held_after(n, K, M, loop_limit=-1)


# ---------------------------------------------------------------------------
# The job layout's memory (layout._memory): ZeRO model states (DeepSpeed estimators) and
# activations (Korthikanti et al. 2022 Table 2), on one plan at a time
# ---------------------------------------------------------------------------
def _arr(fields, **values):
    """A layout input array (layout.MODEL_FIELDS / HW_FIELDS / JOB_FIELDS / PLAN_FIELDS) by field name."""
    out = np.zeros(len(fields))
    for k, v in values.items():
        out[fields.index(k)] = v
    return out


def gpt_model(n_params, L=32.0, h=4096.0, a=32.0, V=32000.0, ffn=None, method_full=True):
    """A GPT-style layer (4h GELU MLP: Korthikanti's 34 bytes), n_params parameters, all dense."""
    return _arr(layout.MODEL_FIELDS, layers=L, hidden=h, heads=a, kv_heads=a, head_dim=h / a,
                ffn=4.0 * h if ffn is None else ffn, vocab=V, gated=0.0, n_total=n_params, n_active=n_params,
                n_trainable=n_params)


# no communication buffers; the loss's logits at the default one FP32 copy (efficiency.logit_bytes)
NO_BUFFERS = _arr(layout.HW_FIELDS, memory_bytes=1e15, logit_bytes=4.0)


def memory(model, plan, seq=2048.0, global_batch=1.0, method=0.0, fp8=0.0, extra=0.0, hw=NO_BUFFERS):
    # the frozen base's bytes per parameter, as kernel._fill_job_pins sets them
    base = F.NF4_BYTES_PER_PARAM if method == F.METHOD_QLORA else (1.0 if fp8 else 2.0)
    job = _arr(layout.JOB_FIELDS, seq=seq, global_batch=global_batch, gpus=1.0, method=method, mbs_mult=1.0,
               fp8=fp8, extra_weights=extra, tokens_per_seq=seq, base_bytes=base)
    out = np.zeros(layout.NROW)
    total = layout._memory(model, hw, job, plan, out)
    kinds = ("mem_weights", "mem_grads", "mem_optimizer", "mem_activations", "mem_buffers")
    got = {k[4:]: out[layout.NP + layout.TERM_FIELDS.index(k)] for k in kinds}
    assert total == pytest.approx(sum(got.values()), rel=1e-15)
    return got


def plan(tp=1.0, pp=1.0, dp=1.0, cp=1.0, ep=1.0, mb=1.0, rc=1.0, zero=0.0, v=1.0, sp=None):
    return _arr(layout.PLAN_FIELDS, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, micro_batch=mb, recompute=rc, zero=zero,
                interleave=v, sp=(1.0 if tp > 1 else 0.0) if sp is None else sp)


def deepspeed_zero2_gpu_mem(total_params, total_gpus):
    """deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs, cpu_offload=False."""
    return 4 * total_params + int(16 * total_params / total_gpus)


def deepspeed_zero3_gpu_mem(total_params, largest_layer_params, total_gpus):
    """deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs, no offload."""
    largest_layer_memory = 4 * largest_layer_params
    return largest_layer_memory + int(18 * total_params / total_gpus)


@pytest.mark.parametrize("N", [125e6, 7e9, 70e9, 671e9])
@pytest.mark.parametrize("gpus", [1, 8, 64, 1024])
def test_zero2_zero3_equal_deepspeed_estimators(N, gpus):
    m = gpt_model(N)
    states = ("weights", "grads", "optimizer")
    z2 = memory(m, plan(dp=gpus, zero=2.0))
    z3 = memory(m, plan(dp=gpus, zero=3.0))
    assert sum(z2[k] for k in states) == pytest.approx(deepspeed_zero2_gpu_mem(N, gpus), rel=1e-12, abs=1.0)
    # ZeRO-3's "largest layer" is the two prefetched bf16 layers in the buffers: 4 bytes x one layer's
    # 12 h^2 parameters (attention 4 h^2 + MLP 8 h^2)
    layer = 12 * 4096.0 ** 2
    logits = 4 * 2048 * 32000
    assert sum(z3[k] for k in states) + z3["buffers"] - logits == pytest.approx(
        deepspeed_zero3_gpu_mem(N, layer, gpus), rel=1e-12, abs=1.0)


def test_model_states_7b_on_8_gpus_by_hand():
    m = gpt_model(7e9)
    states = ("weights", "grads", "optimizer")

    def st(zero, dp=8.0, **kw):
        got = memory(m, plan(dp=dp, zero=zero, **kw))
        return sum(got[k] for k in states)
    assert st(0.0) == 140e9  # 20 N, nothing sharded
    assert st(1.0) == pytest.approx(56e9 + 10.5e9)  # 8N + 12N/8
    assert st(2.0) == pytest.approx(28e9 + 14e9)  # 4N + 16N/8
    assert st(3.0) == pytest.approx(15.75e9)  # 18N/8
    # tensor x pipeline parallelism divide the parameters a GPU holds
    assert st(2.0, tp=2.0, pp=2.0) == pytest.approx((28e9 + 14e9) / 4)
    # context parallelism shards ZeRO like data parallelism (dp x cp replicas of the model)
    assert st(3.0, dp=4.0, cp=2.0) == pytest.approx(15.75e9)
    # on one replica ZeRO-1/2 are 20 N, ZeRO-3 drops the bf16 gradients: 18 N (DeepSpeed's estimators)
    for z in (0.0, 1.0, 2.0):
        assert st(z, dp=1.0) == pytest.approx(140e9)
    assert st(3.0, dp=1.0) == pytest.approx(126e9)


def test_lora_and_qlora_states_by_hand():
    m = gpt_model(7e9)
    m[layout.MODEL_FIELDS.index("n_trainable")] = 40e6
    lora = memory(m, plan(), method=F.METHOD_LORA)
    adapters = 2 * 40e6  # the adapters' own BF16 weights
    assert lora["weights"] == 14e9 + adapters  # frozen bf16 base
    # AdamW on the adapters: 2 (grad) + 4 (FP32 master) + 8 (m, v) bytes besides the weight: 16 in all
    assert lora["grads"] == 2 * 40e6 and lora["optimizer"] == 12 * 40e6
    q = memory(m, plan(), method=F.METHOD_QLORA)
    assert q["weights"] == pytest.approx(F.NF4_BYTES_PER_PARAM * 7e9 + adapters)  # 3.61 GB of NF4
    assert q["grads"] + q["optimizer"] == 14 * 40e6  # the same adapters, the same optimizer
    assert memory(m, plan(), method=F.METHOD_LORA, fp8=1.0)["weights"] == 7e9 + adapters  # an FP8 base: 1 byte
    assert memory(m, plan(dp=4.0, zero=3.0), method=F.METHOD_LORA)["weights"] == 14e9 / 4 + adapters
    # a frozen bf16 copy of another model (DPO live reference), sharded only by ZeRO-3
    assert memory(m, plan(dp=4.0, zero=2.0), extra=7e9)["weights"] == 14e9 + 14e9
    assert memory(m, plan(dp=4.0, zero=3.0), extra=7e9)["weights"] == pytest.approx((14e9 + 14e9) / 4)


def test_activations_korthikanti_table2():
    s, h, a, L, V = 2048.0, 4096.0, 32.0, 32.0, 32000.0
    m = gpt_model(7e9, L, h, a, V)
    sbh = 2048 * 4096  # 8,388,608
    logits = 4 * 2048 * 32000  # fp32 logits: 262,144,000, a buffer
    # no recompute: s b h (34 + 5 a s / h) per layer; 5 x 32 x 2048 / 4096 = 80
    none = 32 * sbh * (34 + 80)
    assert none == 30_601_641_984
    got = memory(m, plan(rc=F.RECOMPUTE_MODE_NONE))
    assert got["activations"] == pytest.approx(none, rel=1e-14) and got["buffers"] == logits
    # selective (no s^2 attention scores): 34 s b h per layer
    assert memory(m, plan(rc=F.RECOMPUTE_MODE_SELECTIVE))["activations"] == pytest.approx(32 * 34 * sbh, rel=1e-14)
    # full: the 2 s b h layer input per layer + one layer (34 s b h) recomputed at a time
    full = 32 * 2 * sbh + 34 * sbh
    assert memory(m, plan(rc=F.RECOMPUTE_MODE_FULL))["activations"] == pytest.approx(full, rel=1e-14)
    # tensor + sequence parallelism divides everything by t (Table 2, last rows), logits too
    tp8 = memory(m, plan(tp=8.0, rc=F.RECOMPUTE_MODE_NONE))
    assert tp8["activations"] == pytest.approx(none / 8, rel=1e-14) and tp8["buffers"] == logits / 8
    # without sequence parallelism the 10 s b h of norms and dropout are not split: s b h (10 + 24 / t)
    no_sp = memory(m, plan(tp=8.0, sp=0.0))["activations"]
    assert no_sp == pytest.approx(32 * sbh * (10 + 24 / 8), rel=1e-14)
    # micro-batch 4 is four times the memory
    assert memory(m, plan(mb=4.0))["activations"] == pytest.approx(4 * 32 * 34 * sbh, rel=1e-14)
    # FP8 keeps the 14 bytes of linear-layer inputs in one byte: 34 - 7
    assert memory(m, plan(), fp8=1.0)["activations"] == pytest.approx(32 * 27 * sbh, rel=1e-14)


def test_activations_pipeline_in_flight():
    """1F1B: the first stage holds min(p, m) micro-batches of L/p layers (Narayanan et al. 2021 Sec. 2.2)."""
    m = gpt_model(7e9)
    layer = 34 * 2048 * 4096
    # p = 4, 64 micro-batches per replica: 4 in flight x 8 layers = all 32 layers' worth
    assert memory(m, plan(pp=4.0), global_batch=64.0)["activations"] == pytest.approx(32 * layer, rel=1e-14)
    # only 2 micro-batches: 2 x 8 layers
    assert memory(m, plan(pp=4.0), global_batch=2.0)["activations"] == pytest.approx(16 * layer, rel=1e-14)
    # interleaving v = 2 adds (p - 1) / (p v) = 3/8
    assert memory(m, plan(pp=4.0, v=2.0), global_batch=64.0)["activations"] == pytest.approx(
        32 * layer * (1 + 3 / 8), rel=1e-14)


# ---------------------------------------------------------------------------
# The job layout's step-time pieces
# ---------------------------------------------------------------------------
def test_gemm_efficiency_by_hand():
    # a 4096-cube at half_dim 320: 0.8 / (1 + 320 x 3 / 4096) = 0.8 / 1.234375 = 0.648
    assert layout.gemm_efficiency(4096.0, 4096.0, 4096.0, 0.8, 320.0) == pytest.approx(0.8 / 1.234375, rel=1e-15)
    # one small dimension of 320 loses a third of it on its own (the docstring's definition)
    assert layout.gemm_efficiency(320.0, 1e300, 1e300, 0.9, 320.0) == pytest.approx(0.45, rel=1e-12)
    assert layout.gemm_efficiency(0.0, 4096.0, 4096.0, 0.8, 320.0) == 0.8


def test_gemm_half_dim_follows_the_ops_per_byte_ratio():
    # the fitted 320 holds on Selene's A100 80GB (312 TFLOP/s over 2.0 TB/s = 156 FLOP/byte)
    assert layout.gemm_half_dim_for(320.0, 312.0, 2.0) == pytest.approx(320.0, rel=1e-15)
    # an H100 SXM: 989 / 3.35 = 295.2 FLOP/byte, so 320 x 295.2 / 156 = 605.6 elements
    assert layout.gemm_half_dim_for(320.0, 989.0, 3.35) == pytest.approx(320.0 * 989.0 / 3.35 / 156.0, rel=1e-15)
    assert layout.gemm_half_dim_for(320.0, 989.0, 3.35) == pytest.approx(605.6, abs=0.05)
    # an A100 40GB (1.555 TB/s) needs larger matrices than the 80GB for the same share of the same peak
    assert layout.gemm_half_dim_for(320.0, 312.0, 1.555) > 320.0


def test_ring_and_overlap_by_hand():
    # all-gather of 1 GB over 8 ranks at 450 GB/s x 0.7: 7/8 GB / 315 GB/s = 2.78 ms
    assert layout.ring_seconds(1e9, 8.0, 450e9, 0.7) == pytest.approx(0.875e9 / 315e9, rel=1e-15)
    assert layout.ring_seconds(1e9, 1.0, 450e9, 0.7) == 0.0
    # 3 s of communication behind a 2 s window: 1 s sticks out, plus 30% of the 2 s hidden
    assert layout.overlapped_seconds(3.0, 2.0, 0.3) == pytest.approx(1.0 + 0.6)
    assert layout.overlapped_seconds(1.0, 5.0, 0.0) == 0.0
    assert layout.overlapped_seconds(1.0, -1.0, 0.5) == 1.0


# ---------------------------------------------------------------------------
# Whole-scenario arithmetic by hand (one stage, everything else switched off)
# ---------------------------------------------------------------------------
QUIET = {
    "model": {"params_b": 7.0, "layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008},
    "hardware": {"gpu": "h100-80gb", "num_gpus": 8, "usd_per_gpu_hour": 2.0},
    "reliability": {"failures_per_gpu_hour": 0.0, "idle_fraction": 0.0, "failed_run_fraction": 0.0},
    "labor": {"researcher": {"fte": 0}, "ml_engineer": {"fte": 0}, "data_engineer": {"fte": 0},
              "infra_engineer": {"fte": 0}},
    "ops": {"usd_per_month": 0},
}


def test_pretrain_compute_by_hand():
    scn = dict(QUIET, stages={"pretrain": {"tokens_b": 10, "mfu": 0.4, "seq_len": 4096, "setup_months": 0,
                                           "cleaning_usd_per_b_tokens": 0}})
    res = costcore.estimate(scn)
    flops = 48_442_450_944.0 * 10e9  # (6N + 12Lds) x tokens
    hours = flops / (989e12 * 0.4) / 3600
    assert res.stat("pretrain", "productive_gpu_hours") == pytest.approx(hours, rel=1e-12)
    assert res.items[0, 0] == pytest.approx(hours * 2.0, rel=1e-12)  # compute.gpu at $2/GPU-h


def test_sft_lora_tokens_per_gpu_s_by_hand():
    scn = dict(QUIET, stages={"sft": {"samples": 1000, "tokens_per_sample": 500, "epochs": 2, "method": "lora",
                                      "tokens_per_gpu_s": 2500, "experiments": 0, "labels": 0}})
    res = costcore.estimate(scn)
    # 1000 x 500 x 2 = 1e6 tokens at 2500 tokens/s/GPU = 400 GPU-s = 0.1111 GPU-h
    assert res.stat("sft", "productive_gpu_hours") == pytest.approx(1e6 / 2500 / 3600, rel=1e-12)


@pytest.mark.parametrize("ctx,window,share", [(32768, 4096, 0.75), (8192, 4096, 1.0), (4096, 4096, 1.0),
                                              (2048, 4096, 0.5), (10000, 1, 1.0), (16384, 1024, 5 / 6)])
def test_attention_context_is_the_per_query_count_of_keys(ctx, window, share):
    """formulas.attention_context against a literal count: a query at position i (1..ctx) sees i keys in a full
    causal layer and min(i, w) in a sliding-window layer; the cost relative to full attention is the ratio of
    the counts, layer share weighted (Beltagy et al. 2020; Mistral 7B Sec. 2)."""
    import numpy as np
    from costcore.engine.formulas import attention_context
    i = np.arange(1, ctx + 1, dtype=np.float64)
    full, local = i.sum(), np.minimum(i, window).sum()
    want = ctx * ((1 - share) + share * local / full)
    assert attention_context(float(ctx), float(window), share) == pytest.approx(want, rel=2e-4)
    assert attention_context(float(ctx), 0.0, share) == ctx  # no window: the causal context


@pytest.mark.parametrize("ctx,window,share,want", [(32768, 4096, 0.75, 0.25 * 32768 + 0.75 * 4096),
                                                   (2048, 4096, 0.5, 2048), (8192, 0, 1.0, 8192),
                                                   (10240, 4096, 1.0, 4096)])
def test_kv_context_keeps_only_the_window_in_windowed_layers(ctx, window, share, want):
    """Mistral 7B Sec. 2's rolling buffer: a windowed layer holds the last w tokens of K and V, a full one all."""
    from costcore.engine.formulas import kv_context
    assert kv_context(float(ctx), float(window), share) == want


def test_a_windowed_model_decodes_long_contexts_with_less_kv():
    """GRPO rollouts of 2K-token prompts and 16K-token answers on a Gemma-2-style model (half the layers in a
    4,096-token window): the rollouts read less KV cache per step than the same model with full attention,
    so they take fewer GPU-hours."""
    import costcore
    base = {"model": {"params_b": 9.24, "layers": 42, "hidden": 3584, "heads": 16, "kv_heads": 8, "vocab": 256000},
            "hardware": {"gpu": "h100-80gb", "num_gpus": 64},
            "stages": {"rl": {"algorithm": "grpo", "reward": "rule", "steps": 20, "prompt_tokens": 2048,
                              "response_tokens": 16384}}}
    full = costcore.estimate(base)
    base["model"].update(sliding_window=4096, sliding_window_share=0.5)
    half = costcore.estimate(base)
    assert half.stat("rl", "rollout_gpu_hours") < full.stat("rl", "rollout_gpu_hours")
