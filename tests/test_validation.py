"""Fidelity: defaults against published runs, throughput reproduction, memory checks."""
from __future__ import annotations

import costcore
import pytest
from costcore.validation import runs as validation


def test_defaults_only_beat_the_plain_rule_on_published_runs():
    df = validation.validation_table()
    assert len(df) >= 12
    s = validation.summary(df)
    assert s["median_error"] <= 0.12, df[["run", "ratio"]]
    assert s["worst_fold"] <= 1.5, df[["run", "ratio"]]
    base = validation.baseline_table()
    assert s["median_error"] < base["error"].median()
    assert s["worst_fold"] < base["fold"].max()


def test_other_public_runs_are_sourced_and_beat_the_plain_rule():
    """Runs outside the reference file: each cites a source, none repeats a reference run, and the
    defaults stay well ahead of 6ND / (peak x 30%)."""
    extra = validation.load_runs("extra")
    assert len(extra) >= 14
    assert extra["source"].str.len().min() > 10
    assert not set(extra["name"]) & set(validation.load_runs("reference")["name"])
    df = validation.validation_table(dataset="extra")
    assert len(df) == len(extra)  # every row is usable (known GPU, tokens, a published figure)
    s = validation.summary(df)
    base = validation.baseline_table(dataset="extra")
    assert s["median_error"] < base["error"].median()
    assert s["worst_fold"] < base["fold"].max()
    # regression guard (docs/validation.md: 16.1%, 1.45x; these runs are in the calibration fit)
    assert s["median_error"] <= 0.18 and s["worst_fold"] <= 1.5, df[["run", "ratio"]]


def test_long_context_lowers_default_mfu():
    """The attention share of the FLOPs runs at attn_efficiency of matmul speed."""
    def mfu(seq, gpu):
        res = costcore.estimate({"model": {"params_b": 8}, "hardware": {"gpu": gpu, "num_gpus": 64},
                                 "stages": {"pretrain": {"tokens_b": 100, "seq_len": seq, "recompute": "selective"}}})
        return res.stat("pretrain", "mfu")
    assert mfu(8192, "h100-80gb") < mfu(2048, "h100-80gb") < mfu(512, "h100-80gb")
    # H100's FlashAttention-2 gap (0.45) costs more than A100's (0.80) at the same context
    h_loss = mfu(8192, "h100-80gb") / mfu(512, "h100-80gb")
    a_loss = mfu(8192, "a100-80gb") / mfu(512, "a100-80gb")
    assert h_loss < a_loss < 1.0


def test_defaults_only_use_no_published_throughput():
    for _, row in validation.pretraining_rows().iterrows():
        scn, _ = validation.scenario_for(row)
        stage = scn["stages"]["pretrain"]
        assert set(stage) == {"tokens_b", "seq_len"}
        assert set(scn["hardware"]) == {"gpu", "num_gpus"}


def test_published_throughput_reproduces_published_time():
    df = validation.validation_table(throughput=True)
    assert len(df) >= 8
    # PaLM's 64 days mix 6,144 chips for 1,200 h and 3,072 chips for 336 h plus downtime; its
    # published 46.2% MFU is the steady state, so time at that MFU is ~2/3 of the calendar.
    runs = df[df.run != "PaLM-540B"]
    bad = runs[(runs.ratio - 1).abs() > 0.10]
    assert bad.empty, bad[["run", "ratio", "notes"]]


def test_throughput_parsing():
    rows = validation.load_runs().set_index("name")
    assert validation._published_throughput(rows.loc["LLaMA-65B"], 312) == ("tokens_per_gpu_s", 380.0)
    assert validation._published_throughput(rows.loc["TinyLlama-1.1B"], 312) == ("tokens_per_gpu_s", 24000.0)
    assert validation._published_throughput(rows.loc["BLOOM-176B"], 312) == ("tflops_per_gpu", 156.0)
    key, v = validation._published_throughput(rows.loc["Llama-3.1-405B"], 989)
    assert key == "mfu" and abs(v - 0.405) < 1e-12


def _sft(params_b, gpu, gpus, method, zero=3, **extra):
    stage = {"method": method, "zero_stage": zero, "seq_len": 512, "tokens_per_sample": 512,
             "micro_batch": 1, "recompute": "full"}
    stage.update(extra)
    return costcore.estimate({"model": {"params_b": params_b}, "hardware": {"gpu": gpu, "num_gpus": gpus},
                              "stages": {"sft": stage}})


def test_qlora_65b_fits_one_48gb_gpu():
    # QLoRA (arXiv:2305.14314): Guanaco-65B fine-tuned on a single 48 GB GPU
    res = _sft(65.2, "l40s", 1, "qlora", lora_rank=64)
    assert res.stat("sft", "fits") == 1.0, res.stat("sft", "memory_per_gpu_gb")
    assert res.stat("sft", "memory_per_gpu_gb") < 48
    # LoRA on a bf16 base does not fit there: 130 GB of weights
    assert _sft(65.2, "l40s", 1, "lora").stat("sft", "fits") == 0.0


