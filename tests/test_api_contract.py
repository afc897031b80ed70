"""The public API's one promise about bad input: only ``ScenarioError`` ever escapes.

    python -m pytest tests/test_api_contract.py -q

Hypothesis throws garbage at every argument of every public function
(``estimate``, ``batch``, ``tornado``, ``sweep``, ``heatmap``, ``monte_carlo``,
``solve_budget``, the loaders ``load_scenario``, ``load_yaml_text`` and
``load_preset``) over 1,000 examples each, with valid values mixed in often
enough that the happy path runs too. Each call either returns finite numbers
or raises exactly :class:`costcore.ScenarioError` whose text is one printable
line of at most 1,000 characters naming a non-empty field.
``costcore.scenario.share.decode`` must never raise at all.

The garbage: None, text, bytes, mappings, lists of mixed things, nested lists,
numpy arrays of 0-3 dimensions with int/float/bool/object/text dtypes, NaN and
infinities, 10**400, negative numbers, every numpy scalar type, objects whose
``__float__``/``__len__``/``__iter__``/``__repr__`` raise, 5,000-deep and
self-referencing structures.

Numbers of any Python or numpy numeric type are accepted alike (8, 8.0,
np.int64(8), np.float32(8) GPUs give the same total). No timing is asserted
here: sizes are drawn small so the file stays quick on a 2-core machine.
"""
from __future__ import annotations

import copy
import datetime
import math
import numbers
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import costcore
from costcore import ScenarioError, api
from costcore.scenario import schema
from costcore.analysis import sensitivity
from costcore.scenario import share
from costcore.scenario.schema import BY_PATH
from costcore.analysis.sensitivity import Dist
from shared import assert_finite

ROOT = Path(__file__).resolve().parent.parent
MAX_MESSAGE_CHARS = 1000
BASE_PRESET = "alpaca-7b-sft"  # small: one SFT stage
SOLVER_PRESET = "llama3-8b"  # the budget solver needs a pre-training stage
BASE = costcore.load_preset(BASE_PRESET)
SOLVER_BASE = costcore.load_preset(SOLVER_PRESET)

# Fixed draws under CI and random ones locally, as conftest's profiles set for every property test: this
# module pinned derandomize=True, so no local run ever explored it, and three ways for a foreign object's
# exception to escape batch, monte_carlo, heatmap, sweep and tornado waited for an unseeded run to find them.
CONTRACT = settings(max_examples=1000, deadline=None, database=None,
                    report_multiple_bugs=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.large_base_example])

ALL_FIELDS = list(BY_PATH.values())
NUMERIC_FIELDS = [f for f in ALL_FIELDS if f.kind in ("float", "int")]
KERNEL_NUMERIC = [f for f in NUMERIC_FIELDS if f.index >= 0]
VARIABLE_FIELDS = [f for f in ALL_FIELDS if f.kind in ("float", "int", "enum", "bool") and f.index >= 0]


# ---------------------------------------------------------------------------
# Hostile objects
# ---------------------------------------------------------------------------
class Boom(RuntimeError):
    """What a hostile object raises: no exception type the API could expect."""


class Hostile:
    """Printable by Hypothesis's reporter (``_repr_pretty_``, looked up before a type's own printer), so a
    failing example is reported as itself: without it, printing a BadMapping or a BadRepr in the falsifying
    example raised Boom and hid the failure it was reporting."""

    def _repr_pretty_(self, p, cycle):
        p.text(f"<{type(self).__name__}>")


class BadFloat(float, Hostile):
    """A float whose conversion raises."""

    def __float__(self):
        raise Boom("__float__")

    def __repr__(self):
        return "BadFloat()"


class BadLen(Hostile):
    def __len__(self):
        raise Boom("__len__")

    def __iter__(self):
        return iter([1.0, 2.0])


class BadIter(Hostile):
    def __len__(self):
        return 2

    def __iter__(self):
        raise Boom("__iter__")

    def __getitem__(self, i):
        raise Boom("__getitem__")


class HugeLen(Hostile):
    """Claims more rows than any batch may hold, holds none."""

    def __len__(self):
        return 10**12

    def __iter__(self):
        raise Boom("__iter__")


class BadRepr(Hostile):
    def __repr__(self):
        raise Boom("__repr__")

    __str__ = __repr__


class MultiLineRepr(Hostile):
    def __repr__(self):
        return "line one\nline two \x1b[31mred\x1b[0m \u202e"


class BadMapping(dict, Hostile):
    """A dict whose iteration raises."""

    def __iter__(self):
        raise Boom("mapping __iter__")

    def items(self):
        raise Boom("mapping items")

    def keys(self):
        raise Boom("mapping keys")


class BadBool(Hostile):
    def __bool__(self):
        raise Boom("__bool__")


