"""Glossary: every term the planner uses, in words, with its formula and source."""
import streamlit as st

from costcore import glossary
from pages import common

res = common.frame(
    "Glossary",
    "The words on these pages, each with the formula it stands for and where that formula comes from. "
    "Every help icon (?) next to an input says what the input is; the terms below explain the ideas "
    "behind them.")
for t in glossary.terms():
    st.subheader(t["term"])
    st.markdown(common.md_escape(t["means"]))
    st.code(t["formula"], language=None, wrap_lines=True)  # long formulas ran past the page at 1280 px
    st.caption(f"Source: {common.md_escape(t['source'])}")
