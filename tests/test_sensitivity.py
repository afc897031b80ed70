"""Sensitivity, uncertainty and the budget solver, checked against direct estimates."""
from __future__ import annotations

import numpy as np
import pytest

import costcore
from costcore.scenario import schema
from costcore.analysis import sensitivity as S
from costcore.engine import sampling
from costcore.scenario.schema import ScenarioError

SCN = "pipeline-70b"


def _total_with(scn, path, value):
    return costcore.estimate(schema.set_path(scn, path, value)).total_usd


SHAPE = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "experts", "experts_active", "shared_experts",
         "moe_ffn")


def _model_moved(scn, path, value):
    """The tornado's meaning of a size or shape move, built the slow way: a shape key moves with the
    parameter counts scaled by the shape's own count; the size moves the depth of the stated shape
    (``value`` is then the count the moved depth holds, as the tornado shows it)."""
    from costcore.scenario.hfconfig import shape_params
    model = {k: v for k, v in scn["model"].items() if k not in ("name", "hf_config")}
    shape = {k: int(schema.effective_value(scn, f"model.{k}")) for k in SHAPE + ("gated",)}
    total, active = float(model["params_b"]), float(model.get("active_params_b") or 0.0)
    key = path.split(".", 1)[1]
    moved = {"layers": round(shape["layers"] * value / total)} if key == "params_b" else {key: int(value)}
    (t0, a0), (t1, a1) = shape_params(shape), shape_params({**shape, **moved})
    model.update(moved, params_b=round(total * t1 / t0, 4))
    if active:
        model["active_params_b"] = round(min(active * a1 / a0, model["params_b"]), 4)
    return costcore.estimate(dict(scn, model=model)).total_usd


def _tornado_end(scn, path, value):
    moves_model = path == "model.params_b" or path.split(".", 1)[1] in SHAPE
    if path.startswith("model.") and moves_model and scn["model"].get("layers"):
        return _model_moved(scn, path, value)
    return _total_with(scn, path, value)


def test_tornado_agrees_with_finite_differences():
    scn = costcore.load_preset(SCN)
    tor = S.tornado(scn, rel=0.1)
    t = tor.table
    assert tor.base_total == pytest.approx(costcore.estimate(scn).total_usd, rel=1e-12)
    # every row equals two direct estimates (explicit values only: "auto" rows move the resolved value)
    res = costcore.estimate(scn)
    checked = 0
    for row in t.itertuples():
        if schema.get_path(scn, row.input) is None and row.input.split(".")[-1] in ("mfu", "ckpt_interval_h"):
            continue
        lo = _tornado_end(scn, row.input, schema.BY_PATH[row.input].decode(row.low))
        hi = _tornado_end(scn, row.input, schema.BY_PATH[row.input].decode(row.high))
        assert row.total_low == pytest.approx(lo, rel=1e-9), row.input
        assert row.total_high == pytest.approx(hi, rel=1e-9), row.input
        checked += 1
        if checked >= 40:
            break
    assert checked >= 20
    # order: sorted by |swing|, and the finite-difference ranking of the top inputs agrees
    assert list(t.abs_swing) == sorted(t.abs_swing, reverse=True)
    # central finite differences (±1%) from plain estimates, scaled to the ±10% range, rank the
    # top inputs the same way wherever their swings are not near-ties
    fd = []
    for row in t.head(10).itertuples():
        f = schema.BY_PATH[row.input]
        if f.kind == "int" or schema.effective_value(scn, row.input) in (0, 0.0):
            continue
        lo, hi = max(f.lo, row.value * 0.99), min(f.hi, row.value * 1.01)
        # the same move as the tornado's: a size or shape input resizes the whole model (_tornado_end)
        slope = (_tornado_end(scn, row.input, hi) - _tornado_end(scn, row.input, lo)) / (hi - lo)
        fd.append((row.input, abs(slope) * (row.high - row.low), row.abs_swing))
    assert len(fd) >= 4
    for (n1, fd1, sw1), (n2, fd2, sw2) in zip(fd, fd[1:]):
        if sw1 > 1.15 * sw2:
            assert fd1 > fd2, (n1, fd1, n2, fd2)
    assert res.total_usd > 0


def test_tornado_auto_mfu_moves_around_resolved_value():
    tor = S.tornado(SCN, inputs=["stages.pretrain.mfu"], rel=0.2)
    row = tor.table.iloc[0]
    resolved = costcore.estimate(SCN).stat("pretrain", "mfu")
    assert row.value == pytest.approx(resolved)
    assert row.total_low > tor.base_total > row.total_high  # higher MFU is cheaper


