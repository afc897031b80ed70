"""Explanations: each stage's formulas with the scenario's own numbers, and checks.

Pure text (markdown + LaTeX strings); the app renders them in
"how this was computed" expanders. Nothing here computes a number: every
number shown is one of the kernel's stats (costcore.engine.kernel.STATS), including
the intermediate terms (the job layout's step terms, context length, trainable parameters);
inputs are shown as the scenario gives them.
"""
from __future__ import annotations

from costcore.api import Result
from costcore.scenario.schema import CATALOG, MM_STAGES, STAGE_LABELS, effective_value, uses_default_mfu
from costcore import fmt
from costcore.analysis.finetune import methods


def shape(res: Result, stage: str) -> dict:
    """The model's shape as the kernel used it for a stage: N active, L, d, N total (counts)."""
    return {"N": res.stat(stage, "active_params"), "L": res.stat(stage, "model_layers"),
            "d": res.stat(stage, "model_hidden"),
            "N_total": float(effective_value(res.scenario, "model.params_b")) * 1e9}


def _e(v: float) -> str:
    """A number at three significant digits, trailing zeros kept (3.70x10^10, not 3.7x10^10)."""
    m, _, ex = f"{v:#.3g}".partition("e")
    m = m.rstrip(".")
    return m if not ex else rf"{m}\times10^{{{int(ex)}}}"


def _t(words: str) -> str:
    """Words or a formatted number (fmt: $9.01k, 1.64k GPU-h, 2.64 h) as LaTeX text; $ and % escaped."""
    return r"\text{" + words.replace("$", r"\$").replace("%", r"\%") + "}"


def _gpu_h(v: float) -> str:
    """GPU-hours in a formula at three significant digits (fmt.gpu_hours: 16.6k GPU-h, not 16,598)."""
    return _t(fmt.gpu_hours(v))


def _lines(*parts: str) -> str:
    """Display LaTeX of several centred lines: the formula, then the scenario's numbers (on one line, a
    multimodal or MoE row ran past the expander of a 1280-pixel window)."""
    return r"\begin{gathered}" + r"\\ ".join(parts) + r"\end{gathered}"


def _count(v: float) -> str:
    """A count at three significant digits, a tiny one as a power of ten (6.52x10^-5, not 6.52e-05)."""
    return _e(v) if 0 < abs(v) < 1e-3 else _t(fmt.num(v))


def _passes(n: float) -> str:
    return _t(f"{n:g} pass" + ("" if n == 1 else "es"))


def mfu_factors(res: Result, stage: str) -> dict | None:
    """The job layout behind a stage's MFU as the kernel computed it (its stats), or None when
    the stage gives its own MFU or throughput.

    step = compute + communication + bubble + recompute + optimizer (seconds per optimizer step of
    the chosen plan); benchmark MFU = model FLOPs of the step / (step x GPUs x peak); the stage's
    MFU is that times efficiency.sustained_fraction.
    """
    if not uses_default_mfu(res.scenario, stage):
        return None
    names = ("step_time_s", "step_compute_s", "step_communication_s", "step_bubble_s", "step_recompute_s",
             "step_optimizer_s", "plan_mfu", "mfu", "plan_tp", "plan_pp", "plan_dp", "plan_cp", "plan_ep",
             "plan_micro_batch", "plan_zero", "recompute_mode", "micro_batches")
    out = {k: res.stat(stage, k) for k in names}
    out["sustained"] = float(effective_value(res.scenario, "efficiency.sustained_fraction"))
    return out