def deep_dict(depth: int = 5000) -> dict:
    d = cur = {}
    for _ in range(depth):
        cur["a"] = {}
        cur = cur["a"]
    return d


def deep_list(depth: int = 5000) -> list:
    d = cur = []
    for _ in range(depth):
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    return d


def self_dict() -> dict:
    d: dict = {"name": "loop"}
    d["model"] = d
    return d


def self_list() -> list:
    x: list = [1.0]
    x.append(x)
    return x


def deep_scenario() -> dict:
    s = copy.deepcopy(BASE)
    s["model"] = {"params_b": deep_dict(50)}
    return s


def self_scenario() -> dict:
    s = copy.deepcopy(BASE)
    s["stages"]["sft"]["extra"] = s
    return s


NUMPY_SCALAR_TYPES = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                      np.float16, np.float32, np.float64, np.longdouble)


def as_type(v, t):
    """``v`` as numeric type ``t`` where that is possible, else ``v`` itself."""
    try:
        with np.errstate(all="ignore"):
            out = t(v)
    except (OverflowError, ValueError, TypeError):
        return v
    return out


numpy_scalars = st.one_of(
    st.builds(as_type, st.integers(-300, 300) | st.sampled_from([0, 1, 8, 2**31, 2**63 - 1, 2**64 - 1]),
              st.sampled_from(NUMPY_SCALAR_TYPES)),
    st.builds(as_type, st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(NUMPY_SCALAR_TYPES)),
    st.sampled_from([np.bool_(True), np.bool_(False), np.complex128(1 + 2j), np.complex64(3), np.str_("8"),
                     np.bytes_(b"8"), np.datetime64("2024-01-01"), np.timedelta64(8, "s"), np.float64("nan"),
                     np.float32("inf"), np.longdouble("-inf")]),
)

atoms = st.one_of(
    st.none(), st.booleans(),
    st.integers(-10**6, 10**6),
    st.sampled_from([0, 1, -1, 8, 10**400, -10**400, 2**63, 2**64, 10**20]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324, 0.5, 1.5, -1.5]),
    st.text(max_size=20),
    st.sampled_from(["", "8", "1e3", "nan", "inf", "0x10", "١٢", "a.b", "model.params_b", "llama3-8b",
                     "../presets/llama3-8b", "x\ny", "\x1b[31m", "\u202e", "\x00"]),
    st.binary(max_size=20),
    numpy_scalars,
    st.sampled_from([complex(1, 2), Fraction(1, 3), Fraction(10**400, 3), Decimal("1.5"), Decimal("nan"),
                     datetime.date(2024, 1, 1), Ellipsis, NotImplemented, object, len]),
    st.builds(object), st.builds(BadFloat), st.builds(BadLen), st.builds(BadIter), st.builds(HugeLen),
    st.builds(BadRepr), st.builds(MultiLineRepr), st.builds(BadBool),
)

np_arrays = hnp.arrays(
    dtype=st.sampled_from([np.int64, np.int8, np.uint32, np.float64, np.float32, np.bool_, "<U4"]),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
) | hnp.arrays(dtype=object, shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
               elements=st.one_of(st.none(), st.integers(-5, 5), st.floats(), st.text(max_size=3)))

structures = st.one_of(
    st.builds(deep_dict), st.builds(deep_list), st.builds(self_dict), st.builds(self_list),
    st.builds(BadMapping),
)

garbage = st.recursive(
    st.one_of(atoms, np_arrays, structures),
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=10), st.integers(), st.none()), inner, max_size=4),
        st.frozensets(st.integers(), max_size=3),
    ),
    max_leaves=8,
)


def mostly(good, bad, tenths: int = 8, of: int = 10):
    """``good`` in about ``tenths``/``of`` of the draws, ``bad`` otherwise (one_of alone is not uniform)."""
    return st.sampled_from([True] * tenths + [False] * (of - tenths)).flatmap(lambda g: good if g else bad)


# ---------------------------------------------------------------------------
# Valid values, in every numeric type
# ---------------------------------------------------------------------------
def _bounds(f, cap=1e6):
    lo = f.lo if math.isfinite(f.lo) else -cap
    hi = f.hi if math.isfinite(f.hi) else cap
    return lo, min(hi, max(lo, cap))


def valid_value(f):
    """A value in the field's range (rarely just outside), as any Python or numpy type."""
    if f.kind == "enum":
        return st.sampled_from(f.choices)
    if f.kind == "bool":
        return st.booleans()
    if f.kind == "str":
        return st.text(max_size=30)
    if f.kind == "date":
        return st.dates(datetime.date(1990, 1, 1), datetime.date(2110, 1, 1)).map(
            lambda d: d if d.day % 2 else d.isoformat())
    lo, hi = _bounds(f)
    if f.kind == "int":
        base = st.integers(int(math.ceil(lo)), int(math.floor(hi)))
        types = (int, float) + NUMPY_SCALAR_TYPES
    else:
        base = st.floats(lo, hi, allow_nan=False)
        types = (float, np.float64, np.float32, np.float16, np.longdouble)
    return st.builds(as_type, base, st.sampled_from(types))


