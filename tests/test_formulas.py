"""Each cost formula with its arithmetic written out by hand.

The numbers in these tests are typed from the papers and tools the
docstrings cite (PaLM App. B, peft, DeepSpeed's memory estimators,
Korthikanti et al. 2022, LLNL scr's Young/Daly script), so a change in a
formula shows up here as a plain arithmetic mismatch.

Every call passes floats, so numba compiles (or loads from its cache) one
specialization per function. ``test_jit_parity.py`` runs this same file again
with ``NUMBA_DISABLE_JIT=1``.
"""
from __future__ import annotations

import itertools
import math

import pytest
import reference_model as ref

import costcore
from costcore.engine import formulas as F
from costcore.engine.kernel import LINE_ITEMS

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
    # L^3 = 7e9 / (12 * 128^2) = 7e9 / 196608 = 35603.8  ->  L = 32.89 -> 33
    assert 7e9 / 196608 == pytest.approx(35603.84, rel=1e-6)
    assert L == 33.0
    # d = sqrt(7e9 / (12 * 33)) = sqrt(17,676,767.7) = 4204.37
    assert d == pytest.approx(math.sqrt(7e9 / 396.0), rel=1e-12)
    assert d == pytest.approx(4204.375, rel=1e-6)
    assert 12.0 * L * d * d == pytest.approx(7e9, rel=1e-12)  # N = 12 L d^2
    assert a == pytest.approx(d / 128.0, rel=1e-12)
    assert kv == a
    assert ffn == pytest.approx(4.0 * d, rel=1e-12)


