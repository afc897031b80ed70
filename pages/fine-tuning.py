"""Fine-tuning workbench: pick a model and a GPU, set the optimizer and memory techniques, compare methods."""
import altair as alt
import pandas as pd
import streamlit as st

from costcore import fmt
from costcore.analysis import finetune
from costcore.errors import ScenarioError
from costcore.scenario import hfconfig, schema
from pages import common

res = common.frame(
    "Fine-tuning workbench",
    "Pick a model and a GPU, choose the optimizer and the memory techniques, and see full fine-tuning, "
    "LoRA and QLoRA (and any other method you add) side by side on the same data: throughput, time per "
    "epoch, GPU-hours, compute dollars apart from data and people, and memory per GPU by kind against "
    "the GPU's usable memory. Every figure comes from the job-layout model of the SFT stage (the Job "
    "layout page shows its plan; the Glossary explains the terms).")

ss = common.state()
if "sft" not in ss.scenario.get("stages", {}):  # visiting a page never changes the plan: the user adds the stage
    st.info("This scenario has no supervised fine-tuning stage, and the workbench compares the methods of that "
            "stage. Add one to the plan to use it (its cost then counts in every total), or load a fine-tuning "
            "preset in the sidebar.")
    st.button("Add supervised fine-tuning to the plan (default settings)", key="ft:add_sft",
              on_click=common.set_stage, args=("sft", True))
    st.stop()
scn = common.scenario()
MODELS = hfconfig.shipped_configs()

st.subheader("Model and GPU")
left, right = st.columns(2)
with left:
    current = (scn.get("model") or {}).get("name", "")
    options = [""] + list(MODELS)
    key = f"ft:model:{ss.rev}"

    def picked():
        common.apply_scenario(schema.pick_model(ss.scenario, st.session_state[key]))

    # no shipped model: the shape a preset or a config.json stated, or one derived from the size alone
    stated = any((scn.get("model") or {}).get(k) for k in ("layers", "hidden", "ffn"))
    unnamed = "Its stated shape (from the preset or a config.json)" if stated else "Any size (shape from the size)"
    st.selectbox("Model", options, index=options.index(current) if current in options else 0, key=key,
                 on_change=picked, format_func=lambda n: MODELS[n]["label"] if n else unnamed,
                 help="A shipped open model sets its exact shape from its config.json (python -m costcore models "
                      "lists them). 'Any size' derives a Llama-style shape from the size slider in the sidebar.")
    with st.expander("Upload or paste a config.json",  # stays open while it holds text: a refusal closed it
                     expanded=bool(st.session_state.get(f"ft:cfgtext:{ss.rev}"))):
        st.file_uploader("config.json", type=["json"], key=f"ft:cfgfile:{ss.rev}",
                         max_upload_size=common.SMALL_UPLOAD_MB)
        st.text_area("or paste its text", key=f"ft:cfgtext:{ss.rev}", height=100)
        def use_config(file_key=f"ft:cfgfile:{ss.rev}", text_key=f"ft:cfgtext:{ss.rev}"):
            up = st.session_state.get(file_key)
            source = up.getvalue() if up is not None else st.session_state.get(text_key) or ""
            if not source.strip():  # the JSON parser's "Expecting value (line 1, column 1)" said it less plainly
                ss.messages.append(f"{fmt.one_line(up.name or 'The file', 80)} is empty: choose a config.json with "
                                   "its model's settings." if up is not None else
                                   "Choose a config.json file or paste its text first.")
                return
            try:
                shape = hfconfig.parse_hf_config(source)
            except ScenarioError as err:  # the setting in words: "config.json: is not valid JSON: ..."
                ss.messages.append(schema.error_in_words(err, {"model.hf_config": "config.json"}))
                return
            common.apply_scenario(schema.use_shape(ss.scenario, shape))

        st.button("Use this config", key=f"ft:cfguse:{ss.rev}", on_click=use_config)
    v = schema.effective_value
    st.caption(f"Shape: {res.stat('sft', 'model_layers'):,.0f} layers, hidden {res.stat('sft', 'model_hidden'):,.0f}, "
               + (f"{v(scn, 'model.heads')} heads, " if v(scn, "model.heads") else "heads of width 128, ")
               + (f"{v(scn, 'model.kv_heads')} key/value heads, " if v(scn, "model.kv_heads") else
                  "a key/value head per head, ") +
               f"vocabulary {v(scn, 'model.vocab') / 1000:.1f}k tokens; {fmt.num(v(scn, 'model.params_b'))}B parameters"
               + (f", {v(scn, 'model.experts')} routed experts" if v(scn, "model.experts") else "")
               + (f"; {fmt.share(float(v(scn, 'model.sliding_window_share')))} of the layers attend in a "
                  f"{int(v(scn, 'model.sliding_window')):,}-token sliding window" if v(scn, "model.sliding_window") else "")
               + ".")