def test_sweep_matches_estimates_and_is_monotone_in_tokens():
    xs = [1000, 5000, 15000]
    sw = S.sweep(SCN, "stages.pretrain.tokens_b", xs)
    for x in xs:
        got = sw[sw.value == x].usd.sum()
        assert got == pytest.approx(_total_with(costcore.load_preset(SCN), "stages.pretrain.tokens_b", x), rel=1e-9)
    pre = sw[sw.stage == "pretrain"].usd.to_numpy()
    assert np.all(np.diff(pre) > 0)


def test_heatmap_cells_match_estimates():
    xs = np.array([7.0, 70.0, 200.0])
    ys = np.array([1000.0, 10000.0])
    grid = S.heatmap(SCN, "model.params_b", xs, "stages.pretrain.tokens_b", ys)
    assert grid.shape == (2, 3)
    scn = costcore.load_preset(SCN)
    for j, y in enumerate(ys):
        for i, x in enumerate(xs):
            s2 = schema.set_path(_sized(scn, x), "stages.pretrain.tokens_b", y)
            assert grid[j, i] == pytest.approx(costcore.estimate(s2).total_usd, rel=1e-9)


def _sized(scn, params_b):
    """The preset's 80 x 8,192 Llama-70B shape at another size, by depth (schema.layers_for_size)."""
    model = dict(scn["model"], params_b=params_b, layers=max(1, round(80 * params_b / 70.6)))
    assert scn["model"]["layers"] == 80 and scn["model"]["params_b"] == 70.6
    return dict(scn, model=model)


def test_a_size_column_moves_the_stated_shape_with_it():
    """With the 80-layer shape held, a 7B pre-trained on 10T tokens took 93% of the 70B's GPU-hours (the
    step time is counted from the shape); by depth it takes 14% (8 layers on 8,192 GPUs run below the
    70B's rate), and the current size is the current scenario exactly."""
    from costcore.engine import kernel
    scn = costcore.load_preset(SCN)
    cols = {"model.params_b": [7.06, 70.6], "stages.pretrain.tokens_b": [10_000.0, 10_000.0]}
    gpu_h = costcore.batch(scn, cols, full=True)[:, 0, len(schema.RESOURCES) + kernel.BATCH_EXTRA.index("gpu_hours")]
    assert gpu_h[0] < 0.2 * gpu_h[1], "pre-training GPU-hours must follow the model's size"
    out = costcore.batch(scn, cols)
    same = schema.set_path(scn, "stages.pretrain.tokens_b", 10_000.0)
    assert out[1].sum() == pytest.approx(costcore.estimate(same).total_usd, rel=1e-12)
    held = costcore.batch(scn, {"model.params_b": [7.06, 7.06], "model.layers": [80, 8],
                                "stages.pretrain.tokens_b": [10_000.0, 10_000.0]}, full=True)
    held_h = held[:, 0, len(schema.RESOURCES) + kernel.BATCH_EXTRA.index("gpu_hours")]
    # a layers column given with the size is kept as given: 80 layers cost the 93% above, 8 the derived depth's
    assert held_h[0] > 0.8 * gpu_h[1] and held_h[1] == pytest.approx(gpu_h[0], rel=1e-9)


def test_monte_carlo_is_reproducible_and_collapses_without_spread():
    a = S.monte_carlo(SCN, n=20_000, seed=7, budget_usd=3e7)
    b = S.monte_carlo(SCN, n=20_000, seed=7, budget_usd=3e7)
    c = S.monte_carlo(SCN, n=20_000, seed=8, budget_usd=3e7)
    assert np.array_equal(a.totals, b.totals)
    assert not np.array_equal(a.totals, c.totals)
    assert a.percentiles.loc["total", "P10"] <= a.percentiles.loc["total", "P50"] <= a.percentiles.loc["total", "P90"]
    assert 0.0 <= a.p_over_budget <= 1.0
    assert a.p_over_budget == pytest.approx(float((a.totals > 3e7).mean()))
    zero = {k: S.Dist("triangular", 1.0, 1.0, 1.0) for k in S.default_distributions(SCN)}
    z = S.monte_carlo(SCN, n=2_000, seed=1, dists=zero)
    det = costcore.estimate(SCN).total_usd
    assert z.percentiles.loc["total", "P50"] == pytest.approx(det, rel=1e-12)
    assert z.totals.std() == pytest.approx(0.0, abs=det * 1e-12)


def test_monte_carlo_p50_converges_as_spread_shrinks():
    det = costcore.estimate(SCN).total_usd
    gaps = []
    for spread in (0.2, 0.05, 0.01):
        d = {k: S.Dist("triangular", 1 - spread, 1.0, 1 + spread) for k in S.default_distributions(SCN)}
        mc = S.monte_carlo(SCN, n=20_000, seed=3, dists=d)
        gaps.append(abs(mc.percentiles.loc["total", "P50"] / det - 1))
    assert gaps[0] > gaps[2] and gaps[2] < 0.005