def value_for(f):
    return mostly(valid_value(f), atoms, 8)


@st.composite
def mutated_scenario(draw, base=BASE, max_changes=3):
    """A copy of a valid scenario with a few settings changed (mostly to valid values)."""
    scn = copy.deepcopy(base)
    for _ in range(draw(st.integers(0, max_changes))):
        f = draw(st.sampled_from(ALL_FIELDS))
        scn = schema.set_path(scn, f.path, draw(value_for(f)))
    if draw(st.sampled_from(range(9 + 1))) == 0:
        scn[draw(st.one_of(st.sampled_from(schema.TOP_LEVEL_KEYS), st.text(max_size=8)))] = draw(garbage)
    return scn


scenarios = st.one_of(
    st.builds(copy.deepcopy, st.just(BASE)),
    st.sampled_from(costcore.preset_names()),
    mutated_scenario(),
    garbage,
    st.builds(deep_scenario), st.builds(self_scenario),
    st.sampled_from([ROOT / "presets" / f"{BASE_PRESET}.yaml", str(ROOT / "presets" / "llama3-8b.yaml"),
                     "no-such-file.yaml", ".", "/", "/dev/null", "/etc/passwd", "a\nb.yaml", "a\x00.yaml",
                     "x" * 5000 + ".yaml", Path("nowhere.yml"), "presets/../presets/llama3-8b.yaml"]),
)
# The sensitivity functions: mostly the small base (each call costs a full evaluation), garbage now and then.
base_scenarios = mostly(mostly(st.builds(copy.deepcopy, st.just(BASE)), mutated_scenario(max_changes=2), 7),
                        garbage, 9)
flags = mostly(st.booleans() | st.sampled_from([np.bool_(True), 0, 1]), atoms, 9)


def numeric_list(f, max_size=12):
    lo, hi = _bounds(f)
    vals = valid_value(f)
    return st.one_of(
        st.lists(vals, min_size=1, max_size=max_size),
        hnp.arrays(np.float64 if f.kind == "float" else st.sampled_from([np.int64, np.int32, np.float64]),
                   st.integers(1, max_size), elements=st.integers(int(math.ceil(lo)), int(math.floor(hi)))
                   if f.kind != "float" else st.floats(lo, hi, allow_nan=False)),
    )


def values_for(f, max_size=12):
    """Values for one batch column / sweep: valid lists and arrays, often; garbage otherwise."""
    return mostly(numeric_list(f, max_size),
                  garbage | st.lists(mostly(valid_value(f), atoms), min_size=1, max_size=5), 8)


setting_names = mostly(st.sampled_from([f.path for f in ALL_FIELDS]),
                       st.sampled_from(["x.y", "", "model", "stages.sft", "name", "stages.sft.enabled"]) | atoms, 6)


# ---------------------------------------------------------------------------
# The contract
# ---------------------------------------------------------------------------
def _short(x, n=300) -> str:
    try:
        s = repr(x)
    except Exception:  # noqa: BLE001 - a hostile repr is shown by its type
        s = f"<{type(x).__name__}>"
    return s if len(s) <= n else s[: n - 3] + "..."


def check_refusal(err: BaseException) -> None:
    """Exactly ScenarioError, one printable line of at most 1,000 characters naming its field."""
    assert type(err) is ScenarioError, f"{type(err).__name__} escaped: {_short(err.args)}"
    text = str(err)
    assert text, "empty message"
    assert "\n" not in text and "\r" not in text, f"message on several lines: {text[:300]!r}"
    assert text.isprintable(), f"unprintable message: {text[:300]!r}"
    assert len(text) <= MAX_MESSAGE_CHARS, f"message of {len(text)} characters: {text[:200]!r}..."
    assert isinstance(err.field, str) and err.field, f"no field: {text[:200]!r}"
    assert err.field == err.path
    assert err.field in text, f"field {err.field!r} not named in {text[:200]!r}"
    assert isinstance(err.allowed, str)


