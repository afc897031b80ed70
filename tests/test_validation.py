"""Fidelity: defaults against published runs, throughput reproduction, memory checks."""
from __future__ import annotations

import math

import costcore
import pytest
from costcore.validation import runs as validation


# The job-layout model as measured (docs/validation.md, generated; test_validation_doc_is_current keeps
# the document equal to a fresh run). These guards hold the figures where they are now, so a change
# that makes them worse fails. The bar is missed and on the reference runs the plain rule's
# median (15.3%) is better than the defaults' (18.1%, worst 1.58x): docs/validation.md says so.
def test_defaults_only_on_published_runs_regression_guard():
    df = validation.validation_table()
    assert len(df) >= 12
    s = validation.summary(df)
    assert s["median_error"] <= 0.185 and s["worst_fold"] <= 1.70, df[["run", "ratio"]]
    base = validation.baseline_table()
    assert s["worst_fold"] < base["fold"].max()


def test_other_public_runs_are_sourced_and_beat_the_plain_rule():
    """Runs outside the reference file: each cites a source, none repeats a reference run, and the
    defaults stay ahead of 6ND / (peak x 30%) on the median."""
    extra = validation.load_runs("extra")
    assert len(extra) >= 14
    assert extra["source"].str.len().min() > 10
    assert not set(extra["name"]) & set(validation.load_runs("reference")["name"])
    df = validation.validation_table(dataset="extra")
    assert len(df) == len(extra)  # every row is usable (known GPU, tokens, a published figure)
    s = validation.summary(df)
    base = validation.baseline_table(dataset="extra")
    assert s["median_error"] < base["error"].median()
    # regression guard (docs/validation.md: 17.0%, 1.95x over 40 runs at the fitted knobs; 15.7% over
    # the 39 before GLM-130B (0.70x) was added 2026-12-07; 16.8%, 2.01x over the first 21)
    assert s["median_error"] <= 0.175 and s["worst_fold"] <= 2.1, df[["run", "ratio"]]


def test_long_context_lowers_mfu_where_attention_is_slow():
    """Attention runs at attn_efficiency of the best matmul: on H100 (FlashAttention-2 at 0.45) long
    context costs MFU; on A100 (0.8) far less (there attention outruns the small linear GEMMs)."""
    def mfu(seq, gpu):
        res = costcore.estimate({"model": {"params_b": 8}, "hardware": {"gpu": gpu, "num_gpus": 64},
                                 "stages": {"pretrain": {"tokens_b": 100, "seq_len": seq, "recompute": "selective"}}})
        return res.stat("pretrain", "mfu")
    assert mfu(32768, "h100-80gb") < mfu(8192, "h100-80gb") < mfu(2048, "h100-80gb")
    h_loss = mfu(8192, "h100-80gb") / mfu(2048, "h100-80gb")
    a_loss = mfu(8192, "a100-80gb") / mfu(2048, "a100-80gb")
    assert h_loss < 1.0 and h_loss < a_loss


def test_defaults_only_use_no_published_throughput():
    for _, row in validation.pretraining_rows().iterrows():
        scn, _ = validation.scenario_for(row)
        stage = scn["stages"]["pretrain"]
        assert set(stage) == {"tokens_b", "seq_len"}
        assert set(scn["hardware"]) == {"gpu", "num_gpus"}


def _throughput_ratios(pin_recompute: bool):
    """predicted / published per run fed its published throughput; with pin_recompute the runs that
    publish hardware TFLOP/s (Megatron/BLOOM style, recomputation included) run with the full
    recompute they trained with, so 6/8 of those FLOP/s are model FLOP/s."""
    out = {}
    for _, row in validation.pretraining_rows().iterrows():
        scn, _ = validation.scenario_for(row, throughput=True)
        if not scn:
            continue
        if pin_recompute and "tflops_per_gpu" in scn["stages"]["pretrain"]:
            scn["stages"]["pretrain"]["recompute"] = "full"
        basis, published = validation.published_figure(row)
        out[row["name"]] = validation.predicted_figure(costcore.estimate(scn), basis) / published
    return out