def _default_mfu_row(res: Result, stage: str):
    f = mfu_factors(res, stage)
    if f is None:
        return None
    rc = ("none", "selective", "full")[int(round(f["recompute_mode"]))]
    dual = res.stat(stage, "plan_dualpipe") > 0.5 and f["plan_pp"] > 1
    # four lines (plan, its options, step terms, MFU): on one, a MoE plan ran 1.7x past the expander's width
    latex = _lines(
        rf"\text{{TP {f['plan_tp']:.0f} PP {f['plan_pp']:.0f} DP {f['plan_dp']:.0f} CP {f['plan_cp']:.0f}"
        rf" EP {f['plan_ep']:.0f},}}",
        rf"\text{{micro-batch {f['plan_micro_batch']:.0f}, ZeRO-{f['plan_zero']:.0f}, "
        rf"recompute {rc}{', DualPipe' if dual else ''}}}",
        rf"t_{{step}} = \underbrace{{{_count(f['step_compute_s'])}}}_{{\text{{compute}}}}"
             rf" + \underbrace{{{_count(f['step_communication_s'])}}}_{{\text{{comm.}}}}"
             rf" + \underbrace{{{_count(f['step_bubble_s'])}}}_{{\text{{bubble}}}}"
             rf" + \underbrace{{{_count(f['step_recompute_s'])}}}_{{\text{{recompute}}}}"
             rf" + \underbrace{{{_count(f['step_optimizer_s'])}}}_{{\text{{optimizer}}}} = {_count(f['step_time_s'])}\,\text{{s}}",
        rf"\text{{MFU}} = {f['plan_mfu']:.3f} \times {f['sustained']:.2f}\ (\text{{sustained}}) = {f['mfu']:.3f}")
    return ("MFU from the job layout", latex,
            "costcore/engine/layout.py (Megatron-LM / Korthikanti et al. 2022 step terms"
            + ("; DualPipe: DeepSeek-V3 report Sec. 3.2.1, Table 2" if dual else "") + "); the plan is the "
            "fastest that fits, searched per stage; knobs fitted on Megatron Selene and public runs (docs/validation.md)")


_STATS_SHOWN = ("productive_gpu_hours", "gpu_hours", "mfu", "tokens", "flops", "num_gpus", "wall_days",
                "interruptions", "ckpt_interval_h", "young_daly_h", "ckpt_count", "ckpt_gb", "ckpt_write_s",
                "memory_per_gpu_gb", "rollout_gpu_hours", "trainable_params_b", "ctx_tokens",
                "trainable_params", "train_flops_per_token", "passes_gpu_hours", "gpu_usd", "decode_replica_gpus",
                "decode_batch_used")


def _training_rows(res: Result, stage: str, st: dict) -> list[tuple[str, str, str]]:
    """FLOPs per token, default MFU, productive GPU-hours of a pretrain/CPT/SFT/DPO stage."""
    scn = res.scenario
    sh = shape(res, stage)
    N, L, d = sh["N"], sh["L"], sh["d"]
    seq = st["ctx_tokens"]  # SFT: min(seq_len, tokens per sample); DPO: min(seq_len, longer response)
    method = effective_value(scn, f"stages.{stage}.method") if stage in ("sft", "dpo") else "full"
    fpt = st["train_flops_per_token"]
    peak = float(effective_value(scn, "hardware.peak_tflops"))
    out = []
    shape_src = "model shape: N = 12·L·d² with d/L = 128 unless given (Kaplan et al. 2020)"
    if method == "full":
        out.append(("Training FLOPs per token",
                    _lines(r"6N + 12\,L\,d\,s", rf"= 6\cdot {_e(N)} + 12\cdot {L:.0f}\cdot {d:.0f}\cdot {seq:.0f} = {_e(fpt)}"),
                    "PaLM (arXiv:2204.02311) App. B; " + shape_src))
    else:
        out.append((f"{methods()[method]['label']} FLOPs per token",
                    _lines(r"4N + 12\,L\,d\,s + 6N_{lora}",
                           rf"= 4\cdot {_e(N)} + 12\cdot {L:.0f}\cdot {d:.0f}\cdot {seq:.0f} + 6\cdot {_e(st['trainable_params'])}",
                           rf"= {_e(fpt)}"),
                    "frozen base: forward 2N + input gradients 2N (model assumption); "
                    "N_lora = r(d_in + d_out) per adapted matrix (peft lora/layer.py)"
                    + ("; a 4-bit or 8-bit base does the same FLOPs and spends time dequantizing its weights to BF16 "
                       "before every matmul: weights x (packed bytes + 2) / memory bandwidth, in the step time "
                       "(bitsandbytes autograd/_functions.py MatMul4Bit; costcore/engine/formulas.py dequant_seconds)"
                       if res.stat(stage, "quantized_base") > 0.5 else "")))
    mfu_row = _default_mfu_row(res, stage)
    if mfu_row:
        out.append(mfu_row)
    out.append(("Productive GPU-hours",
                rf"\frac{{C}}{{\text{{peak}}\cdot \text{{MFU}}\cdot 3600}} = \frac{{{_e(st['flops'])}}}{{{peak:g}\times10^{{12}} \cdot {st['mfu']:.3f} \cdot 3600}} = {_gpu_h(st['productive_gpu_hours'])}",
                "MFU definition: PaLM App. B; MFU from the job layout (costcore/engine/layout.py, docs/validation.md)"))
    return out