def attempt(fn, *args, **kwargs):
    """(True, result) or (False, None) after checking the refusal; anything else fails the test."""
    try:
        out = fn(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - the point: which type escaped
        check_refusal(err)
        event("refused")
        return False, None
    event("returned")
    return True, out


def assert_finite_array(a, what):
    a = np.asarray(a, dtype=np.float64)
    assert np.all(np.isfinite(a)), f"{what}: non-finite values"


def assert_finite_frame(df: pd.DataFrame, what):
    num = df.select_dtypes(include=[np.number])
    assert_finite_array(num.to_numpy(dtype=np.float64), what)


def check_result(res):
    assert isinstance(res, api.Result)
    assert math.isfinite(res.total_usd)
    assert_finite_array(res.items, "line items")
    assert_finite(res.to_dict(), "result")


# ---------------------------------------------------------------------------
# One property per public function
# ---------------------------------------------------------------------------
@CONTRACT
@given(scenario=scenarios)
def test_estimate_only_raises_scenario_error(scenario):
    ok, res = attempt(costcore.estimate, scenario)
    if ok:
        check_result(res)


@CONTRACT
@given(scenario=st.one_of(mutated_scenario(), garbage, scenarios))
def test_validate_only_raises_scenario_error(scenario):
    ok, out = attempt(schema.validate, scenario)
    if ok:
        assert schema.validate(out) == out


@st.composite
def batch_columns(draw):
    if draw(st.sampled_from(range(7 + 1))) == 0:
        return draw(garbage)
    n = draw(st.integers(1, 12))
    cols = {}
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.sampled_from(range(5 + 1))) == 0:
            key = draw(setting_names)
            f = BY_PATH.get(key) if isinstance(key, str) else None
        else:
            f = draw(st.sampled_from(VARIABLE_FIELDS))
            key = f.path
        if f is None:
            val = draw(garbage)
        elif f.kind in ("enum", "bool") and draw(st.booleans()):
            val = draw(st.lists(st.one_of(valid_value(f), st.integers(-1, len(f.choices) + 1)),
                                min_size=n, max_size=n)) if f.kind == "enum" else \
                draw(st.lists(st.sampled_from([0, 1, np.int64(1), 0.0]), min_size=n, max_size=n))
        elif draw(st.sampled_from(range(3 + 1))) == 0:
            val = draw(values_for(f))
        else:
            val = draw(st.lists(valid_value(f), min_size=n, max_size=n))
            val = draw(st.sampled_from([list, tuple, np.asarray]))(val) if f.kind != "enum" else val
        try:
            cols[key] = val
        except TypeError:  # an unhashable garbage key
            pass
    return cols


@CONTRACT
@given(scenario=base_scenarios, columns=batch_columns(), full=flags, fits=flags)
def test_batch_only_raises_scenario_error(scenario, columns, full, fits):
    ok, out = attempt(costcore.batch, scenario, columns, full=full, fits=fits)
    if ok:
        if isinstance(out, tuple):
            totals, feasible = out
            assert feasible.dtype == bool and len(feasible) == len(totals)
            out = totals
        assert_finite_array(out, "batch")


tornado_inputs = mostly(
    st.none() | st.lists(st.sampled_from([f.path for f in KERNEL_NUMERIC]), min_size=1, max_size=6),
    st.lists(setting_names, max_size=4) | garbage, 8)


@st.composite
def tornado_ranges(draw):
    if draw(st.booleans()):
        return None
    if draw(st.sampled_from(range(3 + 1))) == 0:
        return draw(garbage)
    out = {}
    for _ in range(draw(st.integers(0, 3))):
        f = draw(st.sampled_from(KERNEL_NUMERIC))
        out[f.path] = draw(mostly(st.tuples(valid_value(f), valid_value(f)), garbage, 8))
    return out


@CONTRACT
@given(scenario=base_scenarios, inputs=tornado_inputs,
       rel=mostly(st.floats(0.01, 1.0) | numpy_scalars, atoms, 9), ranges=tornado_ranges())
def test_tornado_only_raises_scenario_error(scenario, inputs, rel, ranges):
    ok, out = attempt(costcore.tornado, scenario, inputs=inputs, rel=rel, ranges=ranges)
    if ok:
        assert math.isfinite(out.base_total)
        assert_finite_frame(out.table, "tornado")


@st.composite
def key_and_values(draw):
    if draw(st.sampled_from(range(4 + 1))) == 0:
        key = draw(setting_names)
    else:
        key = draw(st.sampled_from(VARIABLE_FIELDS)).path
    f = BY_PATH.get(key) if isinstance(key, str) else None
    if f is None:
        return key, draw(garbage)
    if f.kind in ("enum", "bool") and draw(st.booleans()):
        return key, draw(st.lists(valid_value(f) if f.kind == "enum" else st.sampled_from([0, 1]),
                                  min_size=1, max_size=5))
    return key, draw(values_for(f, max_size=8))


@CONTRACT
@given(scenario=base_scenarios, kv=key_and_values(), full=flags)
def test_sweep_only_raises_scenario_error(scenario, kv, full):
    key, values = kv
    ok, out = attempt(costcore.sweep, scenario, key, values, full=full)
    if ok:
        assert isinstance(out, pd.DataFrame)
        assert_finite_frame(out, "sweep")


