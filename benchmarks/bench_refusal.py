"""How fast bad input is refused: prints numbers, asserts nothing.

    python benchmarks/bench_refusal.py            # 5 runs each, median and worst
    python benchmarks/bench_refusal.py --runs 9

Two figures per probe file of the hostile-input review (issue "Hardening, second pass"):

* parse: ``costcore.load_yaml_text`` on the bytes, in this process (the limits
  on the raw text, then libyaml's C parser where PyYAML has it). Target: a
  near-limit file in <= 200 ms.
* CLI: ``python -m costcore estimate FILE`` end to end in a fresh interpreter,
  from exec to exit code 2 (Python's start, the light imports, the refusal;
  numba and pandas are only imported for valid input). Target: <= 300 ms.

Last, the ratio the test suite used to assert (a flow list within every limit against an
ordinary block list of the same items, parsed in this process; it was <= 10 when the
pure-Python flow parser took seconds).

The targets are printed beside the numbers; nothing here fails a build.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from costcore.scenario import yamlio  # noqa: E402
from costcore.errors import ScenarioError  # noqa: E402

CAP = yamlio.MAX_YAML_BYTES


def probe_files() -> dict[str, bytes]:
    flow = b"[" + b"1," * ((CAP - 3) // 2) + b"1]"
    return {
        "99,999-byte flow list": flow[: CAP - 1].rsplit(b",", 1)[0] + b"]",
        "5,000-deep flow": b"model: " + b"[" * 5000 + b"1" + b"]" * 5000,
        "block list under the cap": b"- 1\n" * (CAP // 4 - 1),
        "many keys under the cap": "".join(f"k{i}: 1\n" for i in range(CAP // 10)).encode()[: CAP - 200],
        "near-limit flow within limits": b"model: [" + b", ".join(b"1" for _ in range(yamlio.MAX_FLOW_ITEMS - 10))
                                         + b"]\n",
        "near-limit lines within limits": b"model:\n" + b"".join(b"  - 1\n" for _ in range(yamlio.MAX_LINES - 10)),
        "12-deep mapping (the depth limit + 1)": ("".join("  " * i + f"k{i}:\n" for i in range(13)) + "  " * 13
                                                  + "v: 1\n").encode(),
        "alias bomb": b"a: &a [1, 1, 1]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n",
        "negative model size": b"model:\n  params_b: -5\n",
        "NaN GPU count": b"hardware:\n  num_gpus: .nan\n",
        "binary": bytes(range(256)) * 4,
        "50 MB file (size check only)": b"",  # written sparse below
    }


def time_parse(data: bytes, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        try:
            yamlio.parse_yaml(data, what="upload")
        except ScenarioError:
            pass
        out.append(time.perf_counter() - t0)
    return out


def time_cli(path: Path, runs: int) -> tuple[list[float], int]:
    out, rc = [], 0
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "costcore", "estimate", str(path)], cwd=ROOT, env=env,
                              capture_output=True, check=False)
        out.append(time.perf_counter() - t0)
        rc = proc.returncode
    return out, rc


def ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e3:7.1f} ms (worst {max(xs) * 1e3:6.1f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    print(f"libyaml C parser: {'yes' if yamlio.USING_LIBYAML else 'NO (pure-Python parser)'}; "
          f"limits: {CAP:,} bytes, {yamlio.MAX_LINES:,} lines, {yamlio.MAX_FLOW_ITEMS:,} flow items, "
          f"depth {yamlio.MAX_DEPTH}")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(f"bare Python start: {(time.perf_counter() - t0) * 1e3:.0f} ms\n")
    print(f"{'probe':40s} {'bytes':>9s}  {'parse (target <= 200 ms)':32s} {'CLI end to end (target <= 300 ms)':34s} exit")
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in probe_files().items():
            path = Path(tmp) / "probe.yaml"
            if name.startswith("50 MB"):
                with open(path, "wb") as fh:
                    fh.write(b"name: big\n")
                    fh.truncate(50 * 1024 * 1024)
                parse = "(not read: refused by its size)"
                size = 50 * 1024 * 1024
            else:
                path.write_bytes(data)
                parse = ms(time_parse(data, args.runs))
                size = len(data)
            cli, rc = time_cli(path, args.runs)
            print(f"{name:40s} {size:>9,}  {parse:32s} {ms(cli):34s} {rc}")
    n_items = yamlio.MAX_FLOW_ITEMS - 10
    flow = ("model: [" + ", ".join("1" for _ in range(n_items)) + "]\n").encode()
    block = ("model:\n" + "".join("  - 1\n" for _ in range(n_items))).encode()
    t_flow = min(time_parse(flow, args.runs * 3))
    t_block = min(time_parse(block, args.runs * 3))
    print(f"\nflow list vs block list of the same {n_items:,} items: {t_flow * 1e3:.1f} ms vs {t_block * 1e3:.1f} ms, "
          f"ratio {t_flow / t_block:.2f} (was asserted <= 10 in the suite)")


if __name__ == "__main__":
    main()
