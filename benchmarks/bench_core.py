"""Cost-core benchmark: prints numbers, asserts nothing.

    python benchmarks/bench_core.py            # jitted path (+ pure-Python path in a subprocess)
    python benchmarks/bench_core.py --n 200000 # fewer variants

Measures: one full multi-stage scenario (evaluate_vector and the whole
costcore.estimate incl. validation), batch throughput for N variants of a
six-stage scenario, and the same on the pure-Python path
(NUMBA_DISABLE_JIT=1, extrapolated from a smaller batch).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import costcore  # noqa: E402
from costcore.scenario import schema  # noqa: E402
from costcore.engine import kernel
from costcore.analysis import sensitivity as S  # noqa: E402

SCENARIO = {
    "name": "bench: 70B, all six stages",
    "model": {"params_b": 70},
    "hardware": {"gpu": "h100-80gb", "num_gpus": 2048},
    "stages": {"pretrain": {"tokens_b": 15000, "tp": 8, "pp": 4}, "cpt": {"tokens_b": 200, "tp": 8},
               "sft": {"method": "lora", "num_gpus": 64}, "dpo": {"num_gpus": 64},
               "rl": {"algorithm": "ppo", "num_gpus": 256}, "eval": {}},
}


def timeit(fn, repeat=5, number=1):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def variants(n, rng):
    """n variants of SCENARIO moving 6 inputs at once."""
    return {
        "model.params_b": rng.uniform(7, 400, n),
        "stages.pretrain.tokens_b": rng.uniform(1000, 30000, n),
        "hardware.usd_per_gpu_hour": rng.uniform(1.5, 4, n),
        "reliability.failures_per_gpu_hour": rng.uniform(1e-6, 1e-4, n),
        "stages.sft.lora_rank": rng.integers(4, 128, n).astype(float),
        "stages.rl.response_tokens": rng.integers(256, 16384, n).astype(float),
    }


def run(n: int, pure: bool) -> dict:
    costcore.warm_up()
    scn = costcore.load_scenario(SCENARIO)
    x = schema.to_vector(scn)
    rng = np.random.default_rng(0)
    cols = variants(n, rng)
    out = {"jit": not pure, "n": n, "threads": __import__("numba").get_num_threads()}
    # the kernel itself, not evaluate_vector's memo of an exact repeat: a fresh layout search, and an
    # evaluation on kept plans (what a change of price, epochs or data costs)
    out["one_vector_s"] = timeit(lambda: kernel._single(x, 0.0), number=20 if pure else 2000)
    _, _, kept = kernel._single(x, 0.0)
    out["one_reusing_s"] = timeit(lambda: kernel._single_reusing(x, kept.copy()), number=20 if pure else 2000)
    out["one_estimate_s"] = timeit(lambda: costcore.estimate(scn), number=5 if pure else 200)
    validated = costcore.Scenario.of(scn)
    out["one_estimate_scenario_s"] = timeit(lambda: costcore.estimate(validated), number=5 if pure else 2000)
    # plans fixed at the base's (replan=False, as the Monte Carlo does): the layout is re-timed per row
    out["batch_s"] = timeit(lambda: costcore.batch(scn, cols, vector=x, replan=False), repeat=3)
    out["batch_per_s"] = n / out["batch_s"]
    out["batch_full_s"] = timeit(lambda: costcore.batch(scn, cols, full=True, vector=x, replan=False), repeat=3)
    # every row searching its own plans (distinct model sizes): the plan search dominates
    m = min(n, 2000)
    few = {k: v[:m] for k, v in cols.items()}
    out["replan_n"] = m
    out["replan_s"] = timeit(lambda: costcore.batch(scn, few, vector=x), repeat=1)
    out["tornado_inputs"] = len(S.tornado(scn).table)
    out["tornado_s"] = timeit(lambda: S.tornado(scn), repeat=7)
    hm = 200 if not pure else 20
    xs, ys = np.geomspace(7, 400, hm), np.geomspace(1000, 30000, hm)
    out["heatmap_cells"] = hm * hm
    out["heatmap_s"] = timeit(lambda: S.heatmap(scn, "model.params_b", xs, "stages.pretrain.tokens_b", ys), repeat=3)
    mc_n = 1_000_000 if not pure else 2_000
    out["mc_n"] = mc_n
    out["mc_s"] = timeit(lambda: S.monte_carlo(scn, n=mc_n, seed=1), repeat=3 if not pure else 1)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--pure-n", type=int, default=2_000)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run(args.n, pure=True)))
        return
    r = run(args.n, pure=False)
    print(f"numba threads: {r['threads']}")
    print(f"one scenario (6 stages), kernel only, layouts searched: {r['one_vector_s'] * 1e6:10.2f} us")
    print(f"one scenario, kernel only, on kept layouts (a price or data change): {r['one_reusing_s'] * 1e6:10.2f} us")
    print(f"one scenario, estimate(dict) incl. validation: {r['one_estimate_s'] * 1e6:10.2f} us")
    print(f"one scenario, estimate(Scenario), validated once: {r['one_estimate_scenario_s'] * 1e6:10.2f} us")
    print(f"batch of {r['n']:,} variants (stage totals): {r['batch_s'] * 1e3:8.1f} ms -> {r['batch_per_s']:,.0f} scenarios/s")
    print(f"batch of {r['n']:,} variants (full breakdown): {r['batch_full_s'] * 1e3:8.1f} ms -> {r['n'] / r['batch_full_s']:,.0f} scenarios/s")
    print(f"batch of {r['replan_n']:,} variants each searching its plans: {r['replan_s'] * 1e3:8.1f} ms -> "
          f"{r['replan_n'] / r['replan_s']:,.0f} scenarios/s")
    print(f"tornado over all {r['tornado_inputs']} inputs (2 variants each): {r['tornado_s'] * 1e3:8.2f} ms   (target <= 5 ms)")
    print(f"heatmap {r['heatmap_cells']:,} cells: {r['heatmap_s'] * 1e3:8.1f} ms   (target <= 50 ms)")
    print(f"Monte Carlo {r['mc_n']:,} samples (sampling + kernel + percentiles): {r['mc_s']:.3f} s   (target <= 1 s)")
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    p = subprocess.run([sys.executable, __file__, "--child", "--n", str(args.pure_n)], env=env,
                       capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        print("pure-Python run failed:", p.stderr.strip().splitlines()[-1:])
        return
    q = json.loads(p.stdout.strip().splitlines()[-1])
    print(f"pure Python (NUMBA_DISABLE_JIT=1): one scenario {q['one_vector_s'] * 1e6:,.0f} us; "
          f"batch {q['batch_per_s']:,.0f} scenarios/s (n={q['n']:,})")
    print(f"pure Python: tornado {q['tornado_s'] * 1e3:,.0f} ms; heatmap {q['heatmap_cells']:,} cells "
          f"{q['heatmap_s'] * 1e3:,.0f} ms (200x200 would take ~{q['heatmap_s'] * 100:,.0f} s); "
          f"Monte Carlo {q['mc_n']:,} samples {q['mc_s']:.2f} s (1,000,000 would take ~{q['mc_s'] * 500:,.0f} s)")
    print(f"speed-up of the jitted batch over pure Python: {r['batch_per_s'] / q['batch_per_s']:,.0f}x")


if __name__ == "__main__":
    main()
