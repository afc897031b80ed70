"""Full fine-tuning vs LoRA vs QLoRA on the same data."""
import altair as alt
import pandas as pd
import streamlit as st

import costcore
from costcore import fmt
from costcore.scenario import schema
from pages import common

res = common.frame(
    "Fine-tuning methods",
    "The same SFT data trained three ways. **Full** fine-tuning updates every weight (6N FLOPs per token, "
    "16-20 bytes of model state per parameter). **LoRA** freezes the base and trains low-rank adapters "
    "(about 4N FLOPs per token: no weight gradients for the base; 2 bytes per base parameter). **QLoRA** "
    "stores the base in 4-bit NF4 (about 0.52 bytes per parameter) and pays a dequantization overhead.")

scn = common.scenario()
if "sft" not in scn.get("stages", {}):
    st.info("SFT is off in this scenario: the comparison below uses SFT with default settings. "
            "Switch it on to plan it.")
    scn = schema.validate(dict(scn, stages=dict(scn.get("stages", {}), sft={})))
common.knob_columns([("stages.sft.samples", "Samples", 1000, 5_000_000, 1000, "log")],
                    [("stages.sft.lora_rank", "LoRA rank", 1, 256, 1)],
                    [("stages.sft.num_gpus", "GPUs for SFT (0 = sidebar value)", None, None, 1, "number")])
scn = common.scenario() if "sft" in common.scenario().get("stages", {}) else scn

METHOD_WORDS = common.CHOICE_WORDS["method"]
rows = []
for method in ("full", "lora", "qlora"):
    r = costcore.estimate(schema.set_path(scn, "stages.sft.method", method))
    rows.append({"method": METHOD_WORDS[method], "usd": r.stat("sft", "usd_total"),
                 "compute_usd": r.stage_usd("sft")["compute"] + r.stage_usd("sft")["hidden"],
                 "gpu_hours": r.stat("sft", "gpu_hours"), "wall_days": r.stat("sft", "wall_days"),
                 "checkpoint_gb": r.stat("sft", "ckpt_gb"), "memory_gb": r.stat("sft", "memory_per_gpu_gb"),
                 "fits": r.stat("sft", "fits") > 0.5, "min_gpus": int(r.stat("sft", "min_gpus")),
                 "trainable_b": r.stat("sft", "trainable_params_b")})
df = pd.DataFrame(rows)
current = schema.effective_value(scn, "stages.sft.method")
st.markdown(f"Current plan uses **{METHOD_WORDS.get(current, current)}**. GPUs: {int(res.stat('sft', 'num_gpus')) if 'sft' in res.stages else int(schema.effective_value(scn, 'hardware.num_gpus'))} × "
            f"{schema.CATALOG[schema.effective_value(scn, 'hardware.gpu')]['label']}.")
show = df.copy()
show["wall"] = show.wall_days.map(fmt.days)
show["checkpoint"] = show.checkpoint_gb.map(fmt.gb)
show["memory per GPU"] = show.memory_gb.map(lambda v: f"{v:,.1f} GB")
show["min GPUs"] = show.apply(lambda r: f"{r.min_gpus:,}" if r.min_gpus > 0 else "no fit", axis=1)
show["trainable params"] = show.trainable_b.map(lambda v: f"{v * 1e3:,.1f} M" if v < 1 else f"{v:,.2f} B")
show["usd"] = show.usd.map(fmt.usd)
show["compute_usd"] = show.compute_usd.map(fmt.usd)
show["gpu_hours"] = show.gpu_hours.map(fmt.gpu_hours)
show["fits"] = show.fits.map(lambda f: "yes" if f else "no")
show = show.rename(columns={"method": "Method", "usd": "SFT cost", "compute_usd": "GPU cost", "gpu_hours": "GPU-hours",
                            "wall": "Wall-clock time", "checkpoint": "Checkpoint", "memory per GPU": "Memory per GPU",
                            "fits": "Fits", "min GPUs": "Fewest GPUs that fit", "trainable params": "Trainable parameters"})
st.dataframe(show[["Method", "SFT cost", "GPU cost", "GPU-hours", "Wall-clock time", "Checkpoint", "Memory per GPU",
                   "Fits", "Fewest GPUs that fit", "Trainable parameters"]], hide_index=True, width="stretch")
for r in rows:
    if not r["fits"]:
        st.warning(f"{r['method']}: needs {r['memory_gb']:,.1f} GB per GPU and does not fit on this GPU count; "
                   + (f"at least {r['min_gpus']:,} GPUs would." if r["min_gpus"] > 0 else
                      "no GPU count fits with this sharding (try ZeRO-3 or more tensor parallelism)."))

def method_bars(col: str, title: str, log: bool = False):
    # a log axis has no zero: bars start from below the smallest value instead
    extra = {"y2": alt.datum(float(df[col][df[col] > 0].min()) / 4)} if log and (df[col] > 0).any() else {}
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("method:N", title="Method", sort=list(METHOD_WORDS.values()), axis=alt.Axis(labelAngle=0)),
        y=alt.Y(f"{col}:Q", title=title, scale=alt.Scale(type="log") if log else alt.Scale()),
        **extra,
        color=alt.Color("method:N", scale=alt.Scale(domain=list(METHOD_WORDS.values()),
                                                    range=["#4C78A8", "#54A24B", "#F58518"]), legend=None),
        tooltip=[alt.Tooltip("method:N", title="Method"), alt.Tooltip(f"{col}:Q", format=",.1f", title=title)],
    ).properties(width=230, height=240, title=title)


chart = alt.hconcat(method_bars("gpu_hours", "GPU-hours (billed)"), method_bars("memory_gb", "Memory per GPU (GB)"),
                    method_bars("checkpoint_gb", "Checkpoint size (GB, log scale)", log=True))
st.altair_chart(chart.properties(title="Full fine-tuning, LoRA and QLoRA side by side"))