@pytest.mark.parametrize("values", [BadLen(), BadIter()])
def test_a_choice_sweep_over_a_hostile_list_is_refused_in_one_sentence(values):
    """Found by the contract test above (seed 205): an enum sweep read its values with list(), which ran the
    object's own __len__, and that exception escaped. It is now read as batch reads a column."""
    with pytest.raises(ScenarioError, match="stages.sft.optimizer"):
        costcore.sweep("alpaca-7b-sft", "stages.sft.optimizer", values)


@CONTRACT
@given(scenario=base_scenarios, kx=key_and_values(), ky=key_and_values(), feasible=flags)
def test_heatmap_only_raises_scenario_error(scenario, kx, ky, feasible):
    (key_x, xs), (key_y, ys) = kx, ky
    ok, out = attempt(costcore.heatmap, scenario, key_x, xs, key_y, ys, feasible=feasible)
    if ok:
        if isinstance(out, tuple):
            totals, fits = out
            assert fits.shape == totals.shape and fits.dtype == bool
            out = totals
        assert out.ndim == 2
        assert_finite_array(out, "heatmap")


# Inputs whose current value is not 0 (a relative spread around 0 is no spread), then any numeric input.
MC_KEYS = mostly(st.sampled_from(list(sensitivity.default_distributions(BASE))
                                 + ["hardware.size_exponent", "model.params_b", "hardware.num_gpus"]),
                 st.sampled_from([f.path for f in KERNEL_NUMERIC]), 6)


@st.composite
def distributions(draw):
    if draw(st.sampled_from(range(2 + 1))) == 0:
        return None
    if draw(st.sampled_from(range(9 + 1))) == 0:
        return draw(garbage)
    out = {}
    for _ in range(draw(st.integers(0, 3))):
        key = draw(mostly(MC_KEYS, setting_names, 9))
        if draw(st.sampled_from(range(9 + 1))) == 0:
            dist = draw(garbage)
        else:
            kind = draw(mostly(st.sampled_from(["triangular", "uniform", "lognormal"]), atoms, 9))
            params = [draw(mostly(st.floats(0.0, 3.0) | st.floats(-1e13, 1e13), atoms, 9)) for _ in range(3)]
            dist = Dist(kind, *params, absolute=draw(flags))
        try:
            out[key] = dist
        except TypeError:  # unhashable garbage key
            pass
    return out


small_counts = mostly(st.integers(1, 2000) | st.integers(1, 50)
                      | st.builds(as_type, st.integers(1, 500), st.sampled_from((float,) + NUMPY_SCALAR_TYPES)),
                      st.sampled_from([0, -1, 1.5, 5_000_001, 10**400, math.nan, True, "100"]) | atoms, 8)


@CONTRACT
@given(scenario=base_scenarios, n=small_counts,
       seed=mostly(st.integers(0, 2**63 - 1) | st.integers(0, 100) | st.builds(np.uint64, st.integers(0, 2**64 - 1)),
                   atoms, 9),
       dists=distributions(), budget=mostly(st.none() | st.floats(1.0, 1e7) | numpy_scalars, atoms, 9))
def test_monte_carlo_only_raises_scenario_error(scenario, n, seed, dists, budget):
    ok, out = attempt(costcore.monte_carlo, scenario, n=n, seed=seed, dists=dists, budget_usd=budget)
    if ok:
        assert_finite_array(out.totals, "totals")
        assert_finite_array(out.stages, "stages")
        assert_finite_frame(out.percentiles, "percentiles")
        assert math.isfinite(out.deterministic_total)
        assert 0.0 <= out.p_infeasible <= 1.0
        assert out.p_over_budget is None or 0.0 <= out.p_over_budget <= 1.0


solver_scenarios = mostly(mostly(st.builds(copy.deepcopy, st.just(SOLVER_BASE)),
                                 mutated_scenario(base=SOLVER_BASE, max_changes=1), 7),
                          st.builds(copy.deepcopy, st.just(BASE)) | garbage, 9)  # BASE: no pre-training


@settings(CONTRACT, max_examples=300)  # each example sizes up to ~40 plans (1.6-2.9 s): 300 keep the suite in 15 min
@given(scenario=solver_scenarios,
       budget=mostly(st.builds(as_type, st.floats(1e5, 1e10), st.sampled_from([float, int, np.float32, np.int64])),
                     st.floats(-1e3, 1e14) | numpy_scalars | atoms, 8),
       mode=mostly(st.sampled_from(["compute_optimal", "tokens"]), atoms, 9),
       tpp=mostly(st.just(20.0) | st.floats(0.1, 1e6) | numpy_scalars, atoms, 9))
def test_solve_budget_only_raises_scenario_error(scenario, budget, mode, tpp):
    ok, sol = attempt(costcore.solve_budget, scenario, budget, mode=mode, tokens_per_param=tpp)
    if ok:
        for name in ("params_b", "tokens_b", "total_usd", "step"):
            assert math.isfinite(getattr(sol, name)), name
        assert sol.next_total_usd > 0  # math.inf when even the largest plan fits
        check_result(sol.result)