def _media_rows(res: Result, stage: str, st: dict) -> list[tuple[str, str, str]]:
    """Media tokens in the sequence, the LLM's FLOPs per token, the encoder and connector, GPU-hours."""
    scn = res.scenario
    m = {k: res.stat(stage, k) for k in ("media_items", "media_tokens_per_item", "encoder_passes_per_item",
                                         "media_token_share", "encoder_gpu_hours", "encoder_params",
                                         "connector_params")}
    text = float(effective_value(scn, f"stages.{stage}.text_tokens_per_sample"))
    peak = float(effective_value(scn, "hardware.peak_tflops"))
    return [
        ("Tokens in the language model",
         _lines(r"T = \text{samples}\,(t_{text} + \text{share}\cdot k\cdot m)\cdot\text{epochs}",
                rf"m = {m['media_tokens_per_item']:,.0f}\ \text{{tokens per item}},\ t_{{text}} = {text:,.0f}"
                rf" \Rightarrow {_e(st['tokens'])}\ ({m['media_token_share'] * 100:.0f}\%\ \text{{media}})"),
         "LLaVA-1.5 (arXiv:2310.03744) Sec. 3: 576 tokens per 336 px image; Q-Former/resampler queries (BLIP-2, "
         "Qwen-VL); pixel shuffle (InternVL 1.5)"),
        ("Language model FLOPs per token",
         _lines(rf"{_e(st['train_flops_per_token'])}\ (6N\ \text{{trained}},\ 4N\ \text{{frozen or LoRA:}}",
                r"\text{gradients flow to the connector}) + 12\,L\,d\,s"),
         "PaLM (arXiv:2204.02311) App. B; frozen base: forward 2N + input gradients 2N"),
        ("Encoder and connector",
         _lines(rf"{fmt.num(m['media_items'])}\ \text{{items}} \times {_passes(m['encoder_passes_per_item'])}"
                r"\times(2N_{enc}T + 4L_{enc}T^2 d_{enc})",
                rf"N_{{enc}} = {_e(m['encoder_params'])},\ N_{{conn}} = {_e(m['connector_params'])}"
                rf" \Rightarrow {_gpu_h(m['encoder_gpu_hours'])}"),
         "x3 when trained, x1 frozen, once in all with precomputed features (costcore/engine/formulas.py media section)"),
        ("Productive GPU-hours",
         rf"\frac{{C}}{{\text{{peak}}\cdot \text{{MFU}}\cdot 3600}} = \frac{{{_e(st['flops'])}}}{{{peak:g}\times10^{{12}} \cdot {st['mfu']:.3f} \cdot 3600}} = {_gpu_h(st['productive_gpu_hours'])}",
         "the MFU of the language model's searched plan (costcore/engine/layout.py), applied to the encoder too")]


