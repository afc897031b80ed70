"""The command line: presets by name, the preset list, ``--set``, and bad input.

Bad input must exit with code 2 and print exactly one line on stderr that
names the offending field (or file / option), never a traceback. Most cases
call :func:`costcore.cli.main.main` in-process (fast); a handful go through a real
``python -m costcore`` subprocess to check the process-level contract.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from shared import ROOT
from shared import run_cli as run_in_process

from costcore import api
from costcore.cli import main as cli
from costcore.scenario.schema import CATALOG
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)

PRESET = "llama2-7b-pretrain"


def run_cli(*args: str, timeout: float = NEVER_S) -> subprocess.CompletedProcess:
    """Run ``python -m costcore ARGS`` as a real process from the repository root."""
    return subprocess.run([sys.executable, "-m", "costcore", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    """``costcore.cli.main.main(args)`` in-process: (exit code, stdout, stderr)."""
    return run_in_process(capsys, args)


def estimate_json(capsys, *args: str) -> dict:
    rc, out, err = run_main(capsys, "estimate", *args, "--format", "json")
    assert rc in (0, 3), err
    assert (rc == 3) == (json.loads(out)["feasible"] is False), "exit code 3 exactly when the plan is infeasible"
    return json.loads(out)


def assert_one_line_error(rc, out, err, names: tuple[str, ...]):
    assert rc == 2, f"exit code {rc}, stderr: {err!r}"
    assert "Traceback" not in err
    assert err.strip(), "no message on stderr"
    assert err.strip().count("\n") == 0, f"more than one line on stderr: {err!r}"
    assert err.startswith("error: "), err
    for n in names:
        assert n in err, f"{n!r} not named in {err!r}"
    assert out == "", f"stdout should be empty on error, got {out[:200]!r}"


# ---------------------------------------------------------------------------
# Presets by name, the preset list
# ---------------------------------------------------------------------------
def test_estimate_preset_by_name_subprocess():
    proc = run_cli("estimate", PRESET)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "Llama-2-7B pretraining" in proc.stdout.splitlines()[0]
    assert any(line.startswith("Pre-train ") for line in proc.stdout.splitlines())
    assert any(line.startswith("TOTAL") for line in proc.stdout.splitlines())


def test_preset_by_name_equals_preset_by_path(capsys):
    by_name = estimate_json(capsys, PRESET)
    by_path = estimate_json(capsys, str(ROOT / "presets" / f"{PRESET}.yaml"))
    assert by_name == by_path


def test_presets_command_lists_every_file():
    proc = run_cli("presets")
    assert proc.returncode == 0, proc.stderr
    listed = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    files = sorted(p.stem for p in (ROOT / "presets").glob("*.yaml"))
    assert listed == files
    for name in files:
        title = api.load_preset(name)["name"]
        assert any(line.split(None, 1)[0] == name and line.rstrip().endswith(title)
                   for line in proc.stdout.splitlines()), f"{name}: title {title!r} not listed"


# ---------------------------------------------------------------------------
# --set
# ---------------------------------------------------------------------------
def test_set_more_tokens_costs_more_compute(capsys):
    base = estimate_json(capsys, PRESET)["stages"]["pretrain"]
    more = estimate_json(capsys, PRESET, "--set", "stages.pretrain.tokens_b=4000")["stages"]["pretrain"]
    assert more["usd"]["compute"] > base["usd"]["compute"]
    assert more["productive_gpu_hours"] > base["productive_gpu_hours"]
    ratio = more["usd"]["compute"] / base["usd"]["compute"]
    assert 1.9 <= ratio <= 2.1, f"doubling the tokens scaled compute by {ratio:.3f}"
    assert more["usd_total"] > base["usd_total"]


def test_set_enables_a_stage(capsys):
    base = estimate_json(capsys, PRESET)
    assert "sft" not in base["stages"]
    d = estimate_json(capsys, PRESET, "--set", "stages.sft.method=lora")
    assert set(d["stages"]) == {"pretrain", "sft"}
    assert d["stages"]["sft"]["usd_total"] > 0
    assert d["total_usd"] > base["total_usd"]
    assert math.isclose(d["total_usd"], sum(s["usd_total"] for s in d["stages"].values()), rel_tol=1e-9)


def test_set_changes_a_stage_method(capsys):
    full = estimate_json(capsys, "alpaca-7b-sft")["stages"]["sft"]
    lora = estimate_json(capsys, "alpaca-7b-sft", "--set", "stages.sft.method=lora")["stages"]["sft"]
    # LoRA checkpoints hold only the adapters.
    assert lora["checkpoint_gb"] < full["checkpoint_gb"] / 10
    assert lora["usd_total"] != full["usd_total"]


def _price(stage: dict) -> float:
    return stage["usd"]["compute"] / stage["productive_gpu_hours"]


def test_set_gpu_changes_the_price(capsys):
    a100 = estimate_json(capsys, PRESET)["stages"]["pretrain"]
    h100 = estimate_json(capsys, PRESET, "--set", "hardware.gpu=h100-80gb")["stages"]["pretrain"]
    assert math.isclose(_price(a100), CATALOG["a100-80gb"]["usd_per_gpu_hour"], rel_tol=1e-9)
    assert math.isclose(_price(h100), CATALOG["h100-80gb"]["usd_per_gpu_hour"], rel_tol=1e-9)
    # A faster GPU needs fewer GPU-hours for the same work.
    assert h100["productive_gpu_hours"] < a100["productive_gpu_hours"]


def test_set_explicit_price_wins_over_gpu_catalog(capsys):
    d = estimate_json(capsys, PRESET, "--set", "hardware.gpu=h100-80gb", "--set", "hardware.usd_per_gpu_hour=1.5")
    assert math.isclose(_price(d["stages"]["pretrain"]), 1.5, rel_tol=1e-9)


def test_set_nested_labor_key(capsys):
    base = estimate_json(capsys, PRESET)["stages"]["pretrain"]["usd"]["labor"]
    none = estimate_json(capsys, PRESET, *sum((["--set", f"labor.{r}.fte=0"] for r in
                                               ("researcher", "ml_engineer", "data_engineer", "infra_engineer")), []))
    assert base > 0
    assert none["stages"]["pretrain"]["usd"]["labor"] == 0


def test_set_through_a_real_process():
    proc = run_cli("estimate", PRESET, "--set", "stages.pretrain.tokens_b=4000",
                   "--set", "stages.eval.runs=3", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert set(d["stages"]) == {"pretrain", "eval"}


# ---------------------------------------------------------------------------
# Bad input: exit 2, one line on stderr naming the field, no traceback
# ---------------------------------------------------------------------------
HUGE_INT = "1" + "0" * 400  # a YAML int too big for a float


def bad(case_id, text, extra, names, marks=()):
    """One bad-input case: file text (None = no file), extra CLI args, substrings the error must contain."""
    return pytest.param(text, extra, names, id=case_id, marks=marks)


BAD_FILES = [
    bad("unknown-key", "model: {paramz_b: 7}\n", (), ("model.paramz_b",)),
    bad("unknown-section", "modle: {params_b: 7}\n", (), ("modle",)),
    bad("wrong-type", 'model: {params_b: "seven"}\n', (), ("model.params_b", "seven")),
    bad("bool-for-number", "model: {params_b: true}\n", (), ("model.params_b",)),
    bad("negative-tokens", "stages:\n  pretrain: {tokens_b: -100}\n", (), ("stages.pretrain.tokens_b",)),
    bad("zero-gpus", "hardware: {num_gpus: 0}\n", (), ("hardware.num_gpus",)),
    bad("above-max", "model: {params_b: 99999}\n", (), ("model.params_b",)),
    bad("fractional-int", "model: {layers: 32.5}\n", (), ("model.layers",)),
    bad("nan", "model: {params_b: .nan}\n", (), ("model.params_b",)),
    bad("inf", "stages:\n  pretrain: {tokens_b: .inf}\n", (), ("stages.pretrain.tokens_b",)),
    bad("minus-inf", "hardware: {usd_per_gpu_hour: -.inf}\n", (), ("hardware.usd_per_gpu_hour",)),
    bad("unknown-stage", "stages:\n  pretraining: {}\n", (), ("stages.pretraining",)),
    bad("key-not-in-stage", "stages:\n  eval: {tp: 2}\n", (), ("stages.eval.tp",)),
    bad("bad-enum", "stages:\n  sft: {method: dora}\n", (), ("stages.sft.method",)),
    bad("stage-not-mapping", "stages:\n  pretrain: 5\n", (), ("stages.pretrain",)),
    bad("unknown-gpu", "hardware: {gpu: h900}\n", (), ("hardware.gpu", "h900")),
    bad("malformed-yaml", "model: {params_b: [1, 2\n", (), ("bad.yaml", "YAML")),
    bad("tab-indent", "model:\n\tparams_b: 7\n", (), ("bad.yaml", "YAML")),
    bad("duplicate-key", "model:\n  params_b: 7\n  params_b: 8\n", (), ("bad.yaml", "params_b", "twice")),
    bad("alias", "model: &m {params_b: 7}\nhardware: *m\n", (), ("bad.yaml", "alias")),
    bad("list-file", "- model\n- hardware\n", (), ("scenario", "mapping")),
    bad("empty-file", "", (), ("scenario",)),
    bad("name-not-text", "name: [a, b]\n", (), ("name",)),
    bad("set-without-equals", "stages: {pretrain: {}}\n", ("--set", "stages.pretrain.tokens_b"), ("--set",)),
    bad("set-unknown-key", "stages: {pretrain: {}}\n", ("--set", "model.paramz_b=3"), ("model.paramz_b",)),
    bad("set-bad-value", "stages: {pretrain: {}}\n", ("--set", "stages.pretrain.tokens_b=-1"),
        ("stages.pretrain.tokens_b",)),
    bad("set-nan", "stages: {pretrain: {}}\n", ("--set", "model.params_b=.nan"), ("model.params_b",)),
    bad("set-empty-value", "stages: {pretrain: {}}\n", ("--set", "model.params_b="), ("model.params_b",)),
    bad("set-empty-key", "stages: {pretrain: {}}\n", ("--set", "=3"), ("--set",)),
    bad("set-unknown-stage", "stages: {pretrain: {}}\n", ("--set", "stages.rlhf.steps=3"), ("stages.rlhf",)),
    bad("format-xml", "stages: {pretrain: {}}\n", ("--format", "xml"), ("--format", "xml")),
    bad("missing-file", None, (), ("bad.yaml", "no such file")),
    bad("huge-int", f"model: {{params_b: {HUGE_INT}}}\n", (), ("model.params_b",)),
    bad("tiny-throughput", "stages:\n  pretrain: {tokens_per_gpu_s: 1.0e-300}\n", (),
        ("stages.pretrain.tokens_per_gpu_s",)),
    bad("dotted-and-nested-duplicate", "labor:\n  researcher.fte: 3\n  researcher: {fte: 4}\n", (),
        ("labor.researcher.fte",)),
]


@pytest.mark.parametrize("text, extra, names", BAD_FILES)
def test_bad_input_in_process(capsys, tmp_path, text, extra, names):
    path = tmp_path / "bad.yaml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    rc, out, err = run_main(capsys, "estimate", str(path), *extra)
    assert_one_line_error(rc, out, err, names)


def test_bad_bytes_in_process(capsys, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"\xff\xfe\x00model: {}\n")
    rc, out, err = run_main(capsys, "estimate", str(path))
    assert_one_line_error(rc, out, err, ("bad.yaml", "UTF-8"))


def test_unknown_preset_name(capsys):
    rc, out, err = run_main(capsys, "estimate", "no-such-preset")
    assert_one_line_error(rc, out, err, ("preset", "no-such-preset", "python -m costcore presets lists all"))
    rc, out, err = run_main(capsys, "estimate", "pipeline-70")  # a near miss is offered the close names
    assert_one_line_error(rc, out, err, ("did you mean pipeline-70b or pipeline-70b-lora-grpo?",))


def test_missing_subcommand(capsys):
    rc, out, err = run_main(capsys)
    assert rc == 2 and "Traceback" not in err and err.strip().count("\n") == 0


SUBPROCESS_BAD = [
    ("unknown-key", "model: {paramz_b: 7}\n", (), ("model.paramz_b",)),
    ("nan", "model: {params_b: .nan}\n", (), ("model.params_b",)),
    ("malformed-yaml", "model: {params_b: [1, 2\n", (), ("bad.yaml", "YAML")),
    ("missing-file", None, (), ("bad.yaml", "no such file")),
    ("set-without-equals", "stages: {pretrain: {}}\n", ("--set", "model.params_b"), ("--set",)),
    ("format-xml", "stages: {pretrain: {}}\n", ("--format", "xml"), ("--format",)),
]


@pytest.mark.parametrize("text, extra, names", [c[1:] for c in SUBPROCESS_BAD], ids=[c[0] for c in SUBPROCESS_BAD])
def test_bad_input_real_process(tmp_path, text, extra, names):
    path = tmp_path / "bad.yaml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    proc = run_cli("estimate", str(path), *extra)
    assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, names)


# ---------------------------------------------------------------------------
# Consistency of the per-stage plan fields in the JSON output
# ---------------------------------------------------------------------------
def test_fits_implies_enough_gpus(capsys, tmp_path):
    """A stage reported as fitting must have at least min_gpus GPUs.

    A 70B model in bf16 (140 GB of weights) cannot be evaluated on one 80 GB
    GPU; the core says it needs 4 GPUs (min_gpus) but also that it fits.
    """
    path = tmp_path / "eval70.yaml"
    path.write_text("model: {params_b: 70}\nhardware: {gpu: h100-80gb, num_gpus: 1}\nstages: {eval: {}}\n",
                    encoding="utf-8")
    st = estimate_json(capsys, str(path))["stages"]["eval"]
    assert not (st["fits"] and st["num_gpus"] < st["min_gpus"]), st


# ---------------------------------------------------------------------------
# validate --runs FILE.csv: anyone can check their own runs the same way
# ---------------------------------------------------------------------------
def test_validate_own_runs_csv(capsys, tmp_path):
    f = tmp_path / "mine.csv"
    f.write_text("name,params_total_b,tokens_b,seq_len,gpu,num_gpus,days,gpu_hours\n"
                 "Mine-8B,8,1000,4096,H100 SXM,512,5,\n"
                 "Mine-30B,30,500,2048,TPU v4,1024,,200000\n"
                 "NoFigure,7,1000,2048,A100,64,,\n", encoding="utf-8")
    rc, out, err = run_main(capsys, "validate", "--runs", str(f), "--format", "json")
    assert rc == 0, err
    runs = {r["run"]: r for r in json.loads(out)["runs"]}
    assert set(runs) == {"Mine-8B", "Mine-30B"}  # the row without a published figure is left out
    assert runs["Mine-8B"]["basis"] == "days" and runs["Mine-30B"]["basis"] == "GPU-hours"
    # the same scenario through estimate gives the same days
    res = api.estimate({"model": {"params_b": 8, "active_params_b": 8},
                        "hardware": {"gpu": "h100-80gb", "num_gpus": 512},
                        "stages": {"pretrain": {"tokens_b": 1000, "seq_len": 4096}}})
    assert runs["Mine-8B"]["predicted"] == pytest.approx(res.stat("pretrain", "wall_days"))
    rc, out, _ = run_main(capsys, "validate", "--runs", str(f))
    assert rc == 0 and "not scored: NoFigure: no GPU-hours" in out


@pytest.mark.parametrize("content, needle", [
    ("a,b\n1,2\n", "lacks the column(s) name, params_total_b, tokens_b, gpu, gpu_hours or days"),
    ("name,params_total_b,tokens_b,gpu,days,num_gpus\nBig,7,100,H100,3,1e12\n", "run Big: hardware.num_gpus"),
    ('name,params_total_b,tokens_b,gpu,days,num_gpus\n"Open,7,100,H100,3,8\n', "not a readable CSV"),
])
def test_validate_bad_runs_csv_is_one_line(capsys, tmp_path, content, needle):
    f = tmp_path / "bad.csv"
    f.write_text(content, encoding="utf-8")
    rc, out, err = run_main(capsys, "validate", "--runs", str(f))
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and needle in err, err


def test_validate_missing_runs_file(capsys):
    rc, _, err = run_main(capsys, "validate", "--runs", "no-such-file.csv")
    assert rc == 2 and "expected reference, extra or a CSV file" in err


def test_validate_json_is_strict_json(capsys):
    """Unpublished figures (days of a run that published GPU-hours) are null, not NaN."""
    rc, out, _ = run_main(capsys, "validate", "--format", "json")
    assert rc == 0
    data = json.loads(out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    days = {r["run"]: r["published_days"] for r in data["runs"]}
    assert days["LLaMA-7B"] is None and days["TinyLlama-1.1B"] == 90.0
    assert all(r["predicted_days"] > 0 and r["predicted_gpu_hours"] > 0 for r in data["runs"])


@pytest.mark.parametrize("argv, said", [
    (["estimate", ""], "error: scenario: is empty: give a preset's name or a YAML file's path"),
    (["estimate", "llama3-8b", "--org-efficiency", "/nonexistent/org.yaml"], "error: org_efficiency: org.yaml: no such file"),
    (["actuals", "import", "--db", "/tmp/costcore-never.duckdb", "/"], "error: file: /: is a folder, not a file"),
])
def test_file_arguments_are_refused_in_words_not_python_names(argv, said):
    """'.: is not a file' for an empty name, 'cannot read org.yaml: FileNotFoundError' (or ParserError), and 'no
    such file' for a folder that is there: each file argument is refused in words."""
    out = subprocess.run([sys.executable, "-m", "costcore", *argv], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    assert out.returncode == 2 and out.stderr.strip() == said, out.stderr