PRESET_TEXTS = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "presets").glob("*.yaml"))]


def _dump(scn) -> str:
    try:
        return yaml.safe_dump(scn, sort_keys=False, allow_unicode=True)
    except Exception:  # noqa: BLE001 - garbage a YAML writer cannot write is sent as its repr
        return _short(scn, 2000)


valid_yaml = st.one_of(st.sampled_from(PRESET_TEXTS), st.sampled_from(PRESET_TEXTS).map(str.encode),
                       mutated_scenario().map(_dump))
yaml_texts = mostly(valid_yaml, st.one_of(
    st.text(max_size=200), st.binary(max_size=200), atoms,
    st.sampled_from(["", "~", "[]", "1", "name: x", "model: {params_b: .nan}", "a: &x 1\nb: *x", "a: 1\na: 2",
                     "[" * 5000, "{" * 20 + "}" * 20, "model:\n  params_b: 1e400", "!!python/object:os.system x",
                     "x: " + "1," * 6000, "\xff\xfe", "- " * 100, "model: {params_b: 0x10}"]),
    st.builds(lambda t: t.encode("utf-16"), st.text(max_size=20)),
    st.sampled_from(PRESET_TEXTS).flatmap(lambda t: st.integers(0, len(t)).map(lambda i: t[:i])),  # cut short
), 5)


@CONTRACT
@given(scenario=st.one_of(scenarios, mutated_scenario()))
def test_load_scenario_only_raises_scenario_error(scenario):
    ok, out = attempt(costcore.load_scenario, scenario)
    if ok:
        assert isinstance(out, dict) and schema.validate(out) == out


@CONTRACT
@given(text=yaml_texts, what=st.one_of(st.just("upload"), st.sampled_from(["file.yaml", "scenario"])))
def test_load_yaml_text_only_raises_scenario_error(text, what):
    ok, out = attempt(costcore.load_yaml_text, text, what=what)
    if ok:
        assert isinstance(out, dict) and schema.validate(out) == out


@CONTRACT
@given(name=mostly(st.sampled_from(costcore.preset_names()), atoms | garbage | st.sampled_from(["../presets/llama3-8b", "llama3-8b.yaml", "LLAMA3-8B", " llama3-8b",
                                       "/etc/passwd", "a" * 70, "llama3-8b\n", "con", "-"]), 5))
def test_load_preset_only_raises_scenario_error(name):
    ok, out = attempt(costcore.load_preset, name)
    if ok:
        assert isinstance(out, dict)


share_values = st.one_of(
    st.text(max_size=30), st.sampled_from(["on", "off", "1e3", "8", "0", "-1", "nan", "lora", "true", "", "٣",
                                           "x" * 300, "[1, 2]", "{a: 1}", "*a", "&a 1"]),
    st.lists(st.text(max_size=5), max_size=3), st.tuples(st.text(max_size=5)), st.none(),
    st.integers(), st.floats(), st.binary(max_size=5),
)
share_keys = st.one_of(st.sampled_from(["p", "name"] + [f.path for f in ALL_FIELDS]
                                       + [f"stages.{s}" for s in schema.STAGES] + ["stages.x", "stages.sft.enabled"]),
                       st.text(max_size=20), st.integers())


@CONTRACT
@given(params=mostly(st.dictionaries(share_keys, share_values, max_size=6),
                    st.dictionaries(share_keys, share_values, min_size=298, max_size=304), 49, 50),
       preset=st.sampled_from(costcore.preset_names()))
def test_share_decode_never_raises(params, preset):
    scn, used, warnings = share.decode(params, preset)  # no exception of any type, ScenarioError included
    assert schema.validate(scn) == scn
    assert used in costcore.preset_names()
    assert isinstance(warnings, list) and len(warnings) <= 1
    assert all(isinstance(w, str) for w in warnings)


# ---------------------------------------------------------------------------
# The probes, one by one
# ---------------------------------------------------------------------------
def refused(fn, *args, field=None, **kwargs) -> ScenarioError:
    with pytest.raises(Exception) as info:
        fn(*args, **kwargs)
    check_refusal(info.value)
    if field is not None:
        assert info.value.field == field, str(info.value)
    return info.value


@pytest.mark.parametrize("make", [deep_dict, self_dict, deep_list, self_list], ids=lambda f: f.__name__)
@pytest.mark.parametrize("fn", [costcore.estimate, costcore.load_scenario, schema.validate],
                         ids=["estimate", "load_scenario", "validate"])
def test_deep_and_self_referencing_structures_are_refused(fn, make):
    refused(fn, make())


@pytest.mark.parametrize("make", [deep_scenario, self_scenario], ids=["deep value", "self value"])
def test_deep_and_self_referencing_values_inside_a_scenario_are_refused(make):
    refused(costcore.estimate, make())
    refused(schema.validate, make())