def stage_explanation(res: Result, stage: str) -> list[tuple[str, str, str]]:
    """[(title, latex or markdown, source)] for one enabled stage; every number is a kernel stat."""
    st = {k: res.stat(stage, k) for k in _STATS_SHOWN}
    price = float(effective_value(res.scenario, "hardware.usd_per_gpu_hour"))
    out = _training_rows(res, stage, st) if stage in ("pretrain", "cpt", "sft", "dpo") else []
    if stage == "rl":
        eta = float(effective_value(res.scenario, "stages.rl.rollout_efficiency"))
        out.append(("Rollout generation (decode roofline)",
                    _lines(r"t_{step} = \max\left(\frac{W + B\cdot kv\cdot ctx}{t\cdot BW}, \frac{2N B}{t\cdot peak}\right)/\eta",
                           rf"t = {_t(fmt.gpus(st['decode_replica_gpus']))},\ B = {st['decode_batch_used']:,.0f}\ \text{{sequences}},\ \eta = {eta:g}"
                           rf" \Rightarrow {_gpu_h(st['rollout_gpu_hours'])}"),
                    "docs/reference/cost-model-notes.md: gpu_poor src/App.js, LLM-Viewer roofline; DeepSpeed-Chat: generation dominates RLHF "
                    "wall time; eta checked on public batch latencies (docs/validation.md, section 6)"))
        out.append(("Training and scoring passes",
                    _lines(r"\text{policy}\ 6N\cdot T\cdot epochs + \text{ref/old/reward}\ 2N\cdot T\ (+\text{critic})",
                           rf"\Rightarrow {_gpu_h(st['passes_gpu_hours'])}"),
                    "PPO per trained token: 6N_actor + 6N_critic + 2N_ref + 2N_reward (docs/reference/cost-model-notes.md Sec. 1); GRPO drops the critic"))
    if stage in MM_STAGES:
        out.extend(_media_rows(res, stage, st))
    if stage == "eval":
        eta = float(effective_value(res.scenario, "stages.eval.decode_efficiency"))
        bits = float(effective_value(res.scenario, "stages.eval.weight_bits"))
        out.append(("Evaluation inference",
                    _lines(rf"\text{{runs}}\cdot(2N\cdot\text{{prompt tokens}}/\text{{(peak·util)}} + \text{{decode roofline}}) = {_gpu_h(st['productive_gpu_hours'])}",
                           rf"t = {_t(fmt.gpus(st['decode_replica_gpus']))},\ B = {st['decode_batch_used']:,.0f}\ \text{{sequences}},\ \eta = {eta:g},"
                           rf"\ W = N \times {bits:g}\ \text{{bits}}"),
                    "prefill compute bound; decode bandwidth bound (LLM-Viewer); checked on public batch latencies "
                    "(docs/validation.md, section 6)"))
        items = res.stat(stage, "media_items")
        if items > 0:
            out.append(("Media of the multimodal benchmarks",
                        _lines(rf"{fmt.num(items)}\ \text{{items}} \times [{_passes(res.stat(stage, 'encoder_passes_per_item'))}"
                               r"\times(2N_{enc}T + 4L_{enc}T^2 d_{enc}) + 2N_{conn}\,m + m\,(2N + 4Lds)]",
                               rf"m = {res.stat(stage, 'media_tokens_per_item'):,.0f}\ \text{{tokens per item}}"
                               rf" \Rightarrow {_gpu_h(res.stat(stage, 'encoder_gpu_hours'))}\ \text{{encoder and connector}}"),
                        "the multimodal block's encoder and connector, at the inference utilization; media tokens "
                        "prefilled as prompt tokens (costcore/engine/kernel.py _eval_work)"))
    out += _stall_rows(res, stage)
    if stage != "eval":
        out.append(_checkpoint_row(res, stage, st))
    out.append(("Billed GPU-hours and money",
                _lines(rf"{_gpu_h(st['gpu_hours'])} \times {_t(fmt.usd(price))}/\text{{GPU-h}} = {_t(fmt.usd(st['gpu_usd']))}",
                       rf"\text{{one run's wall-clock}} = {_t(fmt.days(st['wall_days']))}\ \text{{on}}\ {_t(fmt.gpus(st['num_gpus']))}"),
                "billed = productive + data-pipeline stalls + failures + checkpoint stalls + idle + failed runs + "
                "repeated experiments; the wall-clock is one run's (training, stalls, restarts)"))
    return out


def _checkpoint_row(res: Result, stage: str, st: dict) -> tuple[str, str, str]:
    """The interval used and why (set, Young/Daly, or all the training when that is shorter), and the failures."""
    tau, yd = st["ckpt_interval_h"], st["young_daly_h"]
    set_h = float(effective_value(res.scenario, f"stages.{stage}.ckpt_interval_h"))
    asked = set_h if set_h > 0 else yd
    # the interval is the run's training time (wall-clock adds stalls, restarts and setup)
    why = (rf"\text{{all the training, shorter than the}}\ {_t(fmt.duration_s(asked * 3600))}\ "
           + (r"\text{set}" if set_h > 0 else r"\text{of Young/Daly}") if tau < asked * 0.9995
           else (r"\text{as set}" if set_h > 0 else r"\text{Young/Daly}"))
    yd_words = rf"\text{{Young/Daly}}\ {_t(fmt.duration_s(yd * 3600))}"
    short = "all the training" in why  # its reason is long: Young/Daly on a line of its own
    interval = rf"\tau = {_t(fmt.duration_s(tau * 3600))}\ ({why}" + (rf";\ {yd_words}" if set_h > 0 and not short else "") + ")"
    return ("Checkpoint interval and failures",
            _lines(  # Daly's form in full (it read "[...]"): M is the mean time between interruptions of the GPUs
                r"\tau = \sqrt{2\delta M}\left[1 + \tfrac{1}{3}\sqrt{\tfrac{\delta}{2M}} + \tfrac{1}{9}\tfrac{\delta}{2M}\right]"
                r" - \delta",
                rf"\text{{M: mean time between interruptions}};\ \delta = {_t(fmt.duration_s(st['ckpt_write_s']))}"
                r"\text{ to write one}",
                interval, *([f"({yd_words})"] if set_h > 0 and short else []),
                rf"{_count(st['interruptions'])}\ \text{{interruptions}} \times (\tau/2 + \text{{restart}})"),
            "Young 1974; Daly 2006 (LLNL/scr scr_ckpt_interval.py); failure rate: Llama 3 (arXiv:2407.21783) Sec. 3.3.4")


