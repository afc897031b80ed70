"""Issue 17: multimodal phases (encoders, media tokens, alignment and joint tuning, media costs).

The published LLaVA-1.5 schedule (haotian-liu/LLaVA README.md, Train: "Pretrain takes around 5.5
hours for LLaVA-v1.5-13B on 8x A100 (80G) ... around 3.5 hours for LLaVA-v1.5-7B"; "Visual
instruction tuning takes around 20 hours for LLaVA-v1.5-13B on 8x A100 (80G) ... around 10
hours for LLaVA-v1.5-7B on 8x A100 (40G)") is predicted from its recipe (costcore/data/
multimodal_runs.yaml) with nothing fitted on it; so are the 21 other public runs of that file.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pandas as pd
import pytest

import costcore
from costcore import fmt
from costcore.errors import ScenarioError
from costcore.scenario import media, schema
from costcore.scenario.schema import ENCODERS
from costcore.validation import multimodal as mmv
from shared import ROOT
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)

LLAVA = {"llava-1.5-7b-align": 3.5, "llava-1.5-13b-align": 5.5, "llava-1.5-7b-tune": 10.0,
         "llava-1.5-13b-tune": 20.0}
# Measured 2026-12-07 (docs/validation.md section 5): 1.073, 1.258, 0.826, 0.731 (2026-12-06: 1.07, 1.254, 0.83,
# 0.73; 2026-12-02: 1.07, 1.25, 0.80, 0.73). The two outside the 25% bar are reported as missed, not tuned to it.
MISSED = {"llava-1.5-13b-align": "predicted 6.92 h against 5.5 h (1.258x)",
          "llava-1.5-13b-tune": "predicted 14.6 h against 20 h (0.73x)"}


@pytest.fixture(scope="module")
def table():
    return mmv.multimodal_table().set_index("run")


@pytest.mark.parametrize("run", [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=MISSED[r]))
                                 if r in MISSED else r for r in LLAVA])
def test_llava_1_5_schedule_within_25_percent(table, run):
    row = table.loc[run]
    assert row.published_hours == LLAVA[run]
    assert 0.75 <= row.ratio <= 1.25, f"{run}: {row.predicted_hours:.2f} h predicted, {row.published_hours} h published"


def test_the_bar_sentence_names_its_misses_at_a_precision_that_shows_them():
    """A 1.254x miss printed at two decimals read "1.25x" beside "missed": the sentence prints three and
    marks each phase outside the band; met ones are not marked."""
    df = pd.DataFrame({"run": list(mmv.BAR_RUNS), "label": ["a", "b", "c", "d"], "ratio": [1.254, 1.0, 0.75, 0.7499]})
    text = mmv.bar_text(df)
    assert "**missed** for 2 of 4" in text
    assert "a 1.254x (outside)" in text and "b 1.000x," in text and "c 0.750x," in text and "d 0.750x (outside)" in text


def test_every_public_run_is_scored_out_of_sample(table):
    """All 25 runs evaluate, fit their published GPUs, and land within 4x (the record is in docs/validation.md)."""
    assert len(table) >= 20 and table.fits.all()
    assert table.ratio.between(0.25, 4.0).all(), table.ratio.to_dict()
    s = mmv.summary(table.reset_index())
    assert s["runs"] == len(table) and 1.0 <= s["median_error_x"] <= s["worst_error_x"]
    assert {"mm_align", "mm_tune", "mm_cpt"} <= set(table.phase)


def test_13b_joint_tuning_fits_8_x_80gb_with_zero_3_and_says_so():
    res = costcore.estimate("llava-1.5-13b")
    assert res.stat("mm_tune", "fits") == 1.0 and res.stat("mm_tune", "plan_zero") == 3
    assert res.feasible and res.stat("mm_tune", "memory_per_gpu_gb") <= res.stat("mm_tune", "usable_memory_gb")
    scn = schema.set_path(costcore.load_preset("llava-1.5-13b"), "stages.mm_tune.zero_stage", 0)
    unsharded = costcore.estimate(scn)  # 13B x 20 bytes of model states on every GPU
    assert unsharded.stat("mm_tune", "fits") == 0.0 and not unsharded.feasible
    assert any("Multimodal instruction tuning" in s for s in unsharded.infeasible)


def _mm_scenario(tokens: float) -> dict:
    return {"model": {"hf_config": "llama-2-7b"}, "hardware": {"gpu": "a100-80gb", "num_gpus": 8},
            "multimodal": {"encoder": "clip-vit-l-14-336", "tokens_per_item": tokens},
            "stages": {"mm_align": {"samples": 100000, "text_tokens_per_sample": 200, "media_share": 0.8,
                                    "items_per_sample": 1, "train": ["connector"], "mfu": 0.4, "seq_len": 4096}}}


@pytest.mark.parametrize("tokens", [576.0, 1152.0])
def test_flops_are_the_hand_computation(tokens):
    """LLM (frozen: 4N + 12 L d s per token) over text + media tokens, encoder forward per image, connector x 3."""
    res = costcore.estimate(_mm_scenario(tokens))
    n, L, d = res.stat("mm_align", "active_params"), res.stat("mm_align", "model_layers"), res.stat("mm_align", "model_hidden")
    llm_tokens = 100000 * (200 + 0.8 * tokens)
    ctx = 200 + tokens
    images = 100000 * 0.8
    t = (336 // 14) ** 2
    enc = ENCODERS["clip-vit-l-14-336"]
    encoder = images * (2 * enc["params_b"] * 1e9 * t + 4 * enc["layers"] * t * t * enc["hidden"])
    connector = images * 2 * (1024 * d + d * d) * tokens * 3
    want = llm_tokens * (4 * n + 12 * L * d * ctx) + encoder + connector
    assert math.isclose(res.stat("mm_align", "flops"), want, rel_tol=1e-12)
    assert res.stat("mm_align", "tokens") == llm_tokens


def test_doubling_tokens_per_image_raises_llm_compute_by_the_mix_ratio():
    a, b = costcore.estimate(_mm_scenario(576)), costcore.estimate(_mm_scenario(1152))
    # LLM tokens per sample: 200 text + 0.8 x media tokens
    assert b.stat("mm_align", "tokens") / a.stat("mm_align", "tokens") == pytest.approx((200 + 0.8 * 1152) / (200 + 0.8 * 576))
    assert b.stat("mm_align", "media_token_share") == pytest.approx(0.8 * 1152 / (200 + 0.8 * 1152))
    assert b.stat("mm_align", "gpu_hours") > a.stat("mm_align", "gpu_hours")


def test_a_multimodal_benchmark_adds_encoder_connector_and_media_prefill_by_hand():
    """Issue 17's evaluation on multimodal benchmarks: 20 runs x 5,000 images each run CLIP ViT-L/14-336
    forward over 576 patch tokens, the two-layer MLP over 576 tokens, and the LLM's prefill over 576 media
    tokens per image (2N + 4 L d s per token), all at the inference MFU; the text part is unchanged."""
    def run(items_k):
        scn = {"model": {"hf_config": "llama-2-7b"}, "hardware": {"gpu": "a100-80gb", "num_gpus": 8},
               "multimodal": {"encoder": "clip-vit-l-14-336"},
               "stages": {"eval": {"runs": 20, "benchmark_tokens_m": 10, "generated_tokens_m": 1,
                                   "context_tokens": 2048, "media_items_k": items_k}}}
        return costcore.estimate(scn)
    text, both = run(0), run(5)
    n, L, d = both.stat("eval", "active_params"), both.stat("eval", "model_layers"), both.stat("eval", "model_hidden")
    images, t = 20 * 5000, (336 // 14) ** 2
    enc = ENCODERS["clip-vit-l-14-336"]
    encoder = images * (2 * enc["params_b"] * 1e9 * t + 4 * enc["layers"] * t * t * enc["hidden"])
    connector = images * 2 * (1024 * d + d * d) * 576
    prefill = images * 576 * (2 * n + 4 * L * d * 2048)
    added = encoder + connector + prefill
    assert both.stat("eval", "flops") - text.stat("eval", "flops") == pytest.approx(added, rel=1e-9)
    mfu = schema.effective_value(schema.validate({}), "efficiency.inference_mfu")
    hours = added / (312e12 * mfu) / 3600
    assert both.stat("eval", "productive_gpu_hours") - text.stat("eval", "productive_gpu_hours") == pytest.approx(hours)
    view = both.to_dict()["stages"]["eval"]["multimodal"]
    assert view["media_items"] == images and view["media_tokens_per_item"] == 576
    assert view["encoder_gpu_hours"] == pytest.approx((encoder + connector) / (312e12 * mfu) / 3600)
    assert "multimodal" not in text.to_dict()["stages"]["eval"]


@pytest.mark.parametrize("change, field", [
    ({"multimodal": {"tokens_per_item": 0}}, "multimodal.tokens_per_item"),
    ({"multimodal": {"resolution_px": 448}}, "multimodal.resolution_px"),
    ({"stages": {"mm_align": {"items_per_sample": 4}}}, "stages.mm_align.items_per_sample"),
    ({"multimodal": {"encoder": "whisper-large-v3-encoder"}}, "multimodal.encoder"),
    ({"stages": {"mm_align": {"train": []}}}, "stages.mm_align.train"),
    ({"stages": {"mm_align": {"train": ["vision"]}}}, "stages.mm_align.train"),
    ({"multimodal": {"encoder": {"tokens_per_item": 100}}}, "multimodal.encoder.params_b"),
])
def test_bad_media_input_gets_one_sentence_naming_the_field(change, field):
    scn = {"multimodal": {"encoder": "clip-vit-l-14-336"},
           "stages": {"mm_align": {"text_tokens_per_sample": 100, "seq_len": 2048}}}
    for section, values in change.items():
        for k, v in values.items():
            if isinstance(v, dict) and isinstance(scn[section].get(k), dict):
                scn[section][k].update(v)
            else:
                scn[section][k] = v
    with pytest.raises(ScenarioError) as err:
        costcore.estimate(scn)
    assert err.value.path == field
    assert str(err.value).count("\n") == 0 and str(err.value).startswith(field + ": ")


def test_too_many_images_names_the_numbers():
    scn = {"stages": {"mm_tune": {"items_per_sample": 4, "text_tokens_per_sample": 100, "seq_len": 2048}}}
    with pytest.raises(ScenarioError, match=r"4 images x 576 tokens \+ 100 text tokens = 2,404 tokens, more than "
                                            r"the sequence length of 2,048"):
        costcore.estimate(scn)


def test_custom_encoder_and_train_list():
    scn = {"multimodal": {"encoder": {"name": "my ViT", "params_b": 0.6, "tokens_per_item": 729}},
           "stages": {"mm_tune": {"train": ["llm", "encoder"], "text_tokens_per_sample": 100, "micro_batch": 2,
                                  "recompute": "selective", "zero_stage": 3, "tp": 1, "pp": 1}}}
    res = costcore.estimate(scn)
    assert res.scenario["multimodal"]["encoder"] == "custom"
    assert res.stat("mm_tune", "media_tokens_per_item") == 729 and res.stat("mm_tune", "encoder_params") == 0.6e9
    sd = res.scenario["stages"]["mm_tune"]
    assert (sd["train_connector"], sd["train_llm"], sd["train_encoder"]) == (False, True, True)
    # a trained encoder keeps its activations: more memory than the frozen one
    frozen = costcore.estimate(schema.set_path(scn, "stages.mm_tune.train", ["llm"]))
    extra = 2 * 729 * 24 * 1024 * 34 / 1e9  # 2 sequences x tokens x layers x 34 x width (the custom's ViT-L figures)
    assert res.stat("mm_tune", "mem_activations_gb") - frozen.stat("mm_tune", "mem_activations_gb") == pytest.approx(
        extra, rel=1e-9)


def test_precomputed_features_trade_encoder_compute_for_storage():
    base = {"multimodal": {"encoder": "siglip-so400m-patch14-384"},
            "stages": {"mm_tune": {"epochs": 3, "text_tokens_per_sample": 100}}}
    a = costcore.estimate(base)
    b = costcore.estimate(schema.set_path(base, "multimodal.precomputed_features", True))
    assert b.stat("mm_tune", "encoder_gpu_hours") < a.stat("mm_tune", "encoder_gpu_hours")
    assert a.stat("mm_tune", "media_features_gb") == 0 and b.stat("mm_tune", "media_features_gb") > 0
    with pytest.raises(ScenarioError, match="multimodal.precomputed_features"):
        costcore.estimate(schema.set_path(schema.set_path(base, "multimodal.precomputed_features", True),
                                          "stages.mm_tune.train", ["llm", "encoder"]))


VIDEO = {"model": {"params_b": 7}, "hardware": {"gpu": "h100-80gb", "num_gpus": 64},
         "multimodal": {"modality": "video", "encoder": "siglip-so400m-patch14-384", "frames_per_item": 32,
                        "tokens_per_item": 2592},
         "stages": {"mm_tune": {"samples": 1_000_000, "text_tokens_per_sample": 300, "epochs": 2, "seq_len": 4096}}}


def test_offline_preprocessing_decodes_once_and_never_stalls():
    """The default: media decoded and resized once before training (billed once whatever the epochs); the
    loader reads shards, so no media stall and no loader rates."""
    res = costcore.estimate(VIDEO)
    items, cpu_s = res.stat("mm_tune", "media_items"), 0.25 * 32  # 0.25 CPU-s per sampled frame (schema doc)
    assert res.stat("mm_tune", "preprocess_cpu_hours") == pytest.approx(items * cpu_s / 3600, rel=1e-12)
    assert res.stat("mm_tune", "media_loader_items_per_s_per_node") == 0
    assert res.stat("mm_tune", "data_stall_gpu_hours") == 0


def test_online_decoding_bills_every_epoch_and_stalls_when_the_loader_is_slower_by_hand():
    """Online, the loader decodes every item every epoch: 8 CPU-s a 32-frame clip on 96 cores is 12 clips/s per
    node, against 8 GPUs' appetite of items x epochs / productive GPU-seconds; the GPUs wait the shortfall
    (formulas.data_stall_gpu_hours), billed as a data-pipeline stall. Enough cores, or precomputed features of
    a frozen encoder (decoded once), remove it."""
    on = schema.set_path(VIDEO, "multimodal.preprocessing", "online")
    res = costcore.estimate(on)
    items, prod_h = res.stat("mm_tune", "media_items"), res.stat("mm_tune", "productive_gpu_hours")
    assert res.stat("mm_tune", "preprocess_cpu_hours") == pytest.approx(items * 2 * 8.0 / 3600, rel=1e-12)
    deliver, take = 96 / 8.0, 8 * items * 2 / (prod_h * 3600)
    assert res.stat("mm_tune", "media_loader_items_per_s_per_node") == pytest.approx(deliver, rel=1e-12)
    assert res.stat("mm_tune", "media_items_per_s_per_node") == pytest.approx(take, rel=1e-12)
    assert take > deliver  # this clip mix outruns 96 cores
    assert res.stat("mm_tune", "data_stall_gpu_hours") == pytest.approx(prod_h * (take / deliver - 1), rel=1e-12)
    stall_usd = res.to_dict()["stages"]["mm_tune"]["line_items"]["hidden.data_stalls"]
    assert stall_usd == pytest.approx(res.stat("mm_tune", "data_stall_gpu_hours") * 2.99, rel=1e-9)
    assert res.stat("mm_tune", "gpu_hours") > costcore.estimate(VIDEO).stat("mm_tune", "gpu_hours")
    more = costcore.estimate(schema.set_path(on, "multimodal.loader_cores_per_node", 512))
    assert more.stat("mm_tune", "data_stall_gpu_hours") == 0
    pre = costcore.estimate(schema.set_path(on, "multimodal.precomputed_features", True))
    assert pre.stat("mm_tune", "data_stall_gpu_hours") == 0 and pre.stat("mm_tune", "media_loader_items_per_s_per_node") == 0
    assert pre.stat("mm_tune", "preprocess_cpu_hours") == pytest.approx(items * 8.0 / 3600, rel=1e-12)


def test_offline_preprocessing_is_a_lever_only_where_online_decoding_stalls():
    """The lever appears when a phase's loader is slower than its GPUs, and applying it removes the stall;
    with enough loader cores (no stall) or offline already, it is not offered."""
    from costcore.analysis import levers
    on = schema.set_path(VIDEO, "multimodal.preprocessing", "online")
    found = {lv.key: lv for lv in levers.levers(on)}
    assert "offline_preprocessing" in found
    after = costcore.estimate(levers.apply(on, found["offline_preprocessing"]))
    assert after.stat("mm_tune", "data_stall_gpu_hours") == 0
    for scn in (VIDEO, schema.set_path(on, "multimodal.loader_cores_per_node", 512)):
        assert "offline_preprocessing" not in {lv.key for lv in levers.levers(scn)}


def test_how_it_was_computed_shows_the_stall_with_the_kernels_numbers():
    """The explanation's stall row: the rates and GPU-hours are the stats, and the billed formula names stalls;
    a stage without a stall has no such row."""
    from costcore.analysis import explain
    res = costcore.estimate(schema.set_path(VIDEO, "multimodal.preprocessing", "online"))
    rows = {t: b for t, b, _ in explain.stage_explanation(res, "mm_tune")}
    take, deliver = res.stat("mm_tune", "media_items_per_s_per_node"), res.stat("mm_tune", "media_loader_items_per_s_per_node")
    assert (rf"\frac{{{take:.3g}}}{{{deliver:.3g}}} - 1" in rows["Data-pipeline stall"]
            and fmt.gpu_hours(res.stat('mm_tune', 'data_stall_gpu_hours')) in rows["Data-pipeline stall"])
    assert "Data-pipeline stall" not in {t for t, _, _ in explain.stage_explanation(costcore.estimate(VIDEO), "mm_tune")}


def test_online_decoding_is_said_on_the_cli_and_the_page():
    """The CLI's media line and the multimodal page's preprocessing tab give the loader's rate and the GPUs'."""
    from costcore import fmt
    from costcore.cli import main as cli
    from streamlit.testing.v1 import AppTest
    on = schema.set_path(VIDEO, "multimodal.preprocessing", "online")
    res = costcore.estimate(on)
    line = cli._media_line("mm_tune", res.to_dict()["stages"]["mm_tune"], res)
    assert (f"decoded online: the loader delivers {fmt.num(res.stat('mm_tune', 'media_loader_items_per_s_per_node'))} "
            f"clips/s per node, the GPUs take {fmt.num(res.stat('mm_tune', 'media_items_per_s_per_node'))}") in line
    from costcore.scenario import share
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=NEVER_S)
    for k, v in share.encode(on, "scratch-7b").items():  # the scenario as its share link carries it
        at.query_params[k] = v
    at.switch_page("pages/multimodal.py")
    at.session_state["multimodal:tab"] = "Preprocessing, storage and rights"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    said = [c.value for c in at.caption if "decoded online" in c.value]
    assert said and f"delivers {fmt.num(12)} clips per second" in said[0], [c.value for c in at.caption]
    assert fmt.gpu_hours(res.stat("mm_tune", "data_stall_gpu_hours")) in said[0]


def test_lower_resolution_means_fewer_tokens_and_less_compute():
    base = {"multimodal": {"encoder": "clip-vit-l-14-336"}, "stages": {"mm_align": {}}}
    hi = costcore.estimate(base)
    lo = costcore.estimate(schema.set_path(base, "multimodal.resolution_px", 224))
    assert lo.stat("mm_align", "media_tokens_per_item") == 256 and hi.stat("mm_align", "media_tokens_per_item") == 576
    assert lo.stat("mm_align", "gpu_hours") < hi.stat("mm_align", "gpu_hours")


def test_encoder_table_tokens_match_resolution_and_patch():
    """The table's tokens per item is what (resolution / patch)^2 (images) or 50/s x 30 s (Whisper) gives,
    within the one CLS token some VLMs keep."""
    for name, e in ENCODERS.items():
        if name == "custom":
            continue
        scn = {"multimodal": {"modality": "audio" if e["modality"] == "audio" else "image", "encoder": name},
               "stages": {"mm_align": {"seq_len": 100000}}}
        t_pass, _ = media.media_tokens(schema.validate(scn), "mm_align")
        assert abs(t_pass - e["tokens_per_item"]) <= 1, name
        assert e["source"]


MM_PRESETS = ("llava-1.5-7b", "llava-1.5-13b", "qwen-vl-style-7b", "audio-language-7b")


@pytest.mark.parametrize("preset", MM_PRESETS)
def test_cli_prints_every_phase_with_memory_preprocessing_and_storage(preset):
    out = subprocess.run([sys.executable, "-m", "costcore", "estimate", preset], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    scn = costcore.load_preset(preset)
    assert "Memory/GPU" in out.splitlines()[1]
    for s in scn["stages"]:  # a row per stage and a media line per phase, each named in words
        assert any(line.startswith(schema.STAGE_SHORT[s] + "  ") for line in out.splitlines())
        assert any(line.startswith(f"{schema.STAGE_LABELS[s]} media: ") and
                   (("preprocessing" in line and "media storage" in line) if s in schema.MM_STAGES
                    else "encoder and connector" in line) for line in out.splitlines())
    d = json.loads(subprocess.run([sys.executable, "-m", "costcore", "estimate", preset, "--format", "json"],
                                  cwd=ROOT, capture_output=True, text=True, check=True).stdout)
    for s, v in d["stages"].items():
        assert {"gpu_hours", "wall_days", "usd", "memory_per_gpu_gb", "fits"} <= set(v)
        assert v["multimodal"]["media_items"] > 0
        if s in schema.MM_STAGES:
            assert v["line_items"]["compute.media_preprocessing"] > 0 and v["line_items"]["storage.media"] > 0


def test_existing_scenarios_keep_working():
    res = costcore.estimate("pipeline-70b")
    assert not set(res.stages) & set(schema.MM_STAGES)
    assert all(res.items[:, [k for k, (key, *_) in enumerate(costcore.api.LINE_ITEMS)
                             if key in ("storage.media", "compute.media_preprocessing")]].ravel() == 0)


def test_multimodal_page_renders_the_llava_preset():
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=NEVER_S)
    at.query_params["p"] = "llava-1.5-7b"
    at.switch_page("pages/multimodal.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    text = " ".join(m.value for m in at.markdown) + " ".join(s.value for s in at.subheader)
    assert "What each phase trains and costs" in text
    assert [t.label for t in at.tabs] == ["What each phase costs", "Preprocessing, storage and rights",
                                          "How the cost moves with the media"]
    assert not at.get("vega_lite_chart") or len(at.get("vega_lite_chart")) == 1  # the sweeps wait for their tab
    at.session_state["multimodal:tab"] = "How the cost moves with the media"  # what a click on the tab sets
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    titles = [json.loads(c.proto.spec).get("title", {}) for c in at.get("vega_lite_chart")]
    assert any("media tokens per item" in str(t) for t in titles), titles
    assert any("input resolution" in str(t) for t in titles), titles
    # LLaVA-1.5's 2,048-token sequence cannot hold 2,304 or 2,880 media tokens: said, not silently dropped
    captions = " ".join(c.value for c in at.caption)
    assert "Not drawn: 2,304 and 2,880 media tokens per item" in captions, captions


def test_multimodal_page_shows_the_benchmark_evaluation_and_its_field_moves_it():
    """The Qwen-VL-style preset evaluates 20 checkpoints on 20K images each: the page says how many images,
    the encoder's share of the stage's GPU-hours; raising the items per run raises the stage's GPU-hours."""
    from costcore import fmt
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=NEVER_S)
    at.query_params["p"] = "qwen-vl-style-7b"
    at.switch_page("pages/multimodal.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    res = costcore.estimate(at.session_state["scenario"])
    said = [c.value for c in at.caption if c.value.startswith("Evaluation: ")]
    assert said and f"{fmt.num(400_000)} images over 20 runs" in said[0], said
    assert fmt.gpu_hours(res.stat("eval", "encoder_gpu_hours")) in said[0]
    before = res.stat("eval", "gpu_hours")
    at.number_input(key=f"k:stages.eval.media_items_k:{at.session_state['rev']}").set_value(200.0).run()
    assert not at.exception, [e.message for e in at.exception]
    assert costcore.estimate(at.session_state["scenario"]).stat("eval", "gpu_hours") > before


def test_sweep_lists_the_values_it_leaves_out():
    from costcore.analysis import multimodal as mm
    res = costcore.estimate("llava-1.5-7b")
    tok = mm.sweep(res, "tokens_per_item", [64, 576, 2304, 2880])
    assert sorted(tok.value.unique()) == [64.0, 576.0]
    assert tok.attrs["left_out"] == [2304.0, 2880.0]
    assert mm.sweep(res, "tokens_per_item", [1e9]).attrs["left_out"] == [1e9]
    assert mm.sweep(res, "tokens_per_item", [576]).attrs["left_out"] == []
    # the compute column is the estimate's compute resource at that value (the chart's y), and it moves with the
    # tokens where the phase's whole cost, mostly people, barely did
    at = tok[tok.value == 576.0].set_index("phase").compute_usd
    for s in mm.phases(res):
        assert at[schema.STAGE_LABELS[s]] == pytest.approx(res.stage_usd(s)["compute"], rel=1e-9)
    assert tok[tok.value == 576.0].compute_ratio.tolist() == pytest.approx([1.0] * len(mm.phases(res)), rel=1e-9)  # as set
    align = tok[tok.phase == schema.STAGE_LABELS["mm_align"]].set_index("value")
    assert align.compute_usd[576.0] / align.compute_usd[64.0] > align.usd[576.0] / align.usd[64.0]


@pytest.mark.parametrize("preset", ["llava-1.5-7b", "llava-1.5-13b", "qwen-vl-style-7b", "audio-language-7b"])
def test_validate_change_agrees_with_validate(preset):
    """The sweeps' cheap check of one media number refuses and returns exactly what the full validate does."""
    scn = costcore.estimate(costcore.load_preset(preset)).scenario
    values = {"multimodal.tokens_per_item": [-1, 0, 1, 64, 576, 2304, 2880, 1e6, 1e9, 2.5, True, "x"],
              "multimodal.resolution_px": [0, 14, 112, 224, 336, 448, 896, 5000, -3],
              "multimodal.tiles_per_item": [0, 1, 4, 16, 17, 1000]}
    for path, vals in values.items():
        for v in vals:
            try:
                want = schema.validate(schema.set_path(scn, path, v))
            except ScenarioError as err:
                with pytest.raises(ScenarioError) as got:
                    schema.validate_change(scn, path, v)
                assert str(got.value) == str(err), (path, v)
            else:
                assert schema.validate_change(scn, path, v) == want, (path, v)


def test_phases_switched_on_by_the_page_get_a_node_or_the_nodes_they_need():
    """Opening the page on a text-only scenario changes nothing; its button adds alignment and tuning. On the 70B
    pipeline's 8,192 GPUs that read an alignment finishing in two minutes; the phases start on one node, and a
    phase that does not fit there (the 70B tuned in full) on the whole nodes holding its fewest GPUs."""
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=NEVER_S)
    at.query_params["p"] = "pipeline-70b"
    at.switch_page("pages/multimodal.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.session_state["scenario"] == costcore.load_preset("pipeline-70b")  # visiting changed nothing
    assert any("no multimodal phase" in i.value for i in at.info) and not at.tabs
    at.button(key="mm:add_phases").click().run()
    assert not at.exception, [e.message for e in at.exception]
    stages = at.session_state["scenario"]["stages"]
    assert stages["mm_align"]["num_gpus"] == 8
    need = costcore.estimate(at.session_state["scenario"]).fewest_gpus_any_layout("mm_tune")
    assert need > 8 and stages["mm_tune"]["num_gpus"] == -(-need // 8) * 8
    res = costcore.estimate(at.session_state["scenario"])
    assert not [s for s in res.infeasible if "Multimodal" in s], res.infeasible
    # the notice outlives the rerun that follows the first (a deep link's hand-over, the share link's sync)
    at.run()
    info = " ".join(i.value for i in at.info)
    assert "8 GPUs for multimodal alignment and 24 GPUs for multimodal instruction tuning" in info, info


def test_the_phase_table_gpu_cost_is_the_billed_gpu_hours_times_the_price():
    """The Multimodal page's "GPU cost" is what its "How this was computed" says (82.4 GPU-h x $1.79 = $148 for
    LLaVA-1.5-7B's instruction tuning), not the productive GPU time's line alone ($112), which left the hidden
    losses out of a column next to billed GPU-hours."""
    from costcore.analysis import multimodal as mm
    from costcore.scenario.schema import IX
    res = costcore.estimate("llava-1.5-7b")
    price = float(res.vector[IX["hardware.usd_per_gpu_hour"]])
    table = mm.phase_table(res).set_index("phase")
    assert len(table) == 2
    for phase, row in table.iterrows():
        assert row.compute_usd == pytest.approx(row.gpu_hours * price, rel=1e-12), phase
    assert table.compute_usd.max() > 140


def test_a_phase_without_media_says_so():
    """0 images per sample was accepted without a word while the phase 'trained the connector' on nothing."""
    from costcore.analysis import explain
    from costcore.scenario import schema
    assert not [w for w in explain.checks(costcore.estimate("llava-1.5-7b")) if "hold no media" in w]
    for key, value in (("items_per_sample", 0), ("media_share", 0.0)):
        scn = schema.validate(schema.set_path(costcore.load_preset("llava-1.5-7b"), f"stages.mm_tune.{key}", value))
        said = [w for w in explain.checks(costcore.estimate(scn)) if "hold no media" in w]
        assert said == ["Multimodal instruction tuning: its samples hold no media (0 items per sample, or no sample "
                        "with media), so the connector or encoder it trains sees none; it is costed as text-only "
                        "training."], key


def test_a_phase_takes_its_own_resolution():
    """Qwen-VL pre-trains its ViT at 224 px and trains on at 448; with one resolution for every phase the preset's
    alignment ran the ViT on 1,024 patches instead of 256 (about 4x its encoder compute, said in the preset's
    comment). stages.<phase>.resolution_px sets a phase's own: its encoder tokens follow, the other phases keep the
    block's, and it is refused outside the encoder's range or on audio."""
    import costcore
    from costcore.scenario import schema
    base = costcore.load_preset("qwen-vl-style-7b")
    assert base["stages"]["mm_align"]["resolution_px"] == 224
    block = schema.set_path(base, "stages.mm_align.resolution_px", 0)  # every phase at the block's 448 px
    own, same = costcore.estimate(base), costcore.estimate(schema.validate(block))
    assert schema.media_tokens(base, "mm_align")[0] == (224 // 14) ** 2 == 256
    assert schema.media_tokens(base, "mm_cpt")[0] == (448 // 14) ** 2
    assert own.stat("mm_align", "encoder_gpu_hours") < 0.5 * same.stat("mm_align", "encoder_gpu_hours")
    assert own.stat("mm_cpt", "gpu_hours") == same.stat("mm_cpt", "gpu_hours")
    with pytest.raises(costcore.ScenarioError, match=r"stages\.mm_align\.resolution_px: .* from 14 to 448"):
        schema.validate(schema.set_path(base, "stages.mm_align.resolution_px", 896))
    with pytest.raises(costcore.ScenarioError, match="not to audio"):
        schema.validate(schema.set_path(costcore.load_preset("audio-language-7b"), "stages.mm_align.resolution_px", 224))