@pytest.mark.parametrize("mode", ["compute_optimal", "tokens"])
def test_solver_answer_fits_and_one_step_more_does_not(mode):
    budget = 2.0e7
    sol = S.solve_budget(SCN, budget, mode=mode)
    assert sol.total_usd <= budget
    assert sol.next_total_usd > budget
    assert 0 < sol.step < 1e-3
    scn = costcore.load_preset(SCN)
    if mode == "compute_optimal":
        assert sol.tokens_b == pytest.approx(20 * sol.params_b)
        bigger = schema.set_path(_sized(scn, sol.params_b * (1 + sol.step)),
                                 "stages.pretrain.tokens_b", sol.tokens_b * (1 + sol.step))
        assert sol.result.scenario["model"]["layers"] == max(1, round(80 * sol.params_b / 70.6))
    else:
        assert sol.params_b == pytest.approx(schema.effective_value(scn, "model.params_b"))
        bigger = schema.set_path(scn, "stages.pretrain.tokens_b", sol.tokens_b * (1 + sol.step))
    assert costcore.estimate(bigger).total_usd > budget
    assert sol.result.total_usd == pytest.approx(sol.total_usd)


def test_solver_refuses_impossible_budgets():
    with pytest.raises(ScenarioError):
        S.solve_budget(SCN, 10.0)
    with pytest.raises(ScenarioError):
        S.solve_budget(SCN, -5)
    with pytest.raises(ScenarioError):
        S.solve_budget("alpaca-7b-sft", 1e6)  # no pre-training stage to size (mode amount buys its samples)


@pytest.mark.parametrize("preset, key", [("alpaca-7b-sft", "stages.sft.samples"),
                                         ("reasoning-grpo-32b", "stages.rl.steps"),
                                         ("llava-1.5-7b", "stages.mm_tune.samples"),
                                         (SCN, "stages.cpt.tokens_b")])
def test_solver_buys_an_amount_of_one_stage_whole_where_the_setting_is(preset, key):
    """Mode "amount": the largest value of one stage's quantity within the budget, the rest as planned; a plan
    without pre-training is sized too. The answer costs at most the budget, one more unit (or step) more."""
    scn = costcore.load_preset(preset)
    budget = 1.5 * costcore.estimate(scn).total_usd
    assert key in S.solver_amounts(scn)
    sol = S.solve_budget(scn, budget, mode="amount", key=key)
    assert sol.key == key and sol.limit == "budget"
    assert sol.value > float(schema.effective_value(scn, key))  # half again the money buys more of it
    got = costcore.estimate(schema.set_path(scn, key, sol.value if "tokens_b" in key else int(sol.value)))
    assert got.total_usd == pytest.approx(sol.total_usd, rel=1e-12) and got.total_usd <= budget
    whole = schema.BY_PATH[key].kind == "int"
    more = sol.value + 1 if whole else sol.value * (1 + 2 * sol.step)
    assert costcore.estimate(schema.set_path(scn, key, int(more) if whole else more)).total_usd > budget
    if whole:
        assert sol.value == int(sol.value)
    else:
        assert 0 < sol.step < 1e-3


def test_solver_amount_names_what_it_can_buy():
    assert S.solver_amounts("alpaca-7b-sft") == ["stages.sft.samples"]
    with pytest.raises(ScenarioError, match="one of stages.sft.samples"):
        S.solve_budget("alpaca-7b-sft", 1e6, mode="amount", key="stages.rl.steps")
    with pytest.raises(ScenarioError, match="mode amount"):
        S.solve_budget("alpaca-7b-sft", 1e6)


def test_solver_page_sizes_a_plan_without_pretraining():
    from costcore import fmt
    from shared import app_on
    at = app_on("pages/sensitivity.py", "Budget solver", p="reasoning-grpo-32b")
    assert not at.exception and not [r for r in at.radio if r.key == "solve_mode"]  # one mode: no one-option radio
    at.number_input(key="solve_budget").set_value(4.0e5).run()
    at.selectbox(key="solve_key").set_value("stages.rl.steps").run()
    assert not at.exception
    sol = costcore.solve_budget(at.session_state["scenario"], 4.0e5, mode="amount", key="stages.rl.steps")
    shown = {m.label: m.value for m in at.metric}
    assert shown["RL steps"] == fmt.num(sol.value) and shown["Plan total"] == fmt.usd(sol.total_usd)
    assert shown["Against the plan"] == f"{sol.value / 600:.3g}x"


def test_thirty_plus_inputs_in_tornado():
    assert len(S.tornado(SCN).table) >= 30


