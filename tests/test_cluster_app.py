"""AppTest of pages/cluster.py: it renders the shipped quarter, its what-if knobs recompute and travel in
the URL, a link is validated on load, a bad what-if or upload is refused in one sentence, and every chart
says what it shows in words."""
from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from costcore import fmt
from costcore.cluster import portfolio, results

from shared import ROOT
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)

PAGE = str(ROOT / "pages" / "cluster.py")


def _page(**params) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=NEVER_S)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _metric(at, label):
    return next(m.value for m in at.metric if m.label == label)


@pytest.fixture(scope="module")
def quarter():
    return results.ClusterModel(portfolio.load("cluster-quarter"))


def _charts_say_what_they_show(at) -> list[str]:
    problems = []
    for c in at.get("vega_lite_chart"):
        spec = json.loads(c.proto.spec)
        title = spec.get("title")
        title = title.get("text") if isinstance(title, dict) else title
        if not title:
            problems.append("a chart without a title")

        def views(s):
            yield s
            for sub in s.get("layer", []) or []:
                yield from views(sub)
        for v in views(spec):
            for ch, enc in (v.get("encoding") or {}).items():
                if isinstance(enc, dict) and "field" in enc and ch in ("x", "y", "color", "strokeDash", "opacity"):
                    if not enc.get("title"):
                        problems.append(f"{title}: {ch} ({enc['field']}) has no title")
    return problems


def test_the_page_shows_the_quarter_as_the_core_computes_it(quarter):
    at = _page()
    res = quarter.run()
    assert at.title[0].value == "Shared cluster"
    assert _metric(at, "Total cost") == fmt.usd(res.total_usd)
    assert _metric(at, "Utilization") == fmt.share(res.utilization)
    assert _metric(at, "Deadlines missed") == str(res.summary["deadlines_missed"])
    missed, met = res.summary["deadlines_missed"], res.project_table
    risky = int((met["deadline_met"] & met["at_risk"]).sum())
    assert [w.value for w in at.warning if "deadline" in w.value or "at risk" in w.value] == [
        f"{missed} project misses its deadline; {risky} project is at risk (under 3 days of slack)."]
    assert len(at.get("vega_lite_chart")) >= 4
    assert not _charts_say_what_they_show(at)
    assert at.query_params["c.p"] in ("cluster-quarter", ["cluster-quarter"])


def test_a_what_if_recomputes_and_goes_into_the_link(quarter):
    at = _page()
    burst = next(t for t in at.toggle if t.label.startswith("Burst"))
    burst.set_value(False)
    at.run()
    assert not at.exception
    assert at.query_params["c.burst"] in ("off", ["off"])
    assert _metric(at, "Total cost") == fmt.usd(quarter.run(burst=False).total_usd)


def test_a_link_rebuilds_the_what_if_and_bad_parameters_are_named(quarter):
    at = _page(**{"c.p": "cluster-quarter", "c.pool.h100": "640", "c.prio.research-lora-b": "99",
                  "c.quota.nobody.h100": "8", "c.pool.a100": "many"})
    want = quarter.run(pool_gpus={"h100": 640}, project_priority={"research-lora-b": 99})
    assert _metric(at, "Total cost") == fmt.usd(want.total_usd)
    text = " ".join(w.value for w in at.warning)
    assert "2 link parameters were ignored" in text and "c.quota.nobody.h100" in text and "c.pool.a100" in text
    assert any(n.value == 640 for n in at.number_input)


def test_a_what_if_that_cannot_run_is_refused_in_one_sentence():
    at = _page()
    before = _metric(at, "Total cost")
    pool = next(n for n in at.number_input if n.label.startswith("h100 pool"))
    old = pool.value
    pool.set_value(100)  # below the teams' quotas on it
    at.run()
    assert not at.exception
    said = [w.value for w in at.warning if "cannot run" in w.value]
    assert len(said) == 1 and "quota" in said[0] and "\n" not in said[0], said
    assert "teams." not in said[0] and "team's quota:" in said[0], said  # in words, not the file's key
    assert _metric(at, "Total cost") == before
    # the refused value does not stay in its box (it did, and every later change failed with it)
    assert next(n for n in at.number_input if n.label.startswith("h100 pool")).value == old
    burst = next(t for t in at.toggle if t.label == "Burst for deadlines")
    burst.set_value(not burst.value)
    at.run()
    assert not at.exception and not [w.value for w in at.warning if "cannot run" in w.value]
    assert _metric(at, "Total cost") != before  # the next change runs


