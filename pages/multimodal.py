"""Multimodal: media encoders, media tokens, alignment and joint tuning, preprocessing and media storage."""
import math

import altair as alt
import streamlit as st

from costcore import fmt
from costcore.analysis import multimodal as mm
from costcore.scenario import media, schema
from costcore.scenario.schema import ENCODERS, MM_STAGES, STAGE_LABELS
from pages import common

ss = common.state()


def _add_phases() -> None:
    """Alignment and instruction tuning added to a text-only plan (the button below; visiting never adds them)."""
    # on one node of the sidebar's GPU (at most its count), as the LLaVA-style recipes run: a pre-training
    # preset's thousands of GPUs would finish an alignment in minutes, a plan nobody makes
    one_node = int(min(schema.effective_value(ss.scenario, "hardware.num_gpus"),
                       schema.effective_value(ss.scenario, "hardware.gpus_per_node")))
    common.apply_scenario(dict(ss.scenario, stages=dict(ss.scenario.get("stages", {}),
                                                        mm_align={"num_gpus": one_node},
                                                        mm_tune={"num_gpus": one_node})))
    # a phase that does not fit on one node (a large model tuned in full) gets the whole nodes that hold
    # its fewest GPUs, as the kernel finds them over every layout
    fewest = {s: common.result().fewest_gpus_any_layout(s) for s in ("mm_align", "mm_tune")}
    gpus = {s: int(-(-max(f, 1) // one_node) * one_node) if math.isfinite(f) else one_node
            for s, f in fewest.items()}
    if any(n != one_node for n in gpus.values()):
        common.apply_scenario(dict(ss.scenario, stages={**ss.scenario["stages"],
                                                        **{s: {"num_gpus": n} for s, n in gpus.items()}}))
    words = (f"one node ({fmt.gpus(one_node)})" if set(gpus.values()) == {one_node} else
             " and ".join(f"{fmt.gpus(n)} for {STAGE_LABELS[s].lower()}" for s, n in gpus.items())
             + f" (whole nodes of {one_node:,} holding the fewest GPUs on which each fits)")
    # kept in the session, not shown from one run only: a rerun right after (the share link's sync) would lose it
    ss["mm:switched_on"] = (gpus, f"Alignment and instruction tuning were added with their default settings, on "
                                  f"{words}: change it in the phase's GPUs field, or switch them off again.")


res = common.frame(
    "Multimodal",
    "Teaching a language model to see or hear adds an **encoder** (a vision or audio transformer) that "
    "turns each image, video frame or audio window into tokens, a **connector** that maps them into the "
    "model, and phases that freeze and unfreeze parts: **alignment** trains the connector on captioned "
    "pairs, **continued pre-training** trains on interleaved media and text, **instruction tuning** "
    "trains the connector and the model on conversations. Each image becomes hundreds of tokens in the "
    "model's sequence, so media usually dominate its compute; decoding, resizing and storing the media "
    "are costs of their own. Load the *LLaVA-1.5* presets for the published recipe.")

if not set(ss.scenario.get("stages", {})) & set(MM_STAGES):  # visiting a page never changes the plan
    st.info("This scenario has no multimodal phase. Add alignment and instruction tuning to the plan to plan "
            "them here (their cost then counts in every total), or load a LLaVA-1.5, Qwen-VL-style or "
            "audio-language preset in the sidebar.")
    st.button("Add alignment and instruction tuning to the plan (default settings)", key="mm:add_phases",
              on_click=_add_phases)
    st.stop()
_note = ss.get("mm:switched_on")
if _note and all(ss.scenario.get("stages", {}).get(s, {}).get("num_gpus") == n for s, n in _note[0].items()):
    st.info(_note[1])  # while the phases it switched on still run where it put them
scn = common.scenario()
ev = schema.effective_value

st.subheader("Media and encoder")
left, mid, right = st.columns(3)
with left:
    common.knob("multimodal.modality", "Media type")
    modality = ev(common.scenario(), "multimodal.modality")
    kind = "audio" if modality == "audio" else "image"
    names = [n for n, e in ENCODERS.items() if e.get("modality") == kind]
    current = ev(scn, "multimodal.encoder")
    key = f"mm:encoder:{ss.rev}"

    def picked():
        common.apply_scenario(media.pick_encoder(ss.scenario, st.session_state[key]))

    st.selectbox("Encoder", names, index=names.index(current) if current in names else 0, key=key,
                 on_change=picked, format_func=lambda n: ENCODERS[n].get("label", n),
                 help="The shipped encoders (costcore/data/encoders.yaml, with sources). A video runs each "
                      "sampled frame through an image encoder.")
    if current not in names:
        st.warning(f"The encoder {ENCODERS[current].get('label', current)} does not take {modality}; pick one above.")
    common.knob("multimodal.connector", "Connector")
with mid:
    if modality == "audio":
        common.knob("multimodal.seconds_per_item", "Seconds per recording", 1.0, 600.0, 1.0)
        common.knob("multimodal.token_compression", "Token pooling (0 = none)", 0.0, 8.0, 1.0)
    else:
        patch = int(ev(scn, "multimodal.patch_px"))
        top = int(ev(scn, "multimodal.max_resolution_px"))
        common.knob("multimodal.resolution_px", "Input resolution (pixels a side)", patch, top, patch)
        if modality == "video":
            common.knob("multimodal.frames_per_item", "Frames per clip", 1.0, 128.0, 1.0)
        else:
            common.knob("multimodal.tiles_per_item", "Tiles per image (dynamic resolution)", 1.0, 16.0, 1.0)
with right:
    common.knob("multimodal.tokens_per_item", "Media tokens per item (0 = from the encoder)", None, None, 1,
                "number")
    common.knob("multimodal.precomputed_features", "Precompute encoder features")  # longer was cut at 1280 px
    common.knob("multimodal.preprocessing", "Media decoding")
    if ev(scn, "multimodal.preprocessing") == "online":
        common.knob("multimodal.loader_cores_per_node", "Data-loader CPU cores per node", None, None, 1, "number")
    common.knob("multimodal.raw_mb_per_item", "Stored MB per item (0 = typical for the media type)", None, None,
                0.01, "number")

st.subheader("Phases")
for stage in MM_STAGES:
    st.markdown(f"**{STAGE_LABELS[stage]}**")
    if not common.stage_toggle(stage, f"Include {STAGE_LABELS[stage].lower()}"):
        continue
    p = f"stages.{stage}."
    # the most items a sample's sequence holds with its text: the slider went to 16 and refused all past 3 on LLaVA
    _now = common.result()
    _tok = _now.stat(stage, "media_tokens_per_item") if stage in _now.stages else 0.0
    _room = float(ev(scn, p + "seq_len")) - float(ev(scn, p + "text_tokens_per_sample"))
    _most = max(float(ev(scn, p + "items_per_sample")), min(16.0, math.floor(2.0 * _room / _tok) / 2.0)
                if _tok > 0 else 16.0, 0.5)
    common.knob_columns(
        [(p + "samples", "Samples", 1000, 100_000_000, 1000, "log"),
         (p + "items_per_sample", f"{mm.MEDIA_WORDS[modality].capitalize()} per sample", 0.0, _most, 0.5)]
        # Qwen-VL pre-trains at 224 px and trains on at 448: one resolution for every phase could not say it
        + ([(p + "resolution_px", "Its resolution, px (0 = as above)", None, None, 14,
             "number")] if modality != "audio" else []),
        [(p + "text_tokens_per_sample", "Text tokens per sample", 0.0, 4096.0, 10.0),
         (p + "media_share", "Share of samples with media", 0.0, 1.0, 0.01),
         (p + "seq_len", "Sequence length (tokens)", None, None, 256, "number")],
        ["Trained in this phase:", (p + "train_connector", "Connector"), (p + "train_llm", "LLM"),
         (p + "train_encoder", "Encoder")],  # "Train the ..." was cut to "Train th…" three times at 800 px
        [(p + "method", "Method for the language model"), (p + "epochs", "Epochs", 0.5, 10.0, 0.5),
         (p + "num_gpus", "GPUs (0 = the sidebar's count)", None, None, 1, "number")])

st.markdown("**Evaluation on multimodal benchmarks**")
if common.stage_toggle("eval", "Include evaluation"):
    common.knob_columns([("stages.eval.runs", "Evaluation runs", 1, 500, 1)],
                        [("stages.eval.media_items_k", f"{mm.MEDIA_WORDS[modality].capitalize()} scored per run "
                          "(thousands; 0 = text only)", None, None, 1.0, "number")])

res = common.result()
if not mm.phases(res):
    st.info("No multimodal phase is switched on: include one above, or load a LLaVA-1.5 preset in the sidebar.")
    st.stop()
common.show_checks(res, mm.phases(res))

def phase_costs() -> None:
    """What each phase trains and costs, and its memory and cost by resource."""
    st.subheader("What each phase trains and costs")
    table = mm.phase_table(res)
    # Two tables that each fit the page: with all 13 columns in one, the dollars sat past its right edge; the
    # phases without the page's own word "Multimodal" and short headers (at 1280 px the last column was cut)
    table = table.assign(phase=table.phase.map(lambda w: w.removeprefix("Multimodal ").capitalize()),
                         trains=table.trains.str.replace("language model", "LLM"))  # as "LLM tokens" says it
    common.number_table(
        table[["phase", "trains", "media_items", "tokens_per_item", "media_share", "llm_tokens"]],
        {"media_items": fmt.num, "tokens_per_item": fmt.num, "media_share": fmt.pct, "llm_tokens": fmt.num},
        {"phase": "Phase", "trains": "Trains", "media_items": mm.MEDIA_WORDS[modality].capitalize(),
         "tokens_per_item": "Tokens per item", "media_share": "Media share", "llm_tokens": "LLM tokens"},
        {"trains": "the parts this phase trains (LLM: the language model); the rest stay frozen",
         "media_share": "share of the language model's tokens that are media tokens",
         "llm_tokens": "text and media tokens through the language model, all epochs"},
        widths={"trains": "medium"})  # sized to its header, it cut "connector + language model + enc"
    common.number_table(
        table[["phase", "gpu_hours", "encoder_gpu_hours", "wall_days", "compute_usd", "total_usd", "memory_gb", "fits"]],
        {"gpu_hours": fmt.gpu_hours, "encoder_gpu_hours": fmt.gpu_hours, "wall_days": fmt.days,
         "compute_usd": fmt.usd, "total_usd": fmt.usd, "memory_gb": fmt.gb},
        {"phase": "Phase", "gpu_hours": "GPU-hours", "encoder_gpu_hours": "Encoder GPU-hours",
         "wall_days": "Wall-clock", "compute_usd": "GPU cost", "total_usd": "Total", "memory_gb": "Memory per GPU",
         "fits": "Fits"},
        {"gpu_hours": "billed: productive and hidden time", "encoder_gpu_hours": "the encoder's and the connector's "
         "share of the productive GPU-hours", "compute_usd": "the billed GPU-hours times the price per GPU-hour"})
    common.stacked_bar(res, mm.phases(res), height=260)
    if "eval" in res.stages and res.stat("eval", "media_items") > 0:
        st.caption(f"Evaluation: {fmt.num(res.stat('eval', 'media_items'))} {mm.MEDIA_WORDS[modality]} over "
                   f"{fmt.num(ev(res.scenario, 'stages.eval.runs'))} runs, "
                   f"{fmt.num(res.stat('eval', 'media_tokens_per_item'))} tokens each; encoder and connector "
                   f"{fmt.gpu_hours(res.stat('eval', 'encoder_gpu_hours'))} of the stage's "
                   f"{fmt.gpu_hours(res.stat('eval', 'gpu_hours'))}, "
                   f"{common.md_escape(fmt.usd(res.stat('eval', 'usd_total')))} in all (the Data, evaluation and "
                   "people page has the rest of it).")


def media_costs() -> None:
    """Decoding, features, storage and rights of the media."""
    lines = mm.media_table(res)
    common.number_table(lines, {"amount": fmt.sig3, "usd": fmt.usd},  # measured amounts: 3.10 CPU-hours, not 3.1
                        {"phase": "Phase", "line": "Line item", "amount": "Amount", "unit": "Unit", "usd": "Cost"})
    words = mm.MEDIA_WORDS[modality]
    for r in mm.loader_table(res).itertuples():
        stall = (f"the GPUs wait {fmt.gpu_hours(r.stall_gpu_hours)} ({common.md_escape(fmt.usd(r.stall_usd))}, "
                 "under hidden costs). Precomputed features, more loader cores or offline preprocessing remove the "
                 "wait" if r.stall_gpu_hours > 0 else "the loader keeps up, so the GPUs do not wait for media")
        st.caption(f"{r.phase}: decoded online, the data loader delivers {fmt.num(r.delivered)} {words} per second "
                   f"to a node and its GPUs take {fmt.num(r.taken)}: {stall}.")


def media_sweeps() -> None:
    """The phases' cost against the media tokens per item and the encoder's resolution."""
    tok = mm.sweep(res, "tokens_per_item", [64, 144, 256, 576, 1152, 2304, 2880])
    if not tok.empty:
        chart = alt.Chart(tok).mark_line(point=alt.OverlayMarkDef(size=70, filled=False)).encode(
            x=alt.X("value:Q", title="Media tokens per item",
                    scale=alt.Scale(type="log", **({"domain": [float(tok.value.min()), float(tok.value.max())]}
                                                   if tok.value.nunique() > 1 else {})),
                    axis=alt.Axis(values=sorted(tok.value.unique().tolist()), grid=False)),
            # log: the phases' costs span orders of magnitude (an alignment at $1.9M hid two phases near $90k)
            # the compute resource (GPUs, media preprocessing) against its cost as set: with people and data in,
            # or on a log axis of the phases' dollars, a 30% move read as a flat line
            y=alt.Y("compute_ratio:Q", title="Compute cost against today's (x)", axis=alt.Axis(format=".2~f")),
            color=alt.Color("phase:N", title="Phase", legend=alt.Legend(orient="bottom", labelLimit=400)),
            # two phases of nearly one cost draw one line over the other: each its own point shape
            shape=alt.Shape("phase:N", title="Phase", legend=alt.Legend(orient="bottom", labelLimit=400)),
            tooltip=[alt.Tooltip("phase:N", title="Phase"), alt.Tooltip("value:Q", title="Tokens per item"),
                     alt.Tooltip("compute_usd:Q", title="Compute cost ($)", format="$,.0f"),
                     alt.Tooltip("compute_ratio:Q", title="Against today's", format=".3~f"),
                     alt.Tooltip("usd:Q", title="All its cost ($)", format="$,.0f")]).properties(height=400)
        common.show_chart(chart, "Each phase's compute cost against the media tokens per item (1 = as set)")
        st.caption("Compute: the GPUs and the media preprocessing, as a multiple of each phase's own today. A phase's "
                   "data, storage and people costs do not move with the tokens per item (the table above has them).")
    if tok.attrs.get("left_out"):
        st.caption(f"Not drawn: {fmt.words_list(f'{v:,.0f}' for v in tok.attrs['left_out'])} media tokens per "
                   "item, more than a sample's sequence holds with its text (a longer sequence or fewer "
                   f"{mm.MEDIA_WORDS[modality]} per sample would take them).")
    if modality != "audio":
        patch = int(ev(res.scenario, "multimodal.patch_px"))
        top = int(ev(res.scenario, "multimodal.max_resolution_px"))
        sizes = sorted({max(patch, min(top, int(v) // patch * patch)) for v in (112, 168, 224, 280, 336, 448, 672,
                                                                               896)} | {top})
        res_sw = mm.sweep(res, "resolution_px", sizes)
        if not res_sw.empty:
            chart = alt.Chart(res_sw).mark_line(point=True).encode(
                # ticks at the resolutions swept: Vega put 25 ticks (every 10 px) under 5 points
                x=alt.X("value:Q", title="Input resolution (pixels a side)",
                        axis=alt.Axis(values=sorted(set(res_sw["value"].tolist())), format="d")),
                y=alt.Y("gpu_hours_ratio:Q", title="GPU-hours against today's (x)", axis=alt.Axis(format=".2~f")),
                color=alt.Color("phase:N", title="Phase", legend=alt.Legend(orient="bottom", labelLimit=400)),
                shape=alt.Shape("phase:N", title="Phase", legend=alt.Legend(orient="bottom", labelLimit=400)),
                tooltip=[alt.Tooltip("phase:N", title="Phase"), alt.Tooltip("value:Q", title="Resolution"),
                         alt.Tooltip("gpu_hours:Q", title="GPU-hours", format=",.0f"),
                         alt.Tooltip("gpu_hours_ratio:Q", title="Against today's", format=".3~f")]).properties(height=400)
            common.show_chart(chart, "Each phase's GPU-hours against the encoder's input resolution (1 = as set)")
        if res_sw.attrs.get("left_out"):
            st.caption(f"Not drawn: {fmt.words_list(f'{v:,.0f}' for v in res_sw.attrs['left_out'])} pixels a "
                       "side, which the scenario refuses for this encoder (its tokens would not fit the "
                       "sequence, or it does not take that size).")
        if len(sizes) <= 1 or res_sw.empty or res_sw.value.nunique() <= 1:
            st.caption("This encoder takes one resolution only; tiles per image add detail instead.")


# One tab at a time: a slider moved above redraws the open tab only, not the sweeps (two searches of
# every phase per point) and the tables of the others.
TABS = {"What each phase costs": phase_costs, "Preprocessing, storage and rights": media_costs,
        "How the cost moves with the media": media_sweeps}
common.lazy_tabs(TABS, "multimodal:tab")
for s in mm.phases(res):
    common.how_computed(res, s)