def test_default_mfu_uncertainty_is_the_validation_track_record():
    """A stage on the default MFU is sampled with the leave-one-out RMS log-error of the defaults on
    published runs; a stage with its own MFU keeps the assumed triangle."""
    from costcore.validation import runs as validation
    sigma = validation.default_mfu_log_sigma()
    assert 0.05 < sigma < 0.6
    d = S.default_distributions(SCN)
    assert d["stages.pretrain.mfu"].kind == "lognormal" and d["stages.pretrain.mfu"].a == sigma
    scn = costcore.load_preset(SCN)
    scn["stages"]["pretrain"]["mfu"] = 0.4
    d = S.default_distributions(scn)
    assert d["stages.pretrain.mfu"].kind == "triangular"


def test_post_training_mfu_is_sampled_where_its_public_runs_sat():
    """SFT, DPO and RL on the default MFU are sampled from their own runs' track record (calibration.yaml
    stage_bands): a lognormal centered below the model's MFU (those runs took longer than the model says) with
    their spread, not pre-training's; the Monte Carlo's median SFT MFU is the model's times that factor."""
    import math

    from costcore.validation import runs as validation
    d = S.default_distributions("qlora-single-gpu")["stages.sft.mfu"]
    assert d.kind == "lognormal" and d.a == validation.default_mfu_log_sigma("sft") > validation.default_mfu_log_sigma()
    assert d.b == pytest.approx(math.exp(validation.default_mfu_log_median("sft"))) and d.b < 1.0
    res = costcore.estimate("qlora-single-gpu")
    draws = d.sample(0, res.stat("sft", "mfu"), 10001)
    assert float(np.median(draws)) == pytest.approx(res.stat("sft", "mfu") * d.b, rel=0.01)


def test_mfu_band_brackets_the_estimate():
    """P10/P90 of the default MFU's out-of-sample error: lower and higher cost around the estimate;
    none when every training stage gives its own MFU or throughput."""
    import math

    from costcore.validation import runs as validation
    res = costcore.estimate(SCN)
    lo, hi = S.mfu_band(SCN)
    assert lo < res.total_usd < hi
    # the compute part scales with 1/MFU: the high end adds at least the factor on pre-training compute
    f = math.exp(S.P90_Z * validation.default_mfu_log_sigma())
    pre = res.line_items().query("stage == 'pretrain' and item == 'compute.gpu'")["usd"].sum()
    assert hi - res.total_usd >= pre * (f - 1) * 0.99
    scn = costcore.load_preset(SCN)
    for s in scn["stages"]:
        if s != "eval":
            scn["stages"][s]["mfu"] = 0.4
    assert S.mfu_band(scn) is None


def test_budget_solver_on_the_page_says_what_one_step_larger_costs_over_the_budget():
    """The solver's metrics read as a person reads them: the model size in a number (its unit in the
    label, so the value is not cut off), and "one step larger" with how far over the budget it is: at 3
    significant digits both totals often read the same ($43.2M and $43.2M)."""
    from costcore import fmt
    from shared import app_on
    at = app_on("pages/sensitivity.py", "Budget solver", p="pipeline-70b")
    # at $100M, GPU memory stops the 70B pipeline's pinned layout (TP 8 x PP 4) first (at 275B)
    budget = 1.0e8
    at.number_input(key="solve_budget").set_value(budget).run()
    assert not at.exception
    sol = costcore.solve_budget(at.session_state["scenario"], budget)
    assert sol.limit == "memory" and sol.result.feasible and sol.total_usd < budget
    shown = {m.label: m for m in at.metric}
    assert shown["Model size (parameters)"].value == fmt.num(sol.params_b * 1e9)
    assert shown["One step larger"].proto.delta == "does not fit in GPU memory"
    assert any("GPU memory, not the budget" in c.value for c in at.caption)
    # a smaller budget binds before memory does
    at.number_input(key="solve_budget").set_value(2.0e7).run()
    assert not at.exception
    sol = costcore.solve_budget(at.session_state["scenario"], 2.0e7)
    assert sol.limit == "budget"
    step = {m.label: m for m in at.metric}["One step larger"]
    assert step.value == fmt.usd(sol.next_total_usd)
    assert sol.next_total_usd > 2.0e7
    assert step.proto.delta == f"{fmt.usd(sol.next_total_usd - 2.0e7)} over the budget"


def test_the_solver_never_buys_a_plan_that_does_not_fit():
    """Sizes past what the pinned layout holds cost less than the budget but do not run: the answer is
    the largest that runs, and one step larger is the first that does not fit."""
    sol = S.solve_budget(SCN, 1e9)
    assert sol.result.feasible and sol.limit == "memory" and sol.total_usd < 1e9
    scn = costcore.load_preset(SCN)
    bigger = schema.set_path(_sized(scn, sol.params_b * (1 + sol.step)),
                             "stages.pretrain.tokens_b", sol.tokens_b * (1 + sol.step))
    assert not costcore.estimate(bigger).feasible
    assert sol.next_total_usd == pytest.approx(costcore.estimate(bigger).total_usd, rel=1e-6)