def test_sweep_of_an_unknown_setting_is_refused():
    refused(costcore.sweep, BASE, "x.y", [1], field="key")


def test_batch_of_text_values_is_refused():
    refused(costcore.batch, BASE, {"model.params_b": ["a"]}, field="model.params_b")


def test_fractional_sample_count_is_refused():
    err = refused(costcore.monte_carlo, BASE, n=1.5, field="n")
    assert "whole number" in str(err)


@pytest.mark.parametrize("budget", [math.nan, np.float64("nan"), np.float32("nan"), math.inf, -1.0, 0.0])
def test_nan_and_impossible_budgets_are_refused(budget):
    err = refused(costcore.monte_carlo, BASE, n=10, budget_usd=budget, field="budget_usd")
    assert err.allowed
    refused(costcore.solve_budget, SOLVER_BASE, budget, field="budget_usd")


def test_two_dimensional_batch_column_is_refused():
    err = refused(costcore.batch, BASE, {"model.params_b": np.ones((2, 3)) * 7}, field="model.params_b")
    assert "(2, 3)" in str(err)
    refused(costcore.batch, BASE, {"model.params_b": [[7.0], [8.0]]}, field="model.params_b")


def test_oversized_batch_is_refused():
    n = api.MAX_BATCH_ROWS + 1
    err = refused(costcore.batch, BASE, {"model.params_b": np.broadcast_to(7.0, (n,))}, field="model.params_b")
    assert f"{api.MAX_BATCH_ROWS:,}" in str(err)
    refused(costcore.batch, BASE, {"model.params_b": HugeLen()}, field="model.params_b")
    refused(costcore.monte_carlo, BASE, n=n, field="n")


def test_a_batch_at_the_row_cap_is_accepted_by_its_check():
    # The cap itself is allowed: _expand_columns is the check, without running 5 M variants.
    idx, cols = api._expand_columns({"model.params_b": np.broadcast_to(7.0, (api.MAX_BATCH_ROWS,))})
    assert len(cols[0]) == api.MAX_BATCH_ROWS


GPU_COUNTS = [8, 8.0, np.int64(8), np.int32(8), np.int16(8), np.uint8(8), np.uint64(8), np.float64(8),
              np.float32(8), np.float16(8), np.longdouble(8)]


@pytest.mark.parametrize("gpus", GPU_COUNTS, ids=lambda v: type(v).__name__)
def test_any_numeric_type_gives_the_same_estimate(gpus):
    want = costcore.estimate(BASE).total_usd
    scn = schema.set_path(BASE, "hardware.num_gpus", gpus)
    res = costcore.estimate(scn)
    assert res.total_usd == want
    assert res.scenario["hardware"]["num_gpus"] == 8 and type(res.scenario["hardware"]["num_gpus"]) is int


@pytest.mark.parametrize("make", [list, tuple, np.asarray], ids=["list", "tuple", "array"])
@pytest.mark.parametrize("t", [int, float, np.int64, np.int32, np.uint16, np.float64, np.float32],
                         ids=lambda t: t.__name__)
def test_batch_columns_of_any_numeric_type_give_the_same_totals(t, make):
    want = costcore.batch(BASE, {"hardware.num_gpus": [8, 16, 32]})
    got = costcore.batch(BASE, {"hardware.num_gpus": make([t(8), t(16), t(32)])})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("t", [int, float, np.int64, np.int32, np.float64, np.float32], ids=lambda t: t.__name__)
def test_sensitivity_arguments_of_any_numeric_type_are_accepted_alike(t):
    mc = costcore.monte_carlo(BASE, n=t(200), seed=t(3), budget_usd=t(30000))
    ref = costcore.monte_carlo(BASE, n=200, seed=3, budget_usd=30000)
    np.testing.assert_array_equal(mc.totals, ref.totals)
    assert mc.p_over_budget == ref.p_over_budget
    tor = costcore.tornado(BASE, rel=t(1) / t(4) if t is not int else 0.25)
    assert tor.base_total == costcore.tornado(BASE, rel=0.25).base_total
    sol = costcore.solve_budget(SOLVER_BASE, t(10**7), tokens_per_param=t(20))
    assert sol.total_usd == costcore.solve_budget(SOLVER_BASE, 10**7).total_usd


def test_hostile_objects_are_refused_not_raised():
    for bad in (BadFloat(), BadLen(), BadIter(), BadRepr(), MultiLineRepr(), BadBool(), np.ones((3, 3))):
        refused(costcore.estimate, schema.set_path(BASE, "hardware.num_gpus", bad), field="hardware.num_gpus")
        refused(costcore.batch, BASE, {"hardware.num_gpus": bad})
        refused(costcore.monte_carlo, BASE, n=bad, field="n")
        refused(costcore.tornado, BASE, rel=bad, field="rel")