with right:
    st.markdown(f"**GPU:** {common.md_escape(common.gpu_label(common.scenario()))}, "
                f"{fmt.gb(res.stat('sft', 'usable_memory_gb'))} usable. Choose it in the sidebar; "
                "*Custom GPU* there opens its figures here.")
    if schema.effective_value(common.scenario(), "hardware.gpu") == "custom":
        common.knob_columns(
            [("hardware.gpu_name", "Name", None, None, None, "number"),
             ("hardware.peak_tflops", "Peak BF16 TFLOP/s", None, None, 1.0, "number"),
             ("hardware.fp8_peak_tflops", "Peak FP8 TFLOP/s", None, None, 1.0, "number"),
             ("hardware.memory_gb", "Memory (GB)", None, None, 1.0, "number")],
            [("hardware.mem_bandwidth_tbs", "Memory bandwidth (TB/s)", None, None, 0.1, "number"),
             ("hardware.gpus_per_node", "GPUs per NVLink domain", None, None, 1.0, "number"),
             ("hardware.inter_node_gbs", "Network per GPU (GB/s)", None, None, 1.0, "number")])
        st.caption("Its price per GPU-hour is the sidebar's.")  # one widget per setting: a second one crashed the page
    common.knob("stages.sft.num_gpus", "GPUs for fine-tuning (0 = the sidebar's count)", None, None, 1, "number")

st.subheader("Optimizer and memory techniques")
common.knob_columns(
    # the ZeRO stage beside the offload that needs it (ZeRO-2 or 3): the refusal sent the user to the Job layout page
    [("stages.sft.optimizer", "Optimizer"), ("stages.sft.offload", "CPU offload (ZeRO-Offload)"),
     ("stages.sft.zero_stage", "ZeRO stage", None, None, None, "slider", None, None, [-1, 0, 1, 2, 3]),
     ("efficiency.logit_bytes", "Bytes per logit held for the loss (4 fused, about 11 Hugging Face)", 2, 32, 1,
      "number")],
    # QLoRA's base is 4-bit whatever base_bits says, and a full fine-tune trains 16-bit weights (the scenario refuses
    # a lower base there): the choice is offered when the plan's own fine-tuning is LoRA
    ([("stages.sft.base_bits", "Frozen base weights (LoRA)", None, None, None, "slider", None, None, [16, 8, 4])]
     if schema.effective_value(common.scenario(), "stages.sft.method") == "lora" else [])
    + [("stages.sft.lora_rank", "LoRA rank", 1, 256, 1, "pow2")],
    [("stages.sft.global_batch", "Global batch (sequences per step)", None, None, 1, "number"),
     ("stages.sft.grad_accum", "Gradient accumulation (0 = from the global batch)", 0, 256, 1),
     ("stages.sft.recompute", "Activation recompute (full = gradient checkpointing)")],
    [("stages.sft.samples", "Samples", 1000, 5_000_000, 1000, "log"),
     ("stages.sft.loader_tokens_per_s_per_node", "Data loader speed (tokens/s per node, 0 = not a limit)",
      0, 10_000_000, 1000, "log")])