def test_tornado_halves_and_doubles_a_parallel_degree():
    """A TP of 8 moves to 4 and 16 (the next layouts), not to 6 and 10; other inputs move by ±rel."""
    t = S.tornado(SCN, inputs=["stages.pretrain.tp", "hardware.gpus_per_node", "hardware.usd_per_gpu_hour"],
                  rel=0.2).table.set_index("input")
    scn = costcore.load_preset(SCN)
    for key in ("stages.pretrain.tp", "hardware.gpus_per_node"):
        cur = float(schema.effective_value(scn, key))
        if cur > 0:
            assert (t.loc[key, "low"], t.loc[key, "high"]) == (cur / 2, cur * 2), key
            assert t.loc[key, "total_high"] == pytest.approx(_total_with(scn, key, cur * 2), rel=1e-9)
    price = float(schema.effective_value(scn, "hardware.usd_per_gpu_hour"))
    assert t.loc["hardware.usd_per_gpu_hour", "high"] == pytest.approx(price * 1.2)
    assert S.is_doubling("stages.sft.micro_batch") and not S.is_doubling("stages.sft.epochs")


def test_monte_carlo_lays_out_again_the_samples_the_kept_layout_does_not_hold():
    """On the 70B pipeline, samples whose RL responses are longer than the kept layout holds are laid out
    again (as a team would) instead of being costed on a layout that cannot run; the summary says how
    many and names the input behind them (the largest |correlation| of its draws with being laid out again)."""
    mc = S.monte_carlo(SCN, n=4000, seed=0)
    assert mc.p_infeasible == 0 and mc.feasible.all()
    assert 0 < mc.p_relaid < 1
    assert mc.relaid_driver == "stages.rl.response_tokens"
    ok = S.monte_carlo(SCN, n=2000, seed=0, dists={"hardware.usd_per_gpu_hour": S.Dist("triangular", 0.8, 1.0, 1.2)})
    assert ok.p_infeasible == 0 and ok.infeasible_driver is None
    assert ok.p_relaid == 0 and ok.relaid_driver is None


def test_batch_refit_matches_a_search_per_row_where_each_draw_is_its_own_bucket():
    """Reference: with few distinct draws every bucket's upper edge is the draw itself, so a row laid out
    again must equal that row searched on its own (replan=True); rows that fit keep the base's plans
    exactly (replan=False), and only rows that did not fit are laid out again."""
    scn = costcore.load_preset(SCN)
    cur = float(schema.effective_value(scn, "stages.rl.response_tokens"))
    v = np.round(np.array([cur, cur * 1.6, cur * 1.3, cur, cur * 1.6, cur * 0.5]))
    cols = {"stages.rl.response_tokens": v}
    kept, kept_fits = costcore.batch(scn, cols, fits=True, replan=False)
    (out, fits), relaid = costcore.batch(scn, cols, fits=True, replan=False, refit=True)
    searched, searched_fits = costcore.batch(scn, cols, fits=True, replan=True)
    assert relaid.any() and not relaid.all(), "the case must hold rows that fit and rows that do not"
    np.testing.assert_array_equal(relaid, ~kept_fits)
    assert fits.all() and searched_fits[relaid].all()
    np.testing.assert_array_equal(out[~relaid], kept[~relaid])
    np.testing.assert_allclose(out[relaid], searched[relaid], rtol=1e-12)
    assert not np.allclose(out[relaid], kept[relaid]), "a new layout must change the relaid rows' cost"
    bare, relaid2 = costcore.batch(scn, cols, replan=False, refit=True)
    np.testing.assert_array_equal(bare, out)
    np.testing.assert_array_equal(relaid2, relaid)


def test_batch_refit_rounds_each_bucket_up_so_its_layout_holds_every_draw_in_it():
    """Many distinct draws: one search per bucket, at its upper edge; every relaid row fits."""
    scn = costcore.load_preset(SCN)
    cur = float(schema.effective_value(scn, "stages.rl.response_tokens"))
    v = np.round(cur * np.random.default_rng(1).uniform(0.6, 1.8, 3000))
    (out, fits), relaid = costcore.batch(scn, {"stages.rl.response_tokens": v}, fits=True, replan=False,
                                         refit=True)
    assert 0 < relaid.mean() < 1 and fits.all()
    assert v[relaid].min() > v[~relaid].max(), "only the longer responses need another layout"
    with pytest.raises(ScenarioError, match="refit"):
        costcore.batch(scn, {"stages.rl.response_tokens": v}, refit="yes")