def test_an_out_of_range_number_is_refused_in_words_and_leaves_its_box():
    """A pool of 0 GPUs and a quota of 99,999,999: the browser's own range check showed a red box alone, kept the
    number in it beside results of the old value, and left an older message standing. The portfolio now refuses
    each in a sentence with the range and the value, and the box shows the kept value again."""
    at = _page()
    before = _metric(at, "Total cost")
    for label, bad, words in (("h100 pool", 0, "from 1 to 1,000,000 GPUs (got 0)"),
                              ("Its quota", 99_999_999, "from 0 to 1,000,000 GPUs (got 99,999,999)")):
        box = next(n for n in at.number_input if n.label.startswith(label))
        old = box.value
        box.set_value(bad)
        at.run()
        assert not at.exception
        said = [w.value for w in at.warning if "cannot run" in w.value]
        assert len(said) == 1 and words in said[0], said
        assert next(n for n in at.number_input if n.label.startswith(label)).value == old
        assert _metric(at, "Total cost") == before


def test_the_deadline_table_says_how_many_gpus_the_team_can_hold():
    """A pool of 1,000,000 GPUs left the missed deadline missed and the burst unchanged, with nothing said: its team
    holds at most its quota plus its borrowing limit there. The deadline table says so, per project."""
    from costcore.cluster import portfolio, rules
    at = _page()
    table = next(d.value for d in at.dataframe if "ceiling" in d.value.columns)
    pf = portfolio.load(at.session_state["cluster_name"])
    for p, t, shown in zip(table["project"], table["team"], table["ceiling"]):
        pool = pf.projects[p].pool
        assert shown == f"{rules.team_ceiling_gpus(pf, t, pool):,} of {pf.pools[pool].gpus:,}"
    team = pf.teams["pretraining"]
    assert rules.team_ceiling_gpus(pf, "pretraining", "h100") == min(pf.pools["h100"].gpus,
                                                                     team.quota_gpus["h100"] + team.borrowing_limit_gpus["h100"])
    assert rules.team_ceiling_gpus(pf, "code", "h100") == pf.pools["h100"].gpus  # no limit: the whole pool


def test_the_current_plan_is_budgeted_on_the_cluster_beside_the_others():
    """A plan could only be budgeted alone: the Shared cluster page adds the scenario of the other pages to the
    shipped portfolio as one project, for the team with the most quota on its GPU's pool; the cluster's total and
    jobs follow. A plan the cluster cannot hold is refused in words and the portfolio shown stays."""
    from costcore.cluster import portfolio, results
    from shared import app_on
    at = app_on("pages/cluster.py", p="llava-1.5-7b")
    before = next(m.value for m in at.metric if m.label == "Total cost")
    team = at.selectbox(key="cluster_plan_team").value
    assert team in ("code", "search")  # 32 A100s each, the most
    at.button(key="cluster_add_plan").click().run()
    assert not at.exception
    raw = portfolio.with_plan(portfolio.raw_of("cluster-quarter"), at.session_state["scenario"], team)
    want = results.ClusterModel(portfolio.load(raw)).run()
    after = next(m.value for m in at.metric if m.label == "Total cost")
    assert after == fmt.usd(want.total_usd) != before
    assert "45 projects" in " ".join(c.value for c in at.caption)
    big = app_on("pages/cluster.py", p="llama3-8b")
    big.button(key="cluster_add_plan").click().run()
    said = " ".join(w.value for w in big.warning)
    assert "The plan was not added" in said and "can never fit" in said, said
    assert "44 projects" in " ".join(c.value for c in big.caption)