def _stall_rows(res: Result, stage: str) -> list[tuple[str, str, str]]:
    """The data-pipeline stall when the loader (tokens, or media decoded online) is slower than the GPUs."""
    stall = res.stat(stage, "data_stall_gpu_hours")
    if stall <= 0:
        return []
    take, deliver = res.stat(stage, "media_items_per_s_per_node"), res.stat(stage, "media_loader_items_per_s_per_node")
    loader = float(effective_value(res.scenario, f"stages.{stage}.loader_tokens_per_s_per_node"))
    tokens = rf"\frac{{\text{{tokens/s per node taken}}}}{{{loader:,.0f}}}"
    source = "costcore/engine/formulas.py data_stall_gpu_hours; the source articles' data-pipeline stalls"
    if deliver > 0 and take > deliver:
        cores = float(effective_value(res.scenario, "multimodal.loader_cores_per_node"))
        media = rf"\frac{{{take:.3g}}}{{{deliver:.3g}}}"
        ratio = rf"\max\left({tokens}, {media}\right)" if loader > 0 else media  # the kernel: the slower pipeline
        source = (f"media items per second per node the GPUs take ({take:.3g}) against what {cores:g} loader cores "
                  f"decode ({deliver:.3g}); " + source)
    else:
        ratio = tokens
    return [("Data-pipeline stall", rf"\text{{productive}}\times\left({ratio} - 1\right) = {_gpu_h(stall)}",
             source)]


def checks(res: Result) -> list[str]:
    """Plain-sentence warnings: inputs outside what the model was checked on.

    Plans that do not fit are not warnings but infeasible (``Result.infeasible``), shown in place of the total.
    """
    scn = res.scenario
    w = []
    gpu = effective_value(scn, "hardware.gpu")
    if CATALOG[gpu].get("confidence") == "low":
        w.append(f"The {CATALOG[gpu]['label']} figures are low confidence ({CATALOG[gpu]['source']}); "
                 "set hardware.usd_per_gpu_hour and the stages' mfu to your own measurements.")
    p = float(effective_value(scn, "model.params_b"))
    if p < 0.1 or p > 1100:
        w.append(f"Model size {p:g}B is outside the 0.1B-1.1T range the utilization model was checked on.")
    for s in res.stages:
        if s in ("pretrain", "cpt", "sft", "dpo", "rl"):
            seq = float(effective_value(scn, f"stages.{s}.seq_len"))
            if seq > 131072:
                w.append(f"{STAGE_LABELS[s]}: sequence length {seq:,.0f} is beyond the 128K the attention term was "
                         "checked on.")
        g = res.stat(s, "num_gpus")
        if g > 32768:
            w.append(f"{STAGE_LABELS[s]}: {g:,.0f} GPUs is beyond the largest published run (16,384) the model was "
                     "checked on.")
        if s.startswith("mm_") and res.stat(s, "media_items") <= 0 and (
                effective_value(scn, f"stages.{s}.train_connector") or effective_value(scn, f"stages.{s}.train_encoder")):
            # 0 items per sample (or no sample with media) was accepted without a word while the phase "trained the
            # connector" on nothing
            w.append(f"{STAGE_LABELS[s]}: its samples hold no media (0 items per sample, or no sample with media), so "
                     "the connector or encoder it trains sees none; it is costed as text-only training.")
    return w
