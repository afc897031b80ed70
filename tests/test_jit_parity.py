"""Same numbers with and without numba, and no trouble with threads.

pvlib style: the cost core must give the same results when numba compiles it
and when it runs as plain Python (``NUMBA_DISABLE_JIT=1``; the env var must be
set before numba is imported, hence a subprocess). Also: Streamlit serves
every session in its own thread, so concurrent ``batch`` and ``estimate``
calls must not crash and must return exactly what serial calls return.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from cases import FULL_FT_PPO_KEEP_ALL, HAND_BUILT

import costcore
from costcore.engine import kernel
from costcore.scenario.schema import GPU_NAMES
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)

ROOT = Path(__file__).resolve().parent.parent
RTOL = 1e-12

CHILD = r"""
import json, sys
import numba
import costcore
from costcore.engine import kernel
job = json.load(sys.stdin)
out = {"jit_disabled": bool(numba.config.DISABLE_JIT) and not hasattr(kernel._single, "py_func"),
       "estimates": {}}
for name, scn in job["scenarios"].items():
    res = costcore.estimate(scn)
    out["estimates"][name] = {"items": res.items.tolist(), "stats": res.stats.tolist()}
b = job["batch"]
out["batch_full"] = costcore.batch(b["scenario"], b["columns"], full=True).tolist()
out["batch_totals"] = costcore.batch(b["scenario"], b["columns"]).tolist()
from costcore.engine import sampling
out["draws"] = sampling.draw(*job["draws"]).tolist()
json.dump(out, sys.stdout)
"""


# sampling.draw's arguments: a triangular, a lognormal and a whole-number uniform input, 400 stratified draws
DRAWS = [[0, 2, 1], [[0.5, 1.0, 3.0], [2.0, 0.8, 0.0], [-3.0, 40.0, 0.0]], [0.6, 0.0, 0.0], [2.5, 1e9, 30.0],
         [0.0, 0.0, 4.0], [False, False, True], 400, 11]


def _preset_scenarios() -> dict:
    return {f"preset:{n}": costcore.load_preset(n) for n in costcore.preset_names()}


def _batch_columns(n: int = 50, seed: int = 7) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "hardware.gpu": [GPU_NAMES[i] for i in rng.integers(0, len(GPU_NAMES), n)],
        "model.params_b": np.exp(rng.uniform(np.log(0.1), np.log(700.0), n)).tolist(),
        "hardware.num_gpus": rng.integers(1, 20000, n).astype(float).tolist(),
        "stages.sft.method": [["full", "lora", "qlora"][i] for i in rng.integers(0, 3, n)],
        "stages.rl.algorithm": [["grpo", "ppo"][i] for i in rng.integers(0, 2, n)],
        "stages.rl.steps": rng.integers(1, 5000, n).astype(float).tolist(),
        "stages.pretrain.keep_last": rng.integers(0, 10, n).astype(float).tolist(),
        "reliability.failures_per_gpu_hour": rng.uniform(0.0, 1e-3, n).tolist(),
    }


@pytest.fixture(scope="module")
def no_jit_run():
    scenarios = _preset_scenarios()
    scenarios.update({f"hand:{k}": v for k, v in HAND_BUILT.items()})
    job = {"scenarios": scenarios, "batch": {"scenario": FULL_FT_PPO_KEEP_ALL, "columns": _batch_columns()},
           "draws": DRAWS}
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(job), capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=NEVER_S, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return job, json.loads(proc.stdout)


def test_child_really_ran_without_jit(no_jit_run):
    _, out = no_jit_run
    assert out["jit_disabled"]


def test_estimates_equal_without_jit(no_jit_run):
    job, out = no_jit_run
    assert set(out["estimates"]) == set(job["scenarios"])
    assert any(k.startswith("hand:") for k in out["estimates"])
    for name, scn in job["scenarios"].items():
        res = costcore.estimate(scn)
        np.testing.assert_allclose(np.array(out["estimates"][name]["items"]), res.items, rtol=RTOL, atol=1e-300,
                                   err_msg=f"{name}: items")
        np.testing.assert_allclose(np.array(out["estimates"][name]["stats"]), res.stats, rtol=RTOL, atol=1e-300,
                                   err_msg=f"{name}: stats")


def test_batch_equal_without_jit(no_jit_run):
    job, out = no_jit_run
    b = job["batch"]
    full = costcore.batch(b["scenario"], b["columns"], full=True)
    totals = costcore.batch(b["scenario"], b["columns"])
    assert full.shape[0] == 50
    np.testing.assert_allclose(np.array(out["batch_full"]), full, rtol=RTOL, atol=1e-300)
    np.testing.assert_allclose(np.array(out["batch_totals"]), totals, rtol=RTOL, atol=1e-300)


def test_monte_carlo_draws_equal_without_jit(no_jit_run):
    """The jitted draws wrap 64-bit integer products as plain numpy scalars do: one seed, the same matrix (up to
    the last bit of exp and log, whose libraries differ)."""
    from costcore.engine import sampling
    _, out = no_jit_run
    np.testing.assert_allclose(np.array(out["draws"]), sampling.draw(*DRAWS), rtol=RTOL, atol=0.0)


def test_formula_tests_pass_without_jit():
    """tests/test_formulas.py and tests/test_kernel_parts.py again, as plain Python."""
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           str(ROOT / "tests" / "test_formulas.py"), str(ROOT / "tests" / "test_kernel_parts.py")],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=NEVER_S, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


# ---------------------------------------------------------------------------
# Threads
# ---------------------------------------------------------------------------
N_THREADS = 8
CALLS = 20
# half the threads send small batches (run serially, no lock), half send batches
# big enough for the parallel kernel (serialized by config.PARALLEL_LOCK)
ROWS_SMALL = 2000
ROWS_BIG = getattr(kernel, "SERIAL_BELOW", 4096) + 904


def _thread_columns(t: int) -> dict:
    """Columns of one thread's batch. Model size and GPU count are read by the plan search, which a
    batch runs once per distinct combination: a few of each keep the searches (not the rows) few."""
    rng = np.random.default_rng(100 + t)
    ROWS = ROWS_SMALL if t % 2 == 0 else ROWS_BIG
    return {
        "model.params_b": rng.choice(np.exp(rng.uniform(np.log(0.5), np.log(400.0), 4)), ROWS),
        "hardware.num_gpus": rng.choice(rng.integers(1, 10000, 4).astype(float), ROWS),
        ["stages.pretrain.tokens_b", "stages.rl.steps", "stages.sft.samples", "stages.eval.runs"][t % 4]:
            rng.integers(1, 1000, ROWS).astype(float),
    }


def test_threads_batch_and_estimate_equal_serial():
    base = FULL_FT_PPO_KEEP_ALL
    columns = [_thread_columns(t) for t in range(N_THREADS)]
    serial_full = [costcore.batch(base, c, full=True) for c in columns]
    serial_totals = [costcore.batch(base, c) for c in columns]
    scenarios = list(HAND_BUILT.values()) + [costcore.load_preset(n) for n in costcore.preset_names()]
    serial_est = [costcore.estimate(s) for s in scenarios]

    errors: list[str] = []
    start = threading.Barrier(N_THREADS)

    def work(t: int) -> None:
        try:
            start.wait()
            for call in range(CALLS):
                full = call % 2 == 0
                got = costcore.batch(base, columns[t], full=full)
                want = serial_full[t] if full else serial_totals[t]
                if not np.array_equal(got, want):
                    errors.append(f"thread {t} call {call}: batch differs from serial")
                i = (t + call) % len(scenarios)
                res = costcore.estimate(scenarios[i])
                if not (np.array_equal(res.items, serial_est[i].items)
                        and np.array_equal(res.stats, serial_est[i].stats)):
                    errors.append(f"thread {t} call {call}: estimate of scenario {i} differs from serial")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(f"thread {t}: {exc!r}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(N_THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=NEVER_S)
    assert not any(th.is_alive() for th in threads), "a thread hung"
    assert not errors, "\n".join(errors[:20])