def test_model_shape_175b_is_gpt3_like():
    L, d, _a, _kv, _ffn = F.model_shape(175.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    # L^3 = 175e9 / 196608 = 890,096  ->  L = 96.2 -> 96 (GPT-3 has 96 layers)
    assert L == 96.0
    # d = sqrt(175e9 / 1152) = 12,325 (GPT-3: 12,288)
    assert d == pytest.approx(math.sqrt(175e9 / 1152.0), rel=1e-12)
    assert abs(d - 12288.0) / 12288.0 < 0.01


def test_model_shape_smallest_model():
    L, d, a, _kv, _ffn = F.model_shape(0.01, 0.0, 0.0, 0.0, 0.0, 0.0)
    # L^3 = 1e7 / 196608 = 50.86 -> L = 3.70 -> 4 ; d = sqrt(1e7 / 48) = 456.4
    assert L == 4.0
    assert d == pytest.approx(math.sqrt(1e7 / 48.0), rel=1e-12)
    assert a == pytest.approx(d / 128.0, rel=1e-12)


def test_model_shape_given_values_are_kept():
    assert F.model_shape(7.0, L7, D7, A7, 8.0, FFN7) == (L7, D7, A7, 8.0, FFN7)
    L, d, _a, _kv, _ffn = F.model_shape(7.0, 40.0, 0.0, 0.0, 0.0, 0.0)
    assert L == 40.0 and d == pytest.approx(math.sqrt(7e9 / (12 * 40)), rel=1e-12)


# ---------------------------------------------------------------------------
# LoRA trainable parameters
# ---------------------------------------------------------------------------
def test_lora_params_llama7b_qv_r16():
    # q: 16 (4096 + 4096) = 131,072 ; v: the same (no GQA) ; 32 layers
    assert F.lora_trainable_params(L7, D7, D7, FFN7, 16.0, 0.0) == 32 * 2 * 131_072 == 8_388_608


def test_lora_params_llama7b_all_linear_r16():
    # attention q,k,v,o: 4 x 131,072 = 524,288
    # MLP gate, up (4096 -> 11008) and down (11008 -> 4096): 3 x 16 x 15,104 = 724,992
    # per layer 1,249,280 ; 32 layers: 39,976,960 (what peft prints for LLaMA-7B, r=16, all linear)
    assert F.lora_trainable_params(L7, D7, D7, FFN7, 16.0, 2.0) == 39_976_960
    assert F.lora_trainable_params(L7, D7, D7, FFN7, 16.0, 1.0) == 32 * 524_288


def test_lora_params_gqa_llama2_70b_r8_attn():
    # LLaMA-2-70B: L = 80, d = 8192, 64 heads of 128, 8 KV heads -> kv_dim = 1024
    r, d, kv = 8.0, 8192.0, 1024.0
    q = r * (d + d)
    k = v = r * (d + kv)
    o = r * (d + d)
    assert F.lora_trainable_params(80.0, d, kv, 28672.0, r, 1.0) == 80 * (q + k + v + o) == 80 * 409_600
    assert F.lora_trainable_params(80.0, d, kv, 28672.0, r, 0.0) == 80 * (q + v)


@pytest.mark.parametrize("rank", [1.0, 8.0, 64.0])
@pytest.mark.parametrize("targets", ["qv", "attn", "all"])
def test_lora_params_match_reference(rank, targets):
    shape = ref.model_shape(13e9, 0, 0, 0, 0, 0)
    code = {"qv": 0.0, "attn": 1.0, "all": 2.0}[targets]
    got = F.lora_trainable_params(shape["L"], shape["d"], shape["kv_dim"], shape["ffn"], rank, code)
    assert got == pytest.approx(ref.lora_params(shape, rank, targets), rel=1e-14)


# ---------------------------------------------------------------------------
# FLOPs per token
# ---------------------------------------------------------------------------
def test_train_flops_full_7b_at_4096():
    # 6N = 42,000,000,000 ; 12 L d s = 12 x 32 x 4096 x 4096 = 6,442,450,944
    assert 12 * 32 * 4096 * 4096 == 6_442_450_944
    assert F.train_flops_per_token(7e9, L7, D7, 4096.0, 0.0, 0.0, 0.0) == 48_442_450_944.0


def test_train_flops_lora_and_qlora():
    n_lora = 39_976_960.0  # LLaMA-7B r=16 all linear, see above
    # LoRA: 4N + 12Lds + 6 N_lora = 28e9 + 6,442,450,944 + 239,861,760
    assert F.train_flops_per_token(7e9, L7, D7, 4096.0, 1.0, n_lora, 0.3) == 34_682_312_704.0
    # QLoRA, 30% dequantization: 4N x 1.3 = 36.4e9 instead of 28e9
    assert F.train_flops_per_token(7e9, L7, D7, 4096.0, 2.0, n_lora, 0.3) == pytest.approx(
        43_082_312_704.0, rel=1e-15)
    # the overhead is ignored by plain LoRA, and dequant 0 makes QLoRA = LoRA
    assert F.train_flops_per_token(7e9, L7, D7, 4096.0, 2.0, n_lora, 0.0) == 34_682_312_704.0


def test_forward_flops_is_a_third_of_training():
    # 2N + 4 L d s = 14e9 + 2,147,483,648
    fwd = F.forward_flops_per_token(7e9, L7, D7, 4096.0)
    assert fwd == 16_147_483_648.0
    assert 3.0 * fwd == F.train_flops_per_token(7e9, L7, D7, 4096.0, 0.0, 0.0, 0.0)


def test_gpu_hours_for_flops():
    # 1e21 FLOPs at 40% of 989 TFLOP/s: 1e21 / 395.6e12 s = 2,527,805.9 s = 702.17 h
    assert F.gpu_hours_for_flops(1e21, 989.0, 0.4) == pytest.approx(1e21 / (989e12 * 0.4) / 3600, rel=1e-15)
    assert F.gpu_hours_for_flops(1e21, 989.0, 0.4) == pytest.approx(702.168, rel=1e-5)


# ---------------------------------------------------------------------------
# Default MFU
# ---------------------------------------------------------------------------
def test_default_mfu_reference_point():
    # a 10B model: size term (10/10)^-0.045 = 1, small-model term 10 / 10.3
    assert F.default_mfu(0.5, 10.0, 8.0, 0.045, 0.3, 4096.0, 0.015, 0.05) == pytest.approx(0.5 * 10 / 10.3,
                                                                                          rel=1e-14)


def test_default_mfu_7b():
    expected = 0.5 * (7.0 / 10.0) ** -0.045 * 7.0 / 7.3  # = 0.4872
    assert F.default_mfu(0.5, 7.0, 8.0, 0.045, 0.3, 4096.0, 0.015, 0.05) == pytest.approx(expected, rel=1e-14)
    assert expected == pytest.approx(0.48721, abs=1e-5)
    # x 0.97 selective recompute = 0.4726, the MFU a default 7B pre-training run reports
    assert expected * 0.97 == pytest.approx(0.47259, abs=1e-5)


def test_default_mfu_cluster_term():
    base = F.default_mfu(0.5, 70.0, 4096.0, 0.045, 0.3, 4096.0, 0.015, 0.05)
    # 16,384 GPUs = 2 doublings above 4,096: x (1 - 0.015 x 2) = x 0.97
    big = F.default_mfu(0.5, 70.0, 16384.0, 0.045, 0.3, 4096.0, 0.015, 0.05)
    assert big == pytest.approx(base * 0.97, rel=1e-14)
    # the term never goes below x 0.2: 10 doublings at 0.5 per doubling
    huge = F.default_mfu(0.5, 70.0, 4096.0 * 1024, 0.045, 0.3, 4096.0, 0.5, 0.001)
    assert huge == pytest.approx(base * 0.2, rel=1e-14)


def test_default_mfu_clipped():
    assert F.default_mfu(1.0, 10.0, 8.0, 0.0, 0.0, 4096.0, 0.0, 0.05) == 0.75
    assert F.default_mfu(0.01, 0.001, 8.0, 0.045, 100.0, 4096.0, 0.0, 0.05) == 0.05


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
    dps, t, b = F.decode_gpu_seconds_per_token(7e9, 7e9, kv, 1024.0, 2048.0, 256.0, 989.0, 3.35, 80.0, 0.5)
    # room for KV: 0.9 x 80e9 - 14e9 = 58e9 bytes; one sequence at 2048 tokens: 1,073,741,824 bytes
    assert math.floor(58e9 / 1_073_741_824) == 54
    assert (t, b) == (1.0, 54.0)
    step = (14e9 + 54 * kv * 1024) / 3.35e12 / 0.5
    assert dps == pytest.approx(step / 54, rel=1e-14)


def test_decode_compute_bound_large_batch():
    # no KV cache to speak of and 100,000 sequences: the step is 2 N B / peak
    dps, _t, b = F.decode_gpu_seconds_per_token(7e9, 7e9, 0.0, 1024.0, 2048.0, 1e5, 989.0, 3.35, 80.0, 0.5)
    assert b == 1e5
    assert 2 * 7e9 * 1e5 / 989e12 > 14e9 / 3.35e12
    assert dps == pytest.approx(2 * 7e9 / 989e12 / 0.5, rel=1e-14)  # 2 N / (peak x efficiency) per token


def test_decode_moe_reads_all_weights_but_computes_active():
    # 671B total, 37B active, 8 x 80 GB is not enough for 1342 GB of weights: t = ceil(1342 / 40) = 34
    dps, t, _b = F.decode_gpu_seconds_per_token(671e9, 37e9, 70_000.0, 1000.0, 2000.0, 1.0, 989.0, 3.35, 80.0,
                                                1.0)
    assert t == 34.0
    memory_s = (1342e9 + 70_000.0 * 1000.0) / (34 * 3.35e12)
    assert dps == pytest.approx(memory_s * 34, rel=1e-14)


def test_decode_matches_reference():
    for args in [(7e9, 7e9, 524_288.0, 1536.0, 2560.0, 256.0, 989.0, 3.35, 80.0, 0.5),
                 (70e9, 70e9, 327_680.0, 3000.0, 4000.0, 64.0, 312.0, 2.0, 80.0, 0.7),
                 (671e9, 37e9, 70_000.0, 9000.0, 16000.0, 512.0, 989.0, 4.8, 141.0, 0.3)]:
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
# Memory: ZeRO model states (DeepSpeed estimators) and activations (Korthikanti)
# ---------------------------------------------------------------------------
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
    largest = 32000.0 * 4096.0  # the embedding of LLaMA-7B: 131,072,000 parameters
    z2 = F.model_state_bytes_per_gpu(N, 2.0, float(gpus), 1.0, largest)
    z3 = F.model_state_bytes_per_gpu(N, 3.0, float(gpus), 1.0, largest)
    assert z2 == pytest.approx(deepspeed_zero2_gpu_mem(N, gpus), rel=1e-12, abs=1.0)
    assert z3 == pytest.approx(deepspeed_zero3_gpu_mem(N, largest, gpus), rel=1e-12, abs=1.0)


def test_model_states_7b_on_8_gpus_by_hand():
    N, largest = 7e9, 131_072_000.0
    assert F.model_state_bytes_per_gpu(N, 0.0, 8.0, 1.0, largest) == 140e9  # 20 N, nothing sharded
    assert F.model_state_bytes_per_gpu(N, 1.0, 8.0, 1.0, largest) == 56e9 + 10.5e9  # 8N + 12N/8
    assert F.model_state_bytes_per_gpu(N, 2.0, 8.0, 1.0, largest) == 28e9 + 14e9  # 4N + 16N/8
    assert F.model_state_bytes_per_gpu(N, 3.0, 8.0, 1.0, largest) == 15.75e9 + 524_288_000  # 18N/8 + 4 x 131M
    # model parallelism tp x pp = 4 divides everything
    assert F.model_state_bytes_per_gpu(N, 2.0, 8.0, 4.0, largest) == (28e9 + 14e9) / 4
    # on one GPU every stage is 20 N (+ the gathered largest layer for ZeRO-3)
    for z in (0.0, 1.0, 2.0):
        assert F.model_state_bytes_per_gpu(N, z, 1.0, 1.0, largest) == 140e9
    assert F.model_state_bytes_per_gpu(N, 3.0, 1.0, 1.0, largest) == 126e9 + 524_288_000


def test_activations_korthikanti_table2():
    s, b, h, a, L, V = 2048.0, 1.0, 4096.0, 32.0, 32.0, 32000.0
    sbh = 2048 * 4096  # 8,388,608
    logits = 4 * 2048 * 32000  # fp32 logits: 262,144,000
    # no recompute: s b h (34 + 5 a s / h) per layer; 5 x 32 x 2048 / 4096 = 80
    none = 32 * sbh * (34 + 80) + logits
    assert none == 30_863_785_984
    assert F.activation_bytes_per_gpu(L, h, a, s, b, V, 0.0, 1.0) == none
    # selective (no s^2 attention scores): 34 s b h per layer
    selective = 32 * 34 * sbh + logits
    assert selective == 9_388_949_504
    assert F.activation_bytes_per_gpu(L, h, a, s, b, V, 1.0, 1.0) == selective
    # full: the 2 s b h layer input per layer + one layer (34 s b h) recomputed at a time
    full = 32 * 2 * sbh + 34 * sbh + logits
    assert full == 1_084_227_584
    assert F.activation_bytes_per_gpu(L, h, a, s, b, V, 2.0, 1.0) == full
    # tensor + sequence parallelism divides everything by t (Table 2, last rows)
    assert F.activation_bytes_per_gpu(L, h, a, s, b, V, 0.0, 8.0) == none / 8
    # micro-batch 4 is four times the memory
    assert F.activation_bytes_per_gpu(L, h, a, s, 4.0, V, 1.0, 1.0) == 4 * selective


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


def test_attention_mfu_factor_worked_example():
    # Llama-3-8B shape (L=32, d=4096) at 8K context: attention 12*32*4096*8192 = 1.2885e10 FLOPs
    # per token against 6N = 4.818e10, so a = 0.21100; at e = 0.45: 1/((1-a) + a/e) = 0.79498
    attn = 12.0 * 32 * 4096 * 8192
    a = attn / (6.0 * 8.03e9 + attn)
    assert a == pytest.approx(0.211003, rel=1e-5)
    assert F.attention_mfu_factor(8.03e9, 32.0, 4096.0, 8192.0, 0.45) == pytest.approx(
        1.0 / ((1.0 - a) + a / 0.45), rel=1e-14)
    assert F.attention_mfu_factor(8.03e9, 32.0, 4096.0, 8192.0, 0.45) == pytest.approx(0.79498, rel=1e-4)
    assert F.attention_mfu_factor(8.03e9, 32.0, 4096.0, 8192.0, 1.0) == 1.0
    assert F.attention_mfu_factor(0.0, 0.0, 0.0, 0.0, 0.45) == 1.0