class RaisingMapping(Mapping):
    """A mapping (not a dict) whose every read raises."""

    def __getitem__(self, key):
        raise Boom("mapping __getitem__")

    def __iter__(self):
        raise Boom("mapping __iter__")

    def __len__(self):
        raise Boom("mapping __len__")


@pytest.mark.parametrize("make", [lambda: BadMapping({"model.params_b": [7.0, 8.0]}), RaisingMapping])
@pytest.mark.parametrize("call", [
    lambda m: costcore.batch("scratch-7b", m),
    lambda m: costcore.monte_carlo("scratch-7b", n=10, dists=m),
    lambda m: costcore.tornado("scratch-7b", ranges=m),
], ids=["batch columns", "Monte Carlo dists", "tornado ranges"])
def test_a_mapping_argument_that_cannot_be_read_is_refused(make, call):
    """Found by the random search above (one run in a few, not under CI's fixed seed): a columns or dists
    mapping whose items() raised let its own exception escape batch and monte_carlo. A dict subclass is read
    with dict's methods (its content), any other mapping inside a guard that refuses it in one sentence."""
    try:
        call(make())  # a dict subclass may answer from its content
    except Exception as err:  # noqa: BLE001 - the point: which type escaped
        check_refusal(err)


@pytest.mark.parametrize("call", [
    lambda v: costcore.heatmap("scratch-7b", "model.active_params_b", v, "model.ffn", [0]),
    lambda v: costcore.sweep("scratch-7b", "model.params_b", v),
    lambda v: costcore.batch("scratch-7b", {"model.params_b": v}),
], ids=["heatmap", "sweep", "batch"])
def test_a_column_of_mixed_objects_whose_conversion_raises_is_refused(call):
    """Found by the unseeded random search: 2**64 beside a float whose __float__ raises makes an object
    column, and converting it ran that __float__, whose exception escaped heatmap, sweep and batch."""
    refused(call, (2**64, BadFloat()))


@pytest.mark.parametrize("pair", [np.array(None, dtype=object), np.array(3.0), np.ones((2, 2))], ids=["0-d object",
                                                                                                "0-d float", "2-d"])
def test_a_tornado_range_that_is_not_a_flat_pair_is_refused(pair):
    """Found by the unseeded random search: a 0-d array as a (low, high) pair let numpy's TypeError escape."""
    refused(costcore.tornado, "scratch-7b", ranges={"model.params_b": pair}, field="ranges.model.params_b")


def test_batch_takes_true_false_for_a_true_false_setting():
    """Found by test_batch_equals_estimate under a loaded CI run: [False] for a bool setting was refused."""
    by_bool = costcore.batch("llama3-8b", {"storage.finished_weights_only": [False, True]})
    by_int = costcore.batch("llama3-8b", {"storage.finished_weights_only": [0, 1]})
    assert (by_bool == by_int).all()
    want = costcore.estimate(schema.set_path(costcore.load_preset("llama3-8b"), "storage.finished_weights_only",
                                             True)).total_usd
    assert by_bool[1].sum() == pytest.approx(want, rel=1e-12)
    with pytest.raises(ScenarioError):
        costcore.batch("llama3-8b", {"model.params_b": [True]})


@pytest.mark.parametrize("value", [np.timedelta64(8, "s"), np.datetime64("2020-01-01")], ids=["timedelta", "datetime"])
def test_numpy_times_are_not_numbers(value):
    """numpy's timedelta64 subclasses its integers; estimate used to raise TypeError on one (found in review)."""
    with pytest.raises(ScenarioError) as info:
        costcore.estimate({"model": {"params_b": value}})
    assert info.value.field == "model.params_b"
    with pytest.raises(ScenarioError):
        costcore.batch("llama3-8b", {"model.params_b": np.array([value], dtype=object)})
    with pytest.raises(ScenarioError):
        costcore.monte_carlo("llama3-8b", n=value)


def test_an_audio_encoder_swept_into_an_image_scenario_counts_its_windows():
    """A batch column of encoders brings each encoder's figures but not the scenario's modality: Whisper (no
    patches) on the default image modality divided by its patch size of 0 (ZeroDivisionError; hypothesis found
    it). An encoder without patches counts its windows: 50 tokens/s x 30 s = 1,500 per pass."""
    scn = {"model": {"params_b": 6.7}, "hardware": {"gpu": "a100-80gb", "num_gpus": 8},
           "stages": {"mm_cpt": {"license_usd_per_item": 0.0}}}
    out = costcore.sweep(scn, "multimodal.encoder", ["whisper-large-v3-encoder", "clip-vit-l-14-336"])
    assert_finite_frame(out, "sweep")
    audio = {**scn, "multimodal": {"modality": "audio", "encoder": "whisper-large-v3-encoder"}}
    assert costcore.estimate(audio).stat("mm_cpt", "gpu_hours") > 0
