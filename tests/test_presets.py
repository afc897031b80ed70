"""Every bundled preset, run through the real CLI in every output format.

Each (preset, format) pair is one ``python -m costcore estimate PATH --format
FMT`` subprocess. They are started together by a module-scoped fixture (a
few at a time, one per core) because each process spends ~1 s loading
numba's cache; the tests then only inspect the captured output.
"""
from __future__ import annotations

import io
import json
import math
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
import yaml

from shared import ROOT

from costcore import api
from costcore.scenario.schema import RESOURCES, STAGE_SHORT, STAGES
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)

PRESET_DIR = ROOT / "presets"
PRESET_PATHS = sorted(PRESET_DIR.glob("*.yaml"))
PRESET_NAMES = [p.stem for p in PRESET_PATHS]
FORMATS = ("table", "json", "csv")
NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9_-]|\.(?![.]|$)){0,63}$")
REQUIRED = ("llama2-7b-pretrain", "scratch-7b", "llama3-8b", "pipeline-70b", "vertical-7b-lora",
            "reasoning-grpo-32b", "qlora-single-gpu", "moe-deepseek-v3")
STAGE_KEYS = ("gpu_hours", "productive_gpu_hours", "wall_days", "usd", "usd_total")
REL = 1e-9


def run_cli(*args: str, timeout: float = NEVER_S) -> subprocess.CompletedProcess:
    """Run ``python -m costcore ARGS`` from the repository root."""
    return subprocess.run([sys.executable, "-m", "costcore", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _strict_json(text: str):
    def bad_constant(c):
        raise ValueError(f"non-standard JSON constant {c}")
    return json.loads(text, parse_constant=bad_constant)


@pytest.fixture(scope="module")
def cli_runs() -> dict:
    """{(preset, format): CompletedProcess} for every preset and format."""
    jobs = [(p, f) for p in PRESET_PATHS for f in FORMATS]
    if not jobs:
        return {}
    # One run first so a cold numba cache is compiled once, not by every worker at once.
    first = jobs[0]
    out = {(first[0].stem, first[1]): run_cli("estimate", str(first[0]), "--format", first[1])}
    with ThreadPoolExecutor(max_workers=max(1, min(4, os.cpu_count() or 1))) as pool:
        futs = {(p.stem, f): pool.submit(run_cli, "estimate", str(p), "--format", f) for p, f in jobs[1:]}
        out.update({k: v.result() for k, v in futs.items()})
    return out


def _ok(cli_runs, name, fmt) -> str:
    proc = cli_runs[(name, fmt)]
    assert proc.returncode == 0, f"{name} --format {fmt}: exit {proc.returncode}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    assert proc.stdout.strip(), f"{name} --format {fmt}: empty output"
    return proc.stdout


def _yaml_stages(name: str) -> list[str]:
    data = yaml.safe_load((PRESET_DIR / f"{name}.yaml").read_text(encoding="utf-8"))
    return list((data.get("stages") or {}).keys())


# ---------------------------------------------------------------------------
# The preset files themselves
# ---------------------------------------------------------------------------
def test_enough_presets_and_required_ones_present():
    assert len(PRESET_PATHS) >= 8
    missing = [n for n in REQUIRED if n not in PRESET_NAMES]
    assert not missing, f"missing presets: {missing}"


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_preset_file_conventions(name):
    assert NAME_RE.match(name), f"{name}: not a loadable preset name"
    text = (PRESET_DIR / f"{name}.yaml").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines and lines[0].startswith("#"), f"{name}: must start with a comment block"
    header = []
    for line in lines:
        if not line.startswith("#"):
            break
        header.append(line)
    assert len(header) >= 3, f"{name}: the source comment block is too short"
    assert re.search(r"source", "\n".join(header), re.I), f"{name}: the comment block must say where figures come from"
    scn = api.load_preset(name)  # validates: unknown keys, ranges, types
    assert scn["name"] and scn["name"] != "Untitled scenario"
    assert scn["stages"], f"{name}: no stage enabled"


def test_llama2_preset_is_the_minimal_one():
    data = yaml.safe_load((PRESET_DIR / "llama2-7b-pretrain.yaml").read_text(encoding="utf-8"))
    assert data == {
        "name": "Llama-2-7B pretraining",
        "model": {"params_b": 6.74},
        "hardware": {"gpu": "a100-80gb", "num_gpus": 2048},
        "stages": {"pretrain": {"tokens_b": 2000, "seq_len": 4096}},
    }


# ---------------------------------------------------------------------------
# CLI output, every preset x every format
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", PRESET_NAMES)
def test_json_contract(cli_runs, name):
    d = _strict_json(_ok(cli_runs, name, "json"))
    for key in ("name", "total_usd", "stages", "resources"):
        assert key in d, f"missing top-level key {key!r}"
    assert d["name"] == api.load_preset(name)["name"]
    assert set(d["stages"]) == set(_yaml_stages(name)), "only (and all) enabled stages appear"
    assert set(d["stages"]) <= set(STAGES)
    assert set(d["resources"]) == set(RESOURCES)
    stage_sum = 0.0
    for s, st in d["stages"].items():
        for key in STAGE_KEYS:
            assert key in st, f"{s}: missing {key!r}"
        assert set(st["usd"]) == set(RESOURCES), f"{s}: usd keys"
        for key in ("gpu_hours", "productive_gpu_hours", "wall_days", "usd_total"):
            assert math.isfinite(st[key]) and st[key] >= 0, f"{s}.{key} = {st[key]}"
        assert all(math.isfinite(v) and v >= 0 for v in st["usd"].values()), f"{s}: usd {st['usd']}"
        assert math.isclose(st["usd_total"], sum(st["usd"].values()), rel_tol=REL), s
        assert st["gpu_hours"] >= st["productive_gpu_hours"] > 0, s
        stage_sum += st["usd_total"]
    assert d["total_usd"] > 0
    assert math.isclose(d["total_usd"], stage_sum, rel_tol=REL)
    assert math.isclose(d["total_usd"], sum(d["resources"].values()), rel_tol=REL)
    for r in RESOURCES:
        assert math.isclose(d["resources"][r], sum(st["usd"][r] for st in d["stages"].values()),
                            rel_tol=REL, abs_tol=1e-9), r


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_presets_fit_in_memory(cli_runs, name):
    """Presets are meant to be runnable plans: every stage fits and has enough GPUs."""
    d = _strict_json(_ok(cli_runs, name, "json"))
    for s, st in d["stages"].items():
        assert st["fits"], f"{name}/{s}: {st['memory_per_gpu_gb']:.1f} GB per GPU does not fit"
        assert st["num_gpus"] >= st["min_gpus"], f"{name}/{s}: {st['num_gpus']} GPUs < min {st['min_gpus']}"
    table = _ok(cli_runs, name, "table")
    assert "does not fit" not in table and "warning:" not in table


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_csv_sums_to_total(cli_runs, name):
    total = _strict_json(_ok(cli_runs, name, "json"))
    df = pd.read_csv(io.StringIO(_ok(cli_runs, name, "csv")))
    for col in ("stage", "resource", "usd"):
        assert col in df.columns, f"csv lacks column {col!r}"
    assert df["usd"].notna().all()
    assert math.isclose(df["usd"].sum(), total["total_usd"], rel_tol=REL)
    assert set(df["stage"]) == set(total["stages"])
    for s, st in total["stages"].items():
        assert math.isclose(df.loc[df["stage"] == s, "usd"].sum(), st["usd_total"], rel_tol=REL), s
    assert set(df["resource"]) <= set(RESOURCES)


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_table_lists_every_stage_and_total(cli_runs, name):
    d = _strict_json(_ok(cli_runs, name, "json"))
    lines = _ok(cli_runs, name, "table").splitlines()
    assert d["name"] in lines[0]
    rows = [ln for ln in lines[2:] if ln.strip()]
    for s in d["stages"]:  # a row per stage, named in words (STAGE_SHORT), never by its key
        assert any(ln.startswith(STAGE_SHORT[s] + "  ") for ln in rows), f"table lacks a row for {s}"
    assert any(ln.startswith("TOTAL") for ln in rows)


# ---------------------------------------------------------------------------
# Sanity against the published figures the presets cite (generous bounds)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name, stage, key, published, fold", [
    # Llama 2 paper Table 2: 184,320 A100-80GB GPU-hours for the 7B.
    ("llama2-7b-pretrain", "pretrain", "gpu_hours", 184_320, 1.5),
    # DeepSeek-V3 report Table 1: 2,664K H800 GPU-hours of pre-training, on the report's plan (Sec. 3.2:
    # PP 16, EP 64, ZeRO-1, DualPipe) with its node-limited routing (Sec. 2.1.2). It was 2.81x before the
    # step model had DualPipe and node-limited routing; ~1.7x now, mostly the production share every
    # run is billed at (efficiency.sustained_fraction 0.6), which this run beat.
    ("moe-deepseek-v3", "pretrain", "productive_gpu_hours", 2_664_000, 2.0),
    # Llama 3 model card: 6.4M H100 GPU-hours for the 70B.
    ("pipeline-70b", "pretrain", "productive_gpu_hours", 6_400_000, 2.0),
    # Stanford Alpaca: 3 hours on 8 A100-80GB.
    ("alpaca-7b-sft", "sft", "gpu_hours", 24, 2.0),
])
def test_presets_near_published_gpu_hours(cli_runs, name, stage, key, published, fold):
    d = _strict_json(_ok(cli_runs, name, "json"))
    got = d["stages"][stage][key]
    assert published / fold <= got <= published * fold, f"{name}/{stage}: {got:,.0f} vs published {published:,}"