# ---------------------------------------------------------------------------
# The Monte Carlo's draws: inverse CDFs checked against slow, obvious references
# ---------------------------------------------------------------------------
def _triangular_cdf(x: float, lo: float, mode: float, hi: float) -> float:
    """The triangular CDF written out (the textbook piecewise form)."""
    if x <= mode:
        return (x - lo) ** 2 / ((hi - lo) * (mode - lo)) if mode > lo else 0.0
    return 1.0 - (hi - x) ** 2 / ((hi - lo) * (hi - mode))


@pytest.mark.parametrize("lo, mode, hi", [(0.8, 1.0, 1.3), (0.5, 0.5, 2.0), (0.0, 1.0, 3.0), (0.7, 1.6, 1.6)])
def test_triangular_inverse_cdf_inverts_the_cdf(lo, mode, hi):
    u = np.linspace(0.001, 0.999, 101)
    x = S.Dist("triangular", lo, mode, hi).ppf(u, 1.0)
    assert np.all(np.diff(x) >= 0) and x.min() >= lo and x.max() <= hi
    assert [_triangular_cdf(v, lo, mode, hi) for v in x] == pytest.approx(list(u), abs=1e-12)


def test_normal_quantile_matches_the_standard_library():
    import statistics
    u = np.array([1e-12, 1e-6, 0.01, 0.02425, 0.2, 0.5, 0.8, 0.97575, 0.999, 1 - 1e-9])
    ref = np.array([statistics.NormalDist().inv_cdf(float(v)) for v in u])
    assert [sampling.norm_ppf(float(v)) for v in u] == pytest.approx(list(ref), rel=2e-9, abs=1e-12)
    d = S.Dist("lognormal", 0.5)
    assert d.ppf(np.array([0.5]), 3.0)[0] == pytest.approx(3.0)  # the median is the current value


def test_stratified_draws_put_one_sample_in_each_equal_probability_slice():
    n = 1000
    got = S.Dist("uniform", 0.0, 1.0, absolute=True).sample(5, 1.0, n)
    assert np.array_equal(np.sort(np.floor(got * n)), np.arange(n))
    plain = S.Dist("uniform", 0.0, 1.0, absolute=True).sample(5, 1.0, n, stratified=False)
    assert not np.array_equal(np.sort(np.floor(plain * n)), np.arange(n))  # independent draws clump
    # the order is random: two inputs' draws are not paired slice by slice
    a, b = (S.Dist("uniform", 0.0, 1.0, absolute=True).sample(k, 1.0, n) for k in (1, 2))
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.1


_MASK64 = (1 << 64) - 1