if schema.effective_value(common.scenario(), "stages.sft.grad_accum") > 0:  # the box above no longer sets the batch
    _res = common.result()
    if "sft" in _res.stages:
        _plan = _res.plan("sft")
        st.caption(f"With gradient accumulation set, a step takes {_res.stat('sft', 'micro_batches'):,.0f} accumulation steps "
                   f"x DP {_plan['dp']} x micro-batch {_plan['micro_batch']} = "
                   f"{_res.stat('sft', 'global_batch'):,.0f} sequences; the global batch box is not used.")

st.subheader("Methods side by side")
names = list(finetune.methods())
words = {k: v["label"] for k, v in finetune.methods().items()}
seeded = common.view_seed("methods", names, multi=True)  # a link's methods, if it names ones the workbench has
chosen = st.multiselect("Methods", names, format_func=words.get, key="ft:methods",
                        **({} if seeded else {"default": list(finetune.DEFAULT_METHODS)})) \
    or list(finetune.DEFAULT_METHODS)
if schema.effective_value(common.scenario(), "stages.sft.method") != "lora":
    st.caption("The LoRA rows train on a 16-bit base; add the method 'LoRA on an 8-bit base' to compare one, or set "
               "the plan's fine-tuning method to LoRA (Post-training page) to choose its base's bits above.")
# level labels fit three methods; more were thinned out by the chart (every other method unnamed): slanted then
METHOD_AXIS = alt.Axis(labelAngle=0 if len(chosen) <= 3 else -30, labelLimit=200, labelOverlap=False)
LABELS_PX = 0 if len(chosen) <= 3 else 110  # the height slanted labels take, added so the plots keep theirs
show_people = st.toggle("Show data and people costs", value=False, key="ft:people",
                        help="Off: only what the GPUs cost (productive and hidden time) is compared.")
rows = pd.DataFrame(finetune.compare_methods(common.scenario(), chosen))
NO_FIT = "–"  # a method that does not fit its GPUs has no speed, time or GPU bill (it showed 1,920 tokens/s, $16.1)


def _if_fits(col, show):
    return [show(v) if f else NO_FIT for v, f in zip(rows[col], rows.fits)]


table = pd.DataFrame({
    "Method": rows.label,
    # second, not last: the "As pinned" column pushed a last "Trainable" past a 1280-pixel window
    "Trainable": rows.trainable_params_b.map(lambda b: f"{fmt.sig3(b)}B" if b >= 1 else f"{fmt.sig3(b * 1e3)}M"),
    "Tokens/s/GPU": _if_fits("tokens_per_s_per_gpu", fmt.num),
    "Epoch": _if_fits("epoch_hours", lambda h: fmt.duration_s(h * 3600.0)),
    "GPU-hours": _if_fits("gpu_hours", fmt.gpu_hours),
    "GPU cost": _if_fits("compute_usd", fmt.usd),
    "Memory/GPU": rows.memory_per_gpu_gb.map(fmt.gb),
    "Fits": rows.fits.map(lambda f: "yes" if f else "no"),
    "Fewest GPUs": rows.min_gpus_any_layout.map(lambda g: f"{g:,}" if g > 0 else "none"),
})
money = None
if show_people:  # a table of its own: three more columns pushed the first one's past the page's edge
    money = pd.DataFrame({"Method": rows.label, "GPU cost": table.pop("GPU cost"),
                          "Data cost": rows.data_usd.map(fmt.usd), "People and platform": rows.people_usd.map(fmt.usd),
                          "Total": _if_fits("usd_total", fmt.usd)})
