"""LLM training cost planner: Streamlit entry point (navigation only).

Run: streamlit run app.py
"""
import streamlit as st

st.set_page_config(page_title="LLM training cost planner", page_icon="💸", layout="wide")

PAGES = {
    "Plan": [
        # Streamlit serves the default page at the root whatever its url_path, so /overview (a link
        # people type or keep from a bookmark) is a hidden second entry for the same script.
        st.Page("pages/overview.py", title="Overview", icon=":material/dashboard:", default=True, url_path=""),
        st.Page("pages/overview.py", title="Overview", icon=":material/dashboard:", url_path="overview",
                visibility="hidden"),
        st.Page("pages/pretraining.py", title="Pre-training and CPT", icon=":material/foundation:", url_path="pretraining"),
        st.Page("pages/job-layout.py", title="Job layout", icon=":material/view_module:", url_path="job-layout"),
        st.Page("pages/post-training.py", title="Post-training", icon=":material/tune:", url_path="post-training"),
        st.Page("pages/fine-tuning.py", title="Fine-tuning workbench", icon=":material/compare:", url_path="fine-tuning"),
        st.Page("pages/multimodal.py", title="Multimodal", icon=":material/image:", url_path="multimodal"),
        st.Page("pages/checkpoints.py", title="Checkpoints and reliability", icon=":material/save:", url_path="checkpoints"),
        st.Page("pages/data-people.py", title="Data, evaluation and people", icon=":material/groups:", url_path="data-people"),
    ],
    "Govern": [
        st.Page("pages/budget.py", title="Budget and timeline", icon=":material/account_balance:", url_path="budget"),
        st.Page("pages/compare.py", title="Compare and optimize", icon=":material/compare_arrows:", url_path="compare"),
        st.Page("pages/review.py", title="Review: plan vs actual", icon=":material/receipt_long:", url_path="review"),
        st.Page("pages/cluster.py", title="Shared cluster", icon=":material/hub:", url_path="cluster"),
    ],
    "Analyse": [
        st.Page("pages/sensitivity.py", title="Sensitivity and uncertainty", icon=":material/insights:",
                url_path="sensitivity"),
        st.Page("pages/validation.py", title="Validation", icon=":material/verified:", url_path="validation"),
        st.Page("pages/glossary.py", title="Glossary", icon=":material/menu_book:", url_path="glossary"),
    ],
}

page = st.navigation(PAGES)
st.session_state["_page_url_path"] = page.url_path  # the share link points at the page being read
page.run()
