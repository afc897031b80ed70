"""Plan search speed: every TP x PP x DP x CP x EP x micro-batch x recompute x ZeRO x interleave plan
of a job, evaluated and ranked (costcore.engine.layout.search through costcore.api.plans).

Prints seconds per search (best of 5, after one warm-up that compiles or loads the numba cache) and
how many plans fit. Issue bar: GPT-3 13B on 64 H100 < 1 s; GPT-3 175B on 1,024 GPUs < 5 s (Calculon's
exhaustive search of the 13B space took over 9 minutes on the same machine class).
Run: python benchmarks/bench_layout.py
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from costcore import api  # noqa: E402
from costcore.engine import kernel  # noqa: E402
from costcore.scenario.loaders import Scenario  # noqa: E402

CASES = {
    "GPT-3 13B on 64 H100": ({"params_b": 13.0, "layers": 40, "hidden": 5120, "heads": 40, "gated": False,
                              "ffn": 20480, "vocab": 51200}, "h100-80gb", 64),
    "GPT-3 175B on 1,024 A100": ({"params_b": 175.0, "layers": 96, "hidden": 12288, "heads": 96, "gated": False,
                                  "ffn": 49152, "vocab": 51200}, "a100-80gb", 1024),
    "GPT-3 175B on 1,024 H100": ({"params_b": 175.0, "layers": 96, "hidden": 12288, "heads": 96, "gated": False,
                                  "ffn": 49152, "vocab": 51200}, "h100-80gb", 1024),
    "DeepSeek-V3 (MoE) on 2,048 H800": ({"hf_config": "deepseek-v3"}, "h800", 2048),
    "DeepSeek-V3 on 2,048 H800, searched": ({"hf_config": "deepseek-v3"}, "h800", 2048, {"schedule": "search"}),
}


def main():
    for name, (model, gpu, n, *stage) in CASES.items():
        scn = Scenario.of({"model": model, "hardware": {"gpu": gpu, "num_gpus": n},
                           "stages": {"pretrain": {"tokens_b": 300, "seq_len": 2048, **(stage[0] if stage else {})}}})
        kernel.stage_plans(scn.vector, 0, 10)  # warm-up
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            rows, fits = kernel.stage_plans(scn.vector, 0, 10)
            best = min(best, time.perf_counter() - t)
        top = api.plans(scn, "pretrain", 1)[0]
        print(f"{name:34s} search {best * 1e3:8.2f} ms  plans that fit {fits:6d}  best: TP {top['tp']} PP {top['pp']} "
              f"DP {top['dp']} CP {top['cp']} EP {top['ep']} mb {top['micro_batch']} {top['recompute']} "
              f"ZeRO-{top['zero']} {top['schedule']} step {top['step_time_s']:.3g} s")
    scn = Scenario.of("pipeline-70b")
    api.estimate(scn)
    total = 0.0
    for _ in range(20):
        kernel.clear_memos()  # a new scenario each time, not the memo of a repeat
        t = time.perf_counter()
        api.estimate(scn)
        total += time.perf_counter() - t
    print(f"estimate(pipeline-70b, 6 stages, each searched): {total / 20 * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