def test_full_finetune_7b_needs_sharding():
    one = _sft(7.0, "a100-80gb", 1, "full", zero=0)
    assert one.stat("sft", "fits") == 0.0
    assert one.stat("sft", "memory_per_gpu_gb") > 80
    z3 = _sft(7.0, "a100-80gb", 8, "full", zero=3)
    assert z3.stat("sft", "fits") == 1.0
    assert 1 < z3.stat("sft", "min_gpus") <= 8


def test_json_carries_memory_and_fit():
    d = _sft(7.0, "a100-80gb", 1, "full", zero=0).to_dict()
    st = d["stages"]["sft"]
    assert st["fits"] is False and st["memory_per_gpu_gb"] > 80 and st["min_gpus"] == 0


def test_validation_doc_is_current():
    import importlib.util
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("mkdoc", root / "scripts" / "make_validation_doc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (root / "docs" / "validation.md").read_text() == mod.render(), \
        "docs/validation.md is stale: run python scripts/make_validation_doc.py"


def test_explained_default_mfu_matches_the_kernel():
    """The 'Default MFU' factors explain shows are the kernel's stats, and multiply to the MFU it used."""
    from costcore.analysis import explain
    checked = 0
    for name in costcore.preset_names():
        res = costcore.estimate(costcore.load_preset(name))
        for stage in res.stages:
            f = explain.mfu_factors(res, stage)
            if f is None:
                continue
            assert f["core"] * f["attention"] * f["recompute"] * f["peft"] == res.stat(stage, "mfu"), (name, stage)
            assert f["core"] == res.stat(stage, "mfu_core") and f["attention"] == res.stat(stage, "mfu_attention")
            assert 0.0 < f["attention"] <= 1.0 and 0.0 < f["recompute"] <= 1.0
            checked += 1
    assert checked >= 10


def test_gpu_names_as_papers_write_them():
    g = validation.gpu_key
    assert g("A100-80GB") == g("A100") == g("NVIDIA A100 SXM4 80 GB") == "a100-80gb"
    assert g("A100-40GB") == g("A100 40GB") == "a100-40gb"
    assert g("H100-80GB") == g("H100 SXM") == "h100-80gb"
    assert g("TPUv4") == g("TPU v4") == "tpu-v4"
    assert g("H800") == "h800" and g("V100") == "v100"
    assert g("Gaudi2") is None and g(float("nan")) is None


def test_shipped_coefficients_are_the_calibrated_fit():
    """The defaults in schema.yaml / hardware.yaml are costcore.calibration's best fit (not hand-tuned),
    and that fit meets the issue's bar on the reference runs."""
    from costcore.validation import calibration
    from costcore.scenario.schema import BY_PATH, CATALOG
    shipped = {"a100": CATALOG["a100-80gb"]["mfu_base"], "h100": CATALOG["h100-80gb"]["mfu_base"],
               "size_exponent": CATALOG["a100-80gb"]["size_exponent"],
               "hopper_size_exponent": CATALOG["h100-80gb"]["size_exponent"],
               **{k: BY_PATH[f"efficiency.{k}"].default for k in calibration.EFFICIENCY_KEYS}}
    assert shipped == calibration.fit()[0][1]
    assert CATALOG["a100-40gb"]["mfu_base"] == shipped["a100"]
    assert CATALOG["h800"]["mfu_base"] == pytest.approx(shipped["h100"] * calibration.H800_TO_H100, abs=5e-4)
    for gpu, spec in CATALOG.items():
        want = shipped["hopper_size_exponent"] if gpu in calibration.HOPPER + ("b200",) else shipped["size_exponent"]
        assert spec["size_exponent"] == want, gpu
    g = calibration.grid()
    worst, median = calibration.score(g.ratio[g.settings.index(shipped), :g.n_reference])
    assert worst <= 1.5 and median <= 0.12


def test_leave_one_out_and_its_checked_in_summary():
    """costcore/data/calibration.yaml (read by the Monte Carlo) matches a fresh leave-one-out run."""
    import yaml
    from costcore.validation import calibration
    loo = calibration.leave_one_out()
    assert loo["runs"] == len(validation.pretraining_rows()) + len(validation.pretraining_rows(dataset="extra"))
    # regression guard (docs/validation.md: 14.3%, 1.52x)
    assert loo["median_error"] <= 0.16 and loo["worst_fold"] <= 1.6
    saved = yaml.safe_load(calibration.SUMMARY_FILE.read_text(encoding="utf-8"))
    assert calibration.SUMMARY_FILE.read_text(encoding="utf-8") == calibration.summary_text(str(saved["date"])), \
        "run: python benchmarks/calibrate.py --write"
    assert validation.default_mfu_log_sigma() == pytest.approx(loo["rms_log_error"], abs=1e-4)