# the fewest GPUs over every layout (a 70B QLoRA: 1), and, when the stage pins part of its layout (the 70B
# preset pins TP 8), the fewest on that layout too, side by side and said in words
said = schema.pinned_layout_words(common.scenario(), "sft") if (rows.min_gpus != rows.min_gpus_any_layout).any() \
    else []
if said:
    table.insert(table.columns.get_loc("Fewest GPUs") + 1, "As pinned",
                 rows.min_gpus.map(lambda g: f"{g:,}" if g > 0 else "none"))
# short headers with their words in the column helps: at 1280 px the last column ("Trainable") was cut
# the short columns narrow: with "As pinned" the last column was cut at 1280 px
st.dataframe(table, hide_index=True, width="stretch", column_config={
    "Fewest GPUs": st.column_config.Column(help="the fewest GPUs that fit, over every parallel layout the planner "
                                                "can search (TP, PP, DP, micro-batch), with the stage's ZeRO stage and "
                                                "techniques as set"),
    "Tokens/s/GPU": st.column_config.Column(help="tokens trained per second per GPU; – where the method does not fit"),
    "As pinned": st.column_config.Column(help="the fewest GPUs with the stage's pinned layout", width="small"),
    "Trainable": st.column_config.Column(help="trainable parameters", width="small"),
    "Epoch": st.column_config.Column(help="wall-clock time of one pass over the samples"),
    "Memory/GPU": st.column_config.Column(help="peak memory per GPU of the method's fastest layout that fits"),
    "Fits": st.column_config.Column(width="small")})
if said:
    st.caption("Fewest GPUs: that fit, over every layout the planner can search. As pinned: the fewest with the "
               "fine-tuning stage's pinned " + ", ".join(said) + " (choose Searched on the Job layout page to "
               "unpin it).")
if not schema.uses_default_mfu(common.scenario(), "sft"):  # tokens/s then follow the pin, whatever the techniques
    st.caption("Fine-tuning's speed is set by hand in this scenario (an MFU or a throughput in its settings): "
               "tokens/s, time per epoch and GPU-hours follow it, so the optimizer, offload and base precision change "
               "memory here, not speed. Set it to 0 (from the job layout) on the Post-training page to time them.")
if money is not None:
    st.dataframe(money, hide_index=True, width="stretch")

mem = rows.melt(id_vars=["label"], value_vars=[f"memory_{k}_gb" for k in finetune.MEMORY_KINDS],
                var_name="kind", value_name="gb")
mem["kind"] = mem.kind.map(lambda c: finetune.MEMORY_WORDS[c[len("memory_"):-len("_gb")]])
order = [finetune.MEMORY_WORDS[k] for k in finetune.MEMORY_KINDS]
cap = float(rows.usable_memory_gb.iloc[0])
# a method far over the GPU (a 70B full fine-tune's 1.42 TB on an 80 GB GPU) squashed the capacity line and the
# methods that fit to slivers: the axis stops at three times the usable memory and such a bar is cut there, its
# total written on it
top = 3.0 * cap
cut = rows[rows.memory_per_gpu_gb > top]
MEM_TITLE = "Memory per GPU (GB)" + (", axis cut" if len(cut) else "")
MEM_SCALE = alt.Scale(domain=[0, top], clamp=True, nice=False) if len(cut) else alt.Undefined  # every layer's
bars = alt.Chart(mem).mark_bar(clip=True).encode(
    x=alt.X("label:N", title="Method", sort=list(rows.label), axis=METHOD_AXIS),
    y=alt.Y("gb:Q", title=MEM_TITLE, stack="zero", scale=MEM_SCALE),
    color=alt.Color("kind:N", title="Memory", sort=order, scale=alt.Scale(domain=order, range=common.MEMORY_COLORS)),
    order=alt.Order("kind_order:Q"),
    tooltip=[alt.Tooltip("label:N", title="Method"), alt.Tooltip("kind:N", title="Memory"),
             alt.Tooltip("gb:Q", title="GB", format=",.2f")],
).transform_calculate(kind_order=f"indexof({order!r}, datum.kind)")
line = alt.Chart(pd.DataFrame({"gb": [cap], "what": [f"Usable memory {fmt.gb(cap)}"]})).mark_rule(
    color="#d62728", strokeDash=[6, 3], size=2).encode(y=alt.Y("gb:Q", title=MEM_TITLE, scale=MEM_SCALE),
                                                       tooltip=[alt.Tooltip("what:N", title="Line")])
