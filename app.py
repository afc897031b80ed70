"""LLM training cost planner: Streamlit entry point (navigation only).

Run: streamlit run app.py
"""
import streamlit as st

try:  # pages/ holds st.navigation pages, not Streamlit's legacy auto-discovered pages
    from streamlit.runtime.pages_manager import PagesManager

    # Without this, a deep link (/checkpoints) is first routed by the legacy
    # pages/ router, which shows "Page not found" before st.navigation below
    # finds the page. Page files are named *_page.py so that the very first
    # request of a fresh server (routed before this line ever ran) cannot
    # collide with a legacy page of the same name either.
    PagesManager.uses_pages_directory = False
except Exception:  # noqa: BLE001 - private API; navigation still works without it
    pass

st.set_page_config(page_title="LLM training cost planner", page_icon="💸", layout="wide")

PAGES = {
    "Plan": [
        st.Page("pages/overview_page.py", title="Overview", icon=":material/dashboard:", default=True, url_path="overview"),
        st.Page("pages/pretraining_page.py", title="Pre-training and CPT", icon=":material/foundation:", url_path="pretraining"),
        st.Page("pages/post_training_page.py", title="Post-training", icon=":material/tune:", url_path="post-training"),
        st.Page("pages/finetune_methods_page.py", title="Fine-tuning methods", icon=":material/compare:", url_path="fine-tuning"),
        st.Page("pages/checkpoints_page.py", title="Checkpoints and reliability", icon=":material/save:", url_path="checkpoints"),
        st.Page("pages/data_people_page.py", title="Data, evaluation and people", icon=":material/groups:", url_path="data-people"),
    ],
}

st.navigation(PAGES).run()