def test_a_preset_read_once_is_handed_out_as_a_fresh_copy_and_reread_when_the_file_changes(tmp_path, monkeypatch):
    from costcore.scenario import loaders
    a = loaders.load_preset("llama3-8b")
    a["stages"]["pretrain"]["tokens_b"] = -1  # a caller's change stays its own
    assert loaders.load_preset("llama3-8b")["stages"]["pretrain"]["tokens_b"] > 0
    monkeypatch.setattr(loaders, "PRESET_DIR", tmp_path)
    f = tmp_path / "mine.yaml"
    f.write_text("name: first\nmodel: {params_b: 7}\nstages: {sft: {samples: 1000}}\n", encoding="utf-8")
    assert loaders.load_preset("mine")["name"] == "first"  # (a longer file: the memo's key changes with its size)
    f.write_text("name: second one\nmodel: {params_b: 7}\nstages: {sft: {samples: 1000}}\n", encoding="utf-8")
    assert loaders.load_preset("mine")["name"] == "second one"


def test_the_one_node_preset_peaks_at_its_node():
    """'Vertical 7B adaptation (CPT + LoRA SFT, 8 GPUs)' showed Peak GPUs 16: evaluation overlapped half of SFT's span
    by the schema's default, each on its own 8 GPUs. On one node it runs after SFT."""
    import costcore
    res = costcore.estimate("vertical-7b-lora")
    assert res.peak_gpus == 8 == costcore.load_preset("vertical-7b-lora")["hardware"]["num_gpus"]