layers = [bars, line]
if len(cut):
    layers.append(alt.Chart(pd.DataFrame({"label": cut.label, "gb": [top] * len(cut),
                                          "text": [f"{fmt.gb(v)} ↑" for v in cut.memory_per_gpu_gb]}))
                  .mark_text(dy=-8, fontWeight="bold", color="#333333")
                  .encode(x=alt.X("label:N", sort=list(rows.label)), y=alt.Y("gb:Q", title=MEM_TITLE, scale=MEM_SCALE),
                          text=alt.Text("text:N")))
common.show_chart(common.layer(*layers),
                  f"Memory per GPU by kind against the usable {fmt.gb(cap)} (red line)", height=320 + LABELS_PX)
# a lighter method can show more memory per GPU than a heavier one: each runs the fastest layout that fits, and
# spare memory goes to larger micro-batches or to fewer shards; its layout says which (Fewest GPUs shows the rest)
st.caption("Each method runs the fastest layout that fits on "
           f"{fmt.gpus(rows.num_gpus.iloc[0])}, which may spend spare memory on larger micro-batches or shard less: "
           + "; ".join(f"{common.md_escape(r.label)}: {r.layout}" for r in rows.itertuples())
           + ". The fewest GPUs that fit show what each method's smaller footprint saves.")
# one colour: the method is on the axis, and the memory chart above gives blue, light blue and red to weights,
# gradients and optimizer states, which per-method colours here repeated with another meaning
speed = alt.Chart(rows[rows.fits]).mark_bar(color="#4C78A8").encode(
    x=alt.X("label:N", title="Method", sort=list(rows.label), axis=METHOD_AXIS),
    y=alt.Y("tokens_per_s_per_gpu:Q", title="Tokens/s per GPU"),  # a longer upright title pushed the chart's out
    tooltip=[alt.Tooltip("label:N", title="Method"),
             alt.Tooltip("tokens_per_s_per_gpu:Q", title="Tokens/s per GPU", format=",.0f")],
)
if rows.fits.any():
    common.show_chart(speed, "Training speed: tokens per second per GPU" + ("" if rows.fits.all() else
                      " (the methods that fit)"), height=240 + LABELS_PX)
else:
    st.info("No method fits these GPUs, so none has a training speed: the warnings below say how many GPUs each needs.")

for r in rows.itertuples():
    if not r.fits:
        st.warning(f"{r.label}: needs {fmt.gb(r.memory_per_gpu_gb)} per GPU, more than the usable "
                   f"{fmt.gb(r.usable_memory_gb)} on {fmt.gpus(r.num_gpus)}; "
                   + ((f"at least {fmt.gpus(r.min_gpus)} would fit with the layout as pinned, "
                       f"{r.min_gpus_any_layout:,} with any layout." if r.min_gpus_any_layout != r.min_gpus
                       else f"at least {fmt.gpus(r.min_gpus)} would fit.")
                      if r.min_gpus > 0 else "no GPU count fits with this sharding."))
    if r.optimizer_paged_out_gb > 0:
        st.info(f"{r.label}: {fmt.gb(r.optimizer_paged_out_gb)} of paged optimizer states live in CPU memory "
                "and cross PCIe every step.")
st.markdown("**What each method costs in quality**")
for r in rows.itertuples():
    st.markdown(f"- **{r.label}**: {r.caveat} *Source: {r.source}.*")
