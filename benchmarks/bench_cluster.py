"""Shared cluster benchmark: prints numbers, asserts nothing.

    python benchmarks/bench_cluster.py               # all three parts
    python benchmarks/bench_cluster.py --skip-page   # no AppTest part

(a) The shipped quarter (presets/portfolios/cluster-quarter.yaml): one recomputation after a what-if =
    ClusterModel.run (the scheduler) + the per-project, per-team and attribution tables + the JSON.
    Estimates are made once before the clock starts (they do not depend on the knobs). Target <= 50 ms.
(b) 10,000 jobs over a year: 2,500 four-stage projects of 20 teams on 4,096 H100s (the same recomputation).
    Target <= 2 s on 2 cores.
(c) The page's rerun after a what-if (AppTest, server side, pages/cluster.py). Target <= 150 ms.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _recompute(model, **knobs):
    res = model.run(**knobs)
    res.to_json()
    res.attribute(["team", "resource"])
    res.usage_over_time()
    return res


def _median_ms(fn, n):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), min(times), max(times)


def bench_quarter(n: int) -> None:
    from costcore.cluster import portfolio, results
    t0 = time.perf_counter()
    model = results.ClusterModel(portfolio.load("cluster-quarter"))
    setup = time.perf_counter() - t0
    _recompute(model)  # compile or load the scheduler from numba's cache
    projects = list(model.portfolio.projects)
    k = [0]

    def one():
        k[0] += 1
        _recompute(model, project_priority={projects[k[0] % len(projects)]: 200 + k[0] % 7},
                   burst=bool(k[0] % 2))
    med, lo, hi = _median_ms(one, n)
    print(f"(a) shipped quarter: {len(projects)} projects, {len(model.jobs.gpus)} jobs; estimates once {setup:.2f} s")
    print(f"    recomputation after a what-if: median {med:.1f} ms (min {lo:.1f}, max {hi:.1f}; {n} runs)"
          f"  target <= 50 ms")


def year_portfolio(projects: int = 2500, teams: int = 20) -> dict:
    """A synthetic year: four-stage llama3-8b-like projects of several sizes, deadlines, priorities."""
    import random
    rnd = random.Random(18)
    pf = {"name": "A year on 4,096 H100s", "horizon_days": 365,
          "pools": {"h100": {"gpu": "h100-80gb", "gpus": 4096, "reserved_usd_per_gpu_hour": 2.1,
                             "burst": {"usd_per_gpu_hour": 3.9, "max_gpus": 512}}},
          "teams": {f"team-{t:02d}": {"quota_gpus": 192, "borrowing_limit_gpus": 512, "priority": t % 5}
                    for t in range(teams)}, "projects": {}}
    for i in range(projects):
        start = rnd.uniform(0, 330)
        pf["projects"][f"p{i:04d}"] = {
            "team": f"team-{i % teams:02d}", "preset": "llama3-8b", "start_day": round(start, 2),
            "deadline_day": round(start + rnd.uniform(5, 40), 2), "priority": rnd.randint(0, 9),
            "set": {"stages.pretrain.tokens_b": rnd.choice([60, 120, 240]),
                    "stages.pretrain.num_gpus": rnd.choice([32, 64, 128])}}
    return pf


def bench_year(n: int) -> None:
    from costcore.cluster import portfolio, results
    t0 = time.perf_counter()
    pf = portfolio.validate(year_portfolio())
    model = results.ClusterModel(pf)
    setup = time.perf_counter() - t0
    res = _recompute(model)
    med, lo, hi = _median_ms(lambda: _recompute(model, burst=False), n)
    s = res.summary
    print(f"(b) a year: {len(pf.projects):,} projects, {len(model.jobs.gpus):,} jobs, "
          f"{int((res.out[:, 7]).sum()):,} preemptions, utilization {s['utilization']:.0%}; setup {setup:.1f} s")
    print(f"    recomputation: median {med:.0f} ms (min {lo:.0f}, max {hi:.0f}; {n} runs)  target <= 2,000 ms")


def bench_page(n: int) -> None:
    import logging
    from streamlit.testing.v1 import AppTest
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").setLevel(logging.ERROR)
    at = AppTest.from_file(str(ROOT / "pages" / "cluster.py"), default_timeout=300)
    at.run()
    times = []
    for k in range(n):
        prio = next(x for x in at.number_input if x.label == "Its priority")
        prio.set_value(int(prio.value) + (5 if k % 2 == 0 else -5))
        t0 = time.perf_counter()
        at.run()
        times.append((time.perf_counter() - t0) * 1000)
        assert not at.exception, [e.value for e in at.exception]
    print(f"(c) page rerun after a what-if (AppTest, {n} moves): median {statistics.median(times):.0f} ms "
          f"(min {min(times):.0f}, max {max(times):.0f})  target <= 150 ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--skip-page", action="store_true")
    a = ap.parse_args()
    bench_quarter(a.runs)
    bench_year(max(3, a.runs // 10))
    if not a.skip_page:
        bench_page(max(5, a.runs // 2))


if __name__ == "__main__":
    main()