def test_published_throughput_reproduces_published_time():
    ratios = _throughput_ratios(pin_recompute=True)
    assert len(ratios) >= 8
    # PaLM's 64 days mix 6,144 chips for 1,200 h and 3,072 chips for 336 h plus downtime; its
    # published 46.2% MFU is the steady state, so time at that MFU is ~2/3 of the calendar.
    bad = {k: r for k, r in ratios.items() if k != "PaLM-540B" and abs(r - 1) > 0.10}
    assert not bad, bad


def test_validation_table_throughput_rows_reproduce_published_time():
    df = validation.validation_table(throughput=True)
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
    # QLoRA (arXiv:2305.14314): Guanaco-65B fine-tuned on a single 48 GB GPU, with paged optimizer states
    res = _sft(65.2, "l40s", 1, "qlora", lora_rank=64, optimizer="paged_adamw_8bit")
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
    assert st["fits"] is False and st["memory_per_gpu_gb"] > 80
    # ZeRO-0 keeps 20 bytes per parameter on every replica: 140 GB, so two GPUs with tensor parallelism
    assert st["min_gpus"] == 2 and st["plan"]["memory_per_gpu_gb"] == st["memory_per_gpu_gb"]
    two = _sft(7.0, "a100-80gb", 2, "full", zero=0).to_dict()["stages"]["sft"]
    assert two["fits"] is True and two["plan"]["tp"] * two["plan"]["pp"] == 2