def _splitmix_out(z: int) -> int:
    """SplitMix64's output function in Python integers (S. Vigna's splitmix64.c, after Steele et al. 2014)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _reference_draws(kind, a, b, c, lo, hi, min_nonzero, whole, n, seed, row, stratified=True):
    """The slow, obvious version of sampling.draw's row ``row``: a SplitMix64 stream started from the seed and
    the row, a Fisher-Yates shuffle of the slices, one uniform inside each, the inverse CDF, then the input's
    rules as _clip_to_field applies them."""
    state = _splitmix_out(seed ^ _splitmix_out(((row + 1) * 0x9E3779B97F4A7C15) & _MASK64))

    def uniform():
        nonlocal state
        state = (state + 0x9E3779B97F4A7C15) & _MASK64
        return (_splitmix_out(state) >> 11) / 2.0 ** 53

    order = list(range(n))
    if stratified:
        for i in range(n - 1, 0, -1):
            k = min(int(uniform() * (i + 1)), i)
            order[i], order[k] = order[k], order[i]
    out = []
    for i in range(n):
        r = uniform()
        u = min(max((order[i] + r) / n if stratified else r, 1e-12), 1.0 - 1e-12)
        x = min(max(sampling.ppf(kind, a, b, c, u), lo), hi)
        x = min_nonzero if 0.0 < x < min_nonzero else x
        out.append(float(np.round(x)) if whole else x)
    return np.array(out)


@pytest.mark.parametrize("stratified", [True, False])
def test_the_jitted_draws_are_the_reference_draws(stratified):
    """Three inputs of the rules a batch applies (a range, an "auto" zero's smallest value, whole numbers): the
    jitted matrix equals the slow reference row by row, exactly, and the rows do not depend on the thread that
    drew them (the parallel and the serial kernel give the same matrix)."""
    kinds = [sampling.KIND_TRIANGULAR, sampling.KIND_LOGNORMAL, sampling.KIND_UNIFORM]
    params = [[0.5, 1.0, 3.0], [2.0, 0.8, 0.0], [-3.0, 40.0, 0.0]]
    lo, hi, mnz, whole = [0.6, 0.0, 0.0], [2.5, 1e9, 30.0], [0.0, 0.0, 4.0], [False, False, True]
    n = 300
    got = sampling.draw(kinds, params, lo, hi, mnz, whole, n, 123, stratified)
    for j in range(3):
        ref = _reference_draws(kinds[j], *params[j], lo[j], hi[j], mnz[j], whole[j], n, 123, j, stratified)
        assert np.array_equal(got[j], ref)
    big = 20_000  # at and above 10,000 draws the rows are drawn in parallel
    args = (np.array(kinds), np.array(params), np.array(lo), np.array(hi), np.array(mnz), np.array(whole), 7,
            stratified)
    par, ser = np.empty((3, big)), np.empty((3, big))
    sampling._fill(par, *args)
    sampling._fill_serial(ser, *args)
    assert np.array_equal(par, ser) and np.array_equal(sampling.draw(*args[:6], big, 7, stratified), ser)
    assert not np.array_equal(ser, sampling.draw(*args[:6], big, 8, stratified))  # another seed, other draws


def _clip_to_field(path: str, values: np.ndarray) -> np.ndarray:
    """The slow, obvious rule a batch checks, in numpy (what api.clip_to_field did before the draws were jitted):
    the field's range, not between 0 (auto) and its smallest value, whole numbers for integers."""
    from costcore.scenario.schema import BY_PATH
    f = BY_PATH[path]
    np.clip(values, f.lo, f.hi, out=values)
    if f.min_nonzero:
        values[(values > 0) & (values < f.min_nonzero)] = f.min_nonzero
    if f.kind == "int":
        np.round(values, out=values)
    return values


def test_monte_carlo_draws_are_moved_into_what_a_batch_accepts_as_clip_to_field_moves_them():
    """Every default input of the 70B pipeline (integers, ranges, "auto" zeros among them): the Monte Carlo's
    matrix is its raw draws moved by the batch's own rule (_clip_to_field), and not the raw draws."""
    scn, _, res = S._base(SCN)
    dists = S.default_distributions(scn)
    cur = S.current_values(list(dists), scn, res)
    got = S.draw_inputs(dists, cur, 5000, 3)
    units = [d.units(float(c)) for d, c in zip(dists.values(), cur)]
    raw = np.empty_like(got)
    k = len(units)
    sampling._fill_serial(raw, np.array([u[0] for u in units]), np.array([u[1:] for u in units]), np.full(k, -np.inf),
                          np.full(k, np.inf), np.zeros(k), np.zeros(k, dtype=bool), 3, True)
    moved = 0
    for j, p in enumerate(dists):
        want = _clip_to_field(p, raw[j].copy())
        assert np.array_equal(got[j], want), p
        moved += int(not np.array_equal(want, raw[j]))
    assert moved >= 1  # some input's draws were moved (an integer rounded, a range clipped)


def test_a_sweep_says_where_a_layout_change_makes_the_cost_jump():
    """DeepSeek-V3's preset pins PP 16 and EP 64; past about 725B its layers no longer fit with selective recompute
    and the search takes full recompute: pre-training's cost jumps by 88%. The sweep names that step, with the
    layouts an estimate of each size would search (schema.with_size: the size as a batch column moves it)."""
    scn = costcore.load_preset("moe-deepseek-v3")
    xs = np.linspace(168.0, 1300.0, 40)
    sw = S.sweep(scn, "model.params_b", xs)
    jumps = S.sweep_jumps(scn, "model.params_b", sw)
    full = jumps[jumps.change.str.contains("full recompute \\(was selective recompute\\)")]
    assert len(full) == 1 and full.stage.iloc[0] == "pretrain", jumps
    row = full.iloc[0]
    assert row.usd_after > 1.5 * row.usd_before
    valid = costcore.Scenario.of(scn).data
    before, after = (costcore.estimate(schema.with_size(valid, v)).plan("pretrain") for v in (row.previous, row.value))
    assert (before["recompute"], after["recompute"]) == ("selective", "full")
    pre = sw[sw.stage == "pretrain"].set_index("value").usd
    assert (pre[row.previous], pre[row.value]) == pytest.approx((row.usd_before, row.usd_after), rel=1e-12)


def test_a_sweep_of_a_price_has_no_layout_jumps():
    """A price moves no plan: a sweep of it has no step a layout explains (and searches nothing)."""
    sw = S.sweep(SCN, "hardware.usd_per_gpu_hour", [1.0, 2.0, 4.0, 8.0])
    assert S.sweep_jumps(SCN, "hardware.usd_per_gpu_hour", sw).empty


def test_layout_change_words_name_what_differs_and_skip_data_parallel():
    was = {"tp": 8, "pp": 4, "dp": 16, "cp": 1, "ep": 1, "micro_batch": 2, "zero": 1, "interleave": 3,
           "recompute": "selective", "sequence_parallel": True, "schedule": "1f1b"}
    assert S.layout_change_words(was, dict(was, dp=32)) == ""  # the GPUs over the other degrees: not a choice
    now = dict(was, recompute="full", micro_batch=1, interleave=1)
    assert S.layout_change_words(was, now) == ("micro-batch 1 (was micro-batch 2), full recompute (was selective "
                                               "recompute), no interleaving (was interleaved, 3 chunks a stage)")


def test_the_sweep_tab_names_the_layout_change_behind_a_jump():
    """On the page: the default size sweep of the DeepSeek-V3 preset (a quarter to four times 671B) says in words
    where pre-training's cost jumps and why; the same page on a price-only input says nothing of layouts."""
    from shared import app_on
    at = app_on("pages/sensitivity.py", "Sweep one input", p="moe-deepseek-v3")
    said = " ".join(c.value for c in at.caption)
    assert "Grey dotted lines mark where a stage's cost steps" in said, said
    assert "pre-training goes from" in said and "full recompute (was selective recompute)" in said, said
    at.selectbox(key="sw_key").set_value("hardware.usd_per_gpu_hour").run()
    assert not at.exception
    assert "Grey dotted lines" not in " ".join(c.value for c in at.caption)


def test_a_dense_model_offers_no_mixture_of_experts_inputs():
    """On a dense model the expert settings move nothing (no experts to count, route or place); the cost surface
    defaulted to 'active parameters per token (MoE)' on the 32B GRPO preset and drew a flat plot. A MoE keeps them."""
    dense = S.numeric_inputs("reasoning-grpo-32b")
    moe = S.numeric_inputs("moe-deepseek-v3")
    assert not set(dense) & set(S._MOE_ONLY)
    assert {"model.active_params_b", "model.experts_active"} <= set(moe)
    assert "model.params_b" in dense and "hardware.num_gpus" in dense


def test_tornado_marks_layout_and_shape_choices_and_the_page_leaves_them_out_by_default():
    """On the 70B LoRA + GRPO plan, pre-training's TP halved and doubled ($42M to $149M: TP 16 spans two 8-GPU nodes)
    and the GPUs per node led the chart, above the uncertain inputs a budget asks about."""
    t = S.tornado("pipeline-70b-lora-grpo").table
    kinds = dict(zip(t.input, t.choice))
    assert kinds["stages.pretrain.tp"] and kinds["hardware.gpus_per_node"] and kinds["model.hidden"]
    assert not kinds["hardware.usd_per_gpu_hour"] and not kinds["stages.pretrain.tokens_b"]
    assert not kinds["model.params_b"]  # the size is what the plan buys, not how it is laid out
    assert t.iloc[0].input == "stages.pretrain.tp"
    from shared import app_on
    at = app_on("pages/sensitivity.py", p="pipeline-70b-lora-grpo")
    assert not at.exception
    said = [c.value for c in at.caption if "layout and shape choices are left out" in c.value]
    assert said and "pre-training: tensor parallelism" in said[0]
    at.toggle(key="tor_choices").set_value(True).run()
    assert not at.exception and not [c.value for c in at.caption if "are left out" in c.value]


def test_the_analysis_boxes_refuse_out_of_range_values_in_words():
    """The solver and Monte Carlo took a budget of 1e30 ("the plan costs $16.4M of $1,000,000,000,000,000,000T"),
    and their boxes' browser limits drew a red border alone while the old value stayed in use; the solver named
    its argument ("budget_usd: even the cheapest ..."). Each box now refuses in a sentence naming it."""
    from shared import app_on
    at = app_on("pages/sensitivity.py", "Budget solver", p="pipeline-70b")
    at.number_input(key="solve_budget").set_value(1e30).run()
    said = " ".join(w.value for w in at.warning).replace("\\", "")  # the markdown's escapes
    assert "Budget for the whole plan: must be a number from $1.00k to $10.0T (got 1e+30)" in said, said
    at.number_input(key="solve_budget").set_value(2000.0).run()
    said = " ".join(w.value for w in at.warning).replace("\\", "")
    assert "Budget for the whole plan: even the cheapest" in said and "budget_usd" not in said, said
    mc = app_on("pages/sensitivity.py", "Monte Carlo", p="llama3-8b")
    mc.number_input(key="mc_seed").set_value(99_999_999.0).run()
    assert "Seed: must be a whole number from 0 to 10,000" in " ".join(w.value for w in mc.warning)
    with pytest.raises(costcore.ScenarioError, match="to 10,000,000,000,000"):
        S.solve_budget(SCN, 1e30)