def test_validation_doc_is_current():
    import importlib.util
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("mkdoc", root / "scripts" / "make_validation_doc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (root / "docs" / "validation.md").read_text() == mod.render(), \
        "docs/validation.md is stale: run python scripts/make_validation_doc.py"


def test_explained_layout_mfu_matches_the_kernel():
    """What explain shows for a layout stage is the kernel's stats: the step's terms add up to the step,
    and the plan's MFU x the sustained share is the MFU the stage's hours use."""
    from costcore.analysis import explain
    checked = 0
    for name in costcore.preset_names():
        res = costcore.estimate(costcore.load_preset(name))
        for stage in res.stages:
            f = explain.mfu_factors(res, stage)
            if f is None:
                assert not res.uses_layout(stage)
                continue
            assert f["plan_mfu"] * f["sustained"] == res.stat(stage, "mfu"), (name, stage)
            terms = sum(f[k] for k in ("step_compute_s", "step_communication_s", "step_bubble_s",
                                       "step_recompute_s", "step_optimizer_s"))
            assert terms == pytest.approx(f["step_time_s"], rel=1e-12), (name, stage)
            assert f["plan_tp"] == res.plan(stage)["tp"] and 0.0 < f["plan_mfu"] < 1.0
            checked += 1
    assert checked >= 10


def test_gpu_names_as_papers_write_them():
    g = validation.gpu_key
    assert g("A100-80GB") == g("A100") == g("NVIDIA A100 SXM4 80 GB") == "a100-80gb"
    assert g("A100-40GB") == g("A100 40GB") == "a100-40gb"
    assert g("H100-80GB") == g("H100 SXM") == "h100-80gb"
    assert g("TPUv4") == g("TPU v4") == "tpu-v4"
    assert g("H800") == "h800" and g("V100") == "v100"
    assert g("Gaudi") is None and g(float("nan")) is None


def test_shipped_coefficients_are_the_calibrated_fit():
    """The production knobs in schema.yaml are costcore.validation.calibration's best fit on the calibration
    runs (not hand-tuned), and the fit is the grid point the ranking puts first."""
    from costcore.validation import calibration
    from costcore.scenario.schema import BY_PATH
    shipped = {k: BY_PATH[f"efficiency.{k}"].default for k in calibration.EFFICIENCY_KEYS}
    assert set(shipped) == {"sustained_fraction", "overlap_contention", "tp_overlap"}
    ranked = calibration.fit()
    assert shipped == ranked[0][1]
    assert ranked[0][0] <= ranked[1][0]
    for key, value in shipped.items():
        assert value in calibration.GRID[key]


def test_leave_one_out_and_its_checked_in_summary():
    """costcore/data/calibration.yaml (read by every estimate's P10-P90 band) matches a fresh leave-one-out run."""
    import yaml
    from costcore.validation import calibration
    loo = calibration.leave_one_out()
    n_runs = len(validation.pretraining_rows()) + len(validation.pretraining_rows(dataset="extra"))
    assert loo["runs"] == len(calibration.runs("calibration")) and len(loo["holdout"]) == len(calibration.runs("holdout"))
    assert loo["runs"] + len(loo["holdout"]) == n_runs
    assert set(loo["ratios"]).isdisjoint(loo["holdout"])
    # regression guard (docs/validation.md: leave-one-out median 20.6%, worst 1.95x; holdout 14.7%, 1.92x
    # over 26 runs (13.8% over 25 before GLM-130B, 0.70x, joined it 2026-12-07), the P10-P90 band holding 19
    # of them; test_band_holds_70_to_90_percent has the bar)
    assert loo["median_error"] <= 0.21 and loo["worst_fold"] <= 2.1
    assert loo["holdout_median_error"] <= 0.15 and loo["holdout_worst_fold"] <= 1.95
    assert loo["band_log_p10"] < 0.0 < loo["band_log_p90"]
    saved = yaml.safe_load(calibration.SUMMARY_FILE.read_text(encoding="utf-8"))
    assert calibration.SUMMARY_FILE.read_text(encoding="utf-8") == calibration.summary_text(str(saved["date"])), \
        "run: python benchmarks/calibrate.py --write"
    assert validation.default_mfu_log_sigma() == pytest.approx(loo["rms_log_error"], abs=1e-4)


def test_run_families_name_runs_of_one_team_and_gpu():
    """data/run_families.yaml: every name is a scored pre-training run, in one family only, each family of at
    least two runs on one kind of GPU, with a source."""
    import yaml
    from costcore.validation import calibration
    fams = yaml.safe_load(calibration.FAMILIES_FILE.read_text())["families"]
    gpu = {name: scn["hardware"]["gpu"] for name, scn, *_ in calibration.runs()}
    seen = [n for f in fams.values() for n in f["runs"]]
    assert len(seen) == len(set(seen)) and set(seen) <= set(gpu), set(seen) - set(gpu)
    for fam, f in fams.items():
        assert len(f["runs"]) >= 2 and f["source"], fam
        assert len({gpu[n] for n in f["runs"]}) == 1, (fam, {n: gpu[n] for n in f["runs"]})


def test_residual_structure_by_a_slow_obvious_route():
    """calibration.residual_structure against the same statistics computed by hand from the out-of-sample
    ratios: each family's residuals around its geometric mean (n / (n - 1) corrected), and the correlation of
    the residuals with the model size read from each run's scenario."""
    import statistics

    import yaml
    from costcore.validation import calibration
    got = calibration.residual_structure()
    loo = calibration.leave_one_out()
    ratio = {**loo["ratios"], **loo["holdout"]}
    devs = []
    for f in yaml.safe_load(calibration.FAMILIES_FILE.read_text())["families"].values():
        logs = [math.log(ratio[n]) for n in f["runs"]]
        mean = sum(logs) / len(logs)
        devs += [abs(x - mean) * math.sqrt(len(logs) / (len(logs) - 1)) for x in logs]
    assert got["family_runs"] == len(devs)
    assert got["family_median_error"] == pytest.approx(math.exp(statistics.median(devs)) - 1, rel=1e-9)
    assert got["family_worst_fold"] == pytest.approx(math.exp(max(devs)), rel=1e-9)
    names = [r[0] for r in calibration.runs()]
    size = [math.log(float(scn["model"]["params_b"])) for _, scn, *_ in calibration.runs()]
    resid = [-math.log(ratio[n]) for n in names]
    assert dict(got["features"])["model size (log parameters)"] == pytest.approx(
        statistics.correlation(size, resid), abs=1e-9)
    assert got["chance_r"] == pytest.approx(2 / math.sqrt(len(names)))
    assert [abs(v) for _, v in got["features"]] == sorted((abs(v) for _, v in got["features"]), reverse=True)


def test_band_holds_70_to_90_percent_of_the_held_out_runs():
    """Issue 14's band bar: the P10-P90 band (leave-one-out residuals of the calibration runs) holds 70-90% of
    the held-out runs never fitted on (18 of 25, 72%, on 2026-12-06; 16 of 25 before tp_overlap)."""
    from costcore.validation import calibration
    assert 0.7 <= calibration.leave_one_out()["holdout_band_coverage"] <= 0.9


def test_estimate_band_is_the_leave_one_out_band():
    """A layout stage's P10/P90 GPU-hours are its GPU-hours x exp(band_log_p10 / p90) of calibration.yaml:
    pre-training's leave-one-out band, SFT's and DPO's the post-training runs' band; a stage with its own MFU
    keeps its point value; dollars move by the billed GPU time only."""
    from costcore.validation import calibration
    cal = validation.calibration_summary()
    res = costcore.estimate("llama3-8b")
    d = res.to_dict()
    post = cal["stage_bands"]["post_training"]
    for stage, sd in d["stages"].items():
        band = post if stage in ("sft", "dpo") else cal
        if res.uses_layout(stage):
            assert sd["gpu_hours_p10"] == pytest.approx(sd["gpu_hours"] * math.exp(band["band_log_p10"]), rel=1e-12)
            assert sd["gpu_hours_p90"] == pytest.approx(sd["gpu_hours"] * math.exp(band["band_log_p90"]), rel=1e-12)
            gpu_usd = res.stat(stage, "gpu_usd")
            assert sd["usd_p90"] - sd["usd_total"] == pytest.approx(gpu_usd * (math.exp(band["band_log_p90"]) - 1))
        else:
            assert sd["gpu_hours_p10"] == sd["gpu_hours"] == sd["gpu_hours_p90"]
    assert d["total_usd_p10"] == pytest.approx(sum(sd["usd_p10"] for sd in d["stages"].values()))
    assert d["total_usd_p10"] < d["total_usd"] < d["total_usd_p90"]
    assert cal["band_log_p10"] == round(calibration.leave_one_out()["band_log_p10"], 4)


def test_post_training_and_multimodal_stages_carry_the_band_of_their_own_runs():
    """The pre-training band (P10 x0.68, P90 x1.43) does not speak for fine-tuning: its public runs miss by
    0.2x to 2.5x. SFT, DPO and RL carry the P10/P90 of ln(published / predicted) over the 19 fine-tuning,
    preference and RL runs, the multimodal phases over the 25 vision-language runs; nothing is fitted on
    either, so the residuals are out of sample. calibration.yaml holds them (checked current above)."""
    import numpy as np
    from costcore.validation import calibration, finetune, multimodal
    ft, mm = finetune.finetune_table(), multimodal.multimodal_table()
    for family, table in (("post_training", ft), ("multimodal", mm)):
        resid = np.log(table["published_hours"] / table["predicted_hours"])
        band = calibration.stage_bands()[family]
        assert band["runs"] == len(table)
        assert band["band_log_p10"] == pytest.approx(np.quantile(resid, 0.1))
        assert band["band_log_p90"] == pytest.approx(np.quantile(resid, 0.9))
        inside = np.mean([np.quantile(np.delete(resid, j), 0.1) <= resid[j] <= np.quantile(np.delete(resid, j), 0.9)
                          for j in range(len(resid))])
        assert band["loo_coverage"] == pytest.approx(inside)
    cal = validation.calibration_summary()
    assert cal["stage_bands"]["post_training"]["band_log_p90"] > cal["band_log_p90"]  # wider: earned, not borrowed
    res = costcore.estimate("qlora-single-gpu")
    sd = res.to_dict()["stages"]["sft"]
    post = cal["stage_bands"]["post_training"]
    assert sd["gpu_hours_p90"] == pytest.approx(sd["gpu_hours"] * math.exp(post["band_log_p90"]), rel=1e-12)
    assert validation.default_mfu_log_sigma("sft") == post["mfu_log_sigma"]
    # the Monte Carlo centers those stages' MFU where their runs sat: below the model's (they ran slower)
    assert validation.default_mfu_log_median("rl") == post["mfu_log_median"] < 0.0
    assert validation.default_mfu_log_median("pretrain") == 0.0
    ratios = np.concatenate([ft["predicted_hours"] / ft["published_hours"]])
    assert post["mfu_log_median"] == pytest.approx(float(np.mean(np.log(ratios))), abs=1e-4)
    assert post["mfu_log_sigma"] == pytest.approx(float(np.std(np.log(ratios))), abs=1e-4)
    assert validation.default_mfu_log_sigma("mm_tune") == cal["stage_bands"]["multimodal"]["mfu_log_sigma"]
    assert validation.default_mfu_log_sigma("pretrain") == validation.default_mfu_log_sigma() == cal["mfu_log_sigma"]


def _validation_page(dataset: str):
    """An AppTest on the Validation page with the set of runs ``dataset`` chosen."""
    from streamlit.testing.v1 import AppTest

    from server_support import NEVER_S
    from shared import APP
    at = AppTest.from_file(str(APP), default_timeout=NEVER_S)
    at.switch_page("pages/validation.py")
    at.run()
    at.radio(key="val_runs").set_value(dataset).run()
    assert not at.exception
    return at


def _time_view_shows_the_scorers_numbers(dataset: str, scorer) -> str:
    """Open the Validation page on ``dataset``; its metrics and table are ``scorer``'s (finetune or multimodal
    validation module) own numbers. Returns the page's markdown text."""
    at = _validation_page(dataset)
    want = {"finetune": lambda: scorer.finetune_table(), "multimodal": lambda: scorer.multimodal_table(),
            "decode": lambda: scorer.decode_table()}[dataset]()
    s = scorer.summary(want)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Runs"] == str(len(want)) and metrics["Median error"] == f"{s['median_error_x']:.2f}x"
    assert metrics["Worst"] == f"{s['worst_error_x']:.2f}x"
    assert metrics["Within ±25%"] == f"{s['within_25pct']} of {len(want)}"
    shown = at.dataframe[0].value
    assert list(shown["label"]) == list(want["label"])
    assert (shown["ratio"] == want["ratio"]).all()
    # the yes/no column is the scorer's rule, which a 2-decimal ratio could not show (1.254 read "1.25x")
    from costcore.validation.multimodal import within_25pct
    assert list(shown["within"]) == ["yes" if ok else "no" for ok in within_25pct(want["ratio"])]
    assert (shown["within"] == "no").sum() == len(want) - s["within_25pct"]
    return " ".join(m.value for m in at.markdown)


def test_validation_page_says_what_the_residuals_follow(warm_kernels):
    """The pre-training view quotes the checked-in residual structure (calibration.yaml), which is a fresh
    calibration.residual_structure (test_leave_one_out_and_its_checked_in_summary)."""
    from streamlit.testing.v1 import AppTest

    from server_support import NEVER_S
    from shared import APP
    at = AppTest.from_file(str(APP), default_timeout=NEVER_S)
    at.switch_page("pages/validation.py")
    at.run()
    assert not at.exception
    rs = validation.calibration_summary()["residual_structure"]
    text = " ".join(m.value for m in at.markdown)
    assert (f"of {rs['residual_inputs']} inputs" in text and f"the closest correlation is {rs['max_abs_r']:.2f}" in text
            and f"against {rs['chance_r']:.2f} that chance passes" in text), text
    assert f"({rs['family_runs']} runs), they still scatter by a median of {rs['family_median_error']:.0%}" in text


def test_validation_page_shows_the_fine_tuning_and_preference_runs(warm_kernels):
    """The Validation page's third set of runs: the table and its summary are the scorer's own numbers."""
    from costcore.validation import finetune
    text = _time_view_shows_the_scorers_numbers("finetune", finetune)
    assert all(words in text for words in ("DeepSpeed-Chat PPO, OPT-175B", "Assumed where"))
    b = validation.calibration_summary()["stage_bands"]["post_training"]  # the band these runs give estimates
    assert (f"track record of SFT, DPO and RL: every estimate of those stages carries their P10–P90 band, the model "
            f"value × {math.exp(b['band_log_p10']):.2f} to × {math.exp(b['band_log_p90']):.2f}") in text
    assert f"holds {b['loo_coverage']:.0%} of them" in text


def test_validation_page_shows_the_vision_language_runs(warm_kernels):
    """The Validation page's fourth set: the multimodal scorer's own numbers, GPUs in words, sources quoted."""
    from costcore.validation import multimodal
    text = _time_view_shows_the_scorers_numbers("multimodal", multimodal)
    assert "LLaVA-1.5-13B visual instruction tuning" in text and "In its words" in text
    b = validation.calibration_summary()["stage_bands"]["multimodal"]
    assert f"× {math.exp(b['band_log_p10']):.2f} to × {math.exp(b['band_log_p90']):.2f}" in text
    assert "8 × NVIDIA A100 80GB SXM" in text and "a100-80gb" not in text  # GPUs in words, not catalog keys


def test_validation_page_shows_the_generation_benchmarks(warm_kernels):
    """The fifth set: batched-generation latencies, the decode scorer's own numbers, each source quoted."""
    from costcore.validation import decode
    text = _time_view_shows_the_scorers_numbers("decode", decode)
    assert "Llama 2 70B, 4 x A100 80GB, batch 64, 256 in, 256 out" in text.replace("\\", "") and "In its table" in text and "2192" in text


# vLLM PR #2192's benchmark_latency rows (input 256, output 256): published latency (s) of the whole batch
DECODE_PUBLISHED_S = {"vllm-2192-llama-2-70b-a100-tp4": 14.57, "vllm-2192-llama-33b-a100-tp2": 14.38,
                      "vllm-2192-llama-2-13b-a30-tp2": 9.79, "vllm-2192-llama-2-7b-t4-tp2": 17.51}


def test_generation_benchmarks_are_sourced_and_scored_with_the_defaults():
    """The decoding roofline at its default share (0.5) and prefill at 35% against 14 public latencies (nothing
    fitted on them): median 1.15x, worst 1.62x, 9 within 25% (docs/validation.md section 6). A regression
    guard holds the median under 1.2x and each run within 0.6-1.7x, so a change that moves them further fails."""
    from costcore.validation import decode
    t = decode.decode_table().set_index("run")
    assert {k: v for k, v in (t["published_hours"] * 3600.0).items() if k in DECODE_PUBLISHED_S} == \
        pytest.approx(DECODE_PUBLISHED_S)
    assert ((t["ratio"] > 0.6) & (t["ratio"] < 1.7)).all(), t["ratio"]
    assert decode.summary(t.reset_index())["median_error_x"] < 1.2
    assert t["fits"].all()  # each measured replica holds its weights and KV cache in the planner too
    assert all(src and quote for src, quote in zip(t["source"], t["quote"]))


def test_generation_latency_is_the_roofline_by_hand():
    """Llama 2 70B on 4 A100 80GB, 64 prompts of 256 tokens generated to 256 more, by hand: prefill 2 N FLOPs a
    token (plus causal attention, 2 x 2 L s d_model / 2 at the prompt's 256 tokens) at 35% of 4 x 312 TFLOP/s;
    each of 256 decode steps reads the bf16 weights and the batch's KV cache at the average context (256 + 128)
    at 4 x 2.039 TB/s, over the 0.5 efficiency (the FLOPs take less: 2 N x 64 / (4 x 312e12))."""
    from costcore.validation import decode
    row = decode.decode_table().set_index("run").loc["vllm-2192-llama-2-70b-a100-tp4"]
    N, L, d, kv_heads, head_dim, tp, b = 68.976648192e9, 80, 8192, 8, 128, 4, 64
    prefill_flops = b * 256 * (2 * N + 2 * L * 256 * d)
    prefill_s = prefill_flops / (tp * 312e12 * 0.35)
    kv_bytes_per_token = 2 * L * kv_heads * head_dim * 2
    step_s = max((2 * N + b * kv_bytes_per_token * 384) / (tp * 2.039e12), 2 * N * b / (tp * 312e12)) / 0.5
    assert row["predicted_hours"] * 3600.0 == pytest.approx(prefill_s + 256 * step_s, rel=0.02)


def test_readme_quotes_the_checked_in_calibration():
    """The README's accuracy figures are calibration.yaml's (rewritten by benchmarks/calibrate.py --write)."""
    import yaml
    from costcore.validation import calibration
    from shared import ROOT
    cal = yaml.safe_load(calibration.SUMMARY_FILE.read_text(encoding="utf-8"))
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"**median error {cal['loo_median_error']:.1%}, worst {cal['loo_worst_fold']:.2f}×**" in readme
    assert f"median {cal['holdout_median_error']:.1%}, worst {cal['holdout_worst_fold']:.2f}×" in readme
    assert f"`sustained_fraction` = {cal['best_fit']['sustained_fraction']:g}" in readme
    p10, p90 = math.exp(cal["band_log_p10"]), math.exp(cal["band_log_p90"])
    assert f"the model value × {p10:.2f} and × {p90:.2f}" in readme
    held = round(cal["holdout_band_coverage"] * cal["holdout_runs"])
    assert f"It holds {held} of the {cal['holdout_runs']} held-out runs ({cal['holdout_band_coverage']:.0%})" in readme
    post, mm = cal["stage_bands"]["post_training"], cal["stage_bands"]["multimodal"]
    assert (f"× {math.exp(post['band_log_p10']):.2f} and × {math.exp(post['band_log_p90']):.2f} for SFT, DPO and RL "
            f"({post['runs']} runs), × {math.exp(mm['band_log_p10']):.2f} and × {math.exp(mm['band_log_p90']):.2f} "
            f"for the multimodal phases ({mm['runs']} runs)") in readme


def test_readme_quotes_the_residual_structure():
    """The README's sentence on what the pre-training residuals follow is calibration.residual_structure's."""
    from costcore.validation import calibration
    from shared import ROOT
    r = calibration.residual_structure()
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert (f"the largest of {len(r['features'])} correlations with the residuals is "
            f"{abs(r['features'][0][1]):.2f}") in readme
    assert f"the residuals still scatter by a median of {r['family_median_error']:.0%}" in readme
    assert r["family_median_error"] > 0.10  # "would not reach the bar either"


def test_readme_quotes_the_generation_benchmarks():
    """The README's line on the generation benchmarks is the decode scorer's summary, not hand-copied."""
    from costcore.validation import decode
    from shared import ROOT
    s = decode.summary(decode.decode_table())
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert (f"against {s['runs']} published batch latencies" in readme and
            f"median {s['median_error_x']:.2f}×, worst {s['worst_error_x']:.2f}×, {s['within_25pct']} within 25%"
            in readme)


def test_decode_refit_decomposition_is_the_planners_latency():
    """leave_one_out_refit splits each measurement's latency into prefill / inference_mfu + decode /
    decode_efficiency from two estimates; a third estimate at other values must land on that line, or the
    refit the validation document reports would score a model the planner is not."""
    from costcore import api
    from costcore.validation import decode
    run = decode.decode_runs()["trtllm-050-llama-70b-a100-tp4-bs64-2048-128"]  # prefill and decode both weigh
    prefill_s, decode_s = decode._parts(run)
    sc = decode.run_scenario(run)
    sc["stages"]["eval"]["decode_efficiency"], sc["efficiency"] = 0.7, {"inference_mfu": 0.45}
    got = api.estimate(sc).to_dict()["stages"]["eval"]["productive_gpu_hours"] * 3600.0 / run["tp"]
    assert got == pytest.approx(prefill_s / 0.45 + decode_s / 0.7, rel=1e-9)
    assert prefill_s > 0 and decode_s > 0


def test_validation_page_says_how_the_moe_runs_move_with_the_schedule_searched(warm_kernels):
    """Other public runs: the sentence behind keeping 1F1B the default carries calibration's own numbers."""
    from costcore.validation import calibration
    at = _validation_page("extra")
    text = " ".join(m.value for m in at.markdown)
    moe = calibration.schedule_search_ratios()
    assert "DeepSeek-V3" in moe and moe["DeepSeek-V3"][2] == "dualpipe"  # the run that used DualPipe takes it
    for name, (default, searched, sched) in moe.items():
        if sched == "dualpipe":
            assert f"{name} {default:.2f} to {searched:.2f}" in text
    # searched is never slower than the 1F1B default: it keeps the faster of the two
    assert all(searched <= default * (1 + 1e-12) for default, searched, _ in moe.values())


def test_lora_and_qlora_step_measurements_are_scored_as_published(warm_kernels):
    """Qwen's profiling table (QwenLM/Qwen README, 'Profiling of Memory and Speed'): each row is the plan's own
    step time and memory against the published s/it and GB; the Q-LoRA / LoRA pairs come from the same rows."""
    import yaml

    from costcore.validation import finetune
    data = yaml.safe_load(finetune.STEPS.read_text())["runs"]
    t = finetune.step_table()
    assert list(t["run"]) == list(data) and len(t) == 10
    for r in t.itertuples():
        run = data[r.run]
        plan = costcore.estimate(run["scenario"]).plan("sft")
        assert r.predicted_step_s == pytest.approx(plan["step_time_s"], rel=1e-12)
        assert r.predicted_memory_gb == pytest.approx(plan["memory_per_gpu_gb"], rel=1e-12)
        assert r.published_step_s == run["published_step_s"] and f"{r.published_step_s}s/it" in run["quote"]
        assert r.step_ratio == pytest.approx(r.predicted_step_s / r.published_step_s)
        assert "QwenLM/Qwen README.md" in r.source
    assert data["qwen-7b-lora-2048"]["published_step_s"] == 5.2 and data["qwen-7b-qlora-2048"]["published_step_s"] == 7.0
    s = finetune.step_summary(t)
    pair = next(p for p in s["qlora_over_lora"] if p["model"] == "Qwen-7B" and p["tokens"] == 2048)
    assert pair["published"] == pytest.approx(7.0 / 5.2)
    q, lo = t.set_index("run").loc["qwen-7b-qlora-2048"], t.set_index("run").loc["qwen-7b-lora-2048"]
    assert pair["predicted"] == pytest.approx(q.predicted_step_s / lo.predicted_step_s)
    # the 72B pair ran on different GPU counts (LoRA with ZeRO-3 on 4, Q-LoRA on 1): not compared
    assert not any(p["model"] == "Qwen-72B" for p in s["qlora_over_lora"])
    assert s["lora"]["step_ratio"][1] <= s["lora"]["step_ratio"][0] <= s["lora"]["step_ratio"][2]


def test_validation_page_shows_the_lora_and_qlora_step_measurements(warm_kernels):
    from costcore.validation import finetune
    at = _validation_page("finetune")
    assert "Step time and memory of LoRA and Q-LoRA on one A100" in [h.value for h in at.subheader]
    shown = at.dataframe[1].value
    want = finetune.step_table()
    assert list(shown["label"]) == list(want["label"])
    assert (shown["step_ratio"] == want["step_ratio"]).all() and (shown["memory_ratio"] == want["memory_ratio"]).all()
    text = " ".join(m.value for m in at.markdown)
    s = finetune.step_summary(want)
    assert f"LoRA median {s['lora']['step_ratio'][0]:.2f}, Q-LoRA median {s['qlora']['step_ratio'][0]:.2f}" in text


def test_readme_quotes_the_lora_and_qlora_step_measurements():
    """The README's line on Qwen's profiling table is step_summary's, not hand-copied."""
    from costcore.validation import finetune
    from shared import ROOT
    s = finetune.step_summary(finetune.step_table())
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())

    def span(method, key):
        _, lo, hi = s[method][key]
        return f"{lo:.2f}-{hi:.2f}×"
    assert f"the plan's step time is {span('lora', 'step_ratio')[:-1]}× of the published one for LoRA" in readme
    assert f"and {span('qlora', 'step_ratio')} for Q-LoRA" in readme
    assert f"memory {span('lora', 'memory_ratio')} (LoRA) and {span('qlora', 'memory_ratio')} (Q-LoRA)" in readme
    short = [p for p in s["qlora_over_lora"] if p["tokens"] <= 2048]  # the README's 256-2,048 tokens
    pub = f"{min(p['published'] for p in short):.2f}-{max(p['published'] for p in short):.2g}×"
    pred = f"{min(p['predicted'] for p in short):.2f}-{max(p['predicted'] for p in short):.2f}×"
    assert f"slowed a step {pub} against the planner's {pred} at 256-2,048 tokens" in readme


def test_pretraining_view_counts_the_runs_within_25_percent():
    """The reference runs' "Within ±25%" is a count of runs as on the other views (7 of 12), the summary's own,
    where it read a percentage of a dozen runs (58%)."""
    import pandas as pd
    at = _validation_page("reference")
    metrics = {m.label: m.value for m in at.metric}
    k, of, n = metrics["Within ±25%"].split(" ")
    assert of == "of" and n == metrics["Runs"] and 0 < int(k) <= int(n)
    from costcore.validation import runs
    assert runs.summary(pd.DataFrame({"run": ["a", "b", "c"], "error": [0.1, 0.25, 0.4], "fold": [1.1, 1.25, 1.4]}))[
        "within_25"] == 2
