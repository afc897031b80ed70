"""Monte Carlo draws, jitted: Latin hypercube samples of many inputs written straight into one matrix.

The Monte Carlo of :mod:`costcore.analysis.sensitivity` draws a million samples of about twenty inputs.
Drawn with numpy, column by column, the draws took longer than the cost kernel that evaluates them
(a permutation, a jitter, the inverse CDF and a clip per column, each a fresh array). Here every column
is drawn in one pass, the columns in parallel, into the matrix the batch kernel reads.

Random numbers: SplitMix64 (G. L. Steele, D. Lea and C. H. Flood, "Fast splittable pseudorandom number
generators", OOPSLA 2014; the constants of its public-domain reference, S. Vigna's splitmix64.c). Column
``j`` of a call with ``seed`` has its own stream, started from a mix of both, so a sample does not depend on
how many threads drew it, and one seed always gives the same matrix.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

KIND_TRIANGULAR, KIND_UNIFORM, KIND_LOGNORMAL = 0, 1, 2

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_TWO_TO_MINUS_53 = 1.0 / 9007199254740992.0
_U_EDGE = 1e-12  # draws are kept in [1e-12, 1 - 1e-12]: the lognormal's quantile is infinite at 0 and 1

# Acklam's rational approximation of the standard normal quantile (relative error < 1.2e-9; P. J. Acklam,
# "An algorithm for computing the inverse normal cumulative distribution function", 2003; the coefficients
# as published there). numpy has no erfinv and scipy is not a dependency.
_A0, _A1, _A2, _A3, _A4, _A5 = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00)
_B0, _B1, _B2, _B3, _B4 = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                           6.680131188771972e+01, -1.328068155288572e+01)
_C0, _C1, _C2, _C3, _C4, _C5 = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00)
_D0, _D1, _D2, _D3 = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                      3.754408661907416e+00)
_P_LOW = 0.02425


@njit(cache=True, inline="always")
def _mix(z):
    """SplitMix64's output function of a 64-bit state (Steele et al. 2014; splitmix64.c)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, inline="always")
def _uniform(state):
    """(next state, a uniform double in [0, 1) from the top 53 bits of the next output)."""
    state = state + _GOLDEN
    return state, float(_mix(state) >> np.uint64(11)) * _TWO_TO_MINUS_53


@njit(cache=True)
def norm_ppf(u: float) -> float:
    """Standard normal quantile of a probability ``u`` in (0, 1) (Acklam 2003; see above); dimensionless."""
    if u < _P_LOW or u > 1.0 - _P_LOW:
        p = u if u < _P_LOW else 1.0 - u
        q = np.sqrt(-2.0 * np.log(p))
        x = ((((((_C0 * q + _C1) * q + _C2) * q + _C3) * q + _C4) * q + _C5)
             / ((((_D0 * q + _D1) * q + _D2) * q + _D3) * q + 1.0))
        return x if u < _P_LOW else -x
    q = u - 0.5
    r = q * q
    return (((((_A0 * r + _A1) * r + _A2) * r + _A3) * r + _A4) * r + _A5) * q / (
        ((((_B0 * r + _B1) * r + _B2) * r + _B3) * r + _B4) * r + 1.0)


@njit(cache=True)
def ppf(kind: int, a: float, b: float, c: float, u: float) -> float:
    """The inverse CDF at ``u`` in (0, 1) of a distribution in the input's own units.

    ``kind`` KIND_TRIANGULAR: low ``a`` <= mode ``b`` <= high ``c`` (the textbook inverse of the piecewise
    quadratic CDF); KIND_UNIFORM: low ``a`` <= high ``b``; KIND_LOGNORMAL: median ``a`` (> 0) times
    exp(sigma ``b`` x the standard normal quantile).
    """
    if kind == KIND_TRIANGULAR:
        if c - a <= 0.0:
            return b
        if u < (b - a) / (c - a):
            return a + np.sqrt(u * (c - a) * (b - a))
        return c - np.sqrt((1.0 - u) * (c - a) * (c - b))
    if kind == KIND_UNIFORM:
        return a if b <= a else a + u * (b - a)
    return a * np.exp(b * norm_ppf(u)) if b > 0.0 else a


@njit(cache=True)
def _fill_column(out, j, kind, a, b, c, lo, hi, min_nonzero, whole, seed, stratified):
    n = out.shape[1]
    state = _mix(np.uint64(seed) ^ _mix(np.uint64(j + 1) * _GOLDEN))
    order = np.empty(n if stratified else 0, dtype=np.int64)
    if stratified:  # the slices in a random order (Fisher-Yates), one draw inside each
        for i in range(n):
            order[i] = i
        for i in range(n - 1, 0, -1):
            state, r = _uniform(state)
            k = min(int(r * (i + 1)), i)
            order[i], order[k] = order[k], order[i]
    for i in range(n):
        state, r = _uniform(state)
        u = (order[i] + r) / n if stratified else r
        u = min(max(u, _U_EDGE), 1.0 - _U_EDGE)
        x = min(max(ppf(kind, a, b, c, u), lo), hi)
        if 0.0 < x < min_nonzero:
            x = min_nonzero
        if whole:
            x = np.round(x)
        out[j, i] = x


@njit(cache=True, parallel=True)
def _fill(out, kinds, params, lo, hi, min_nonzero, whole, seed, stratified):
    for j in prange(out.shape[0]):
        _fill_column(out, j, kinds[j], params[j, 0], params[j, 1], params[j, 2], lo[j], hi[j], min_nonzero[j],
                     whole[j], seed, stratified)


@njit(cache=True)
def _fill_serial(out, kinds, params, lo, hi, min_nonzero, whole, seed, stratified):
    for j in range(out.shape[0]):
        _fill_column(out, j, kinds[j], params[j, 0], params[j, 1], params[j, 2], lo[j], hi[j], min_nonzero[j],
                     whole[j], seed, stratified)


def draw(kinds, params, lo, hi, min_nonzero, whole, n: int, seed: int, stratified: bool = True) -> np.ndarray:
    """A (k, n) matrix of draws, row j from distribution j, moved into its input's allowed values.

    Parameters
    ----------
    kinds : (k,) int, KIND_TRIANGULAR, KIND_UNIFORM or KIND_LOGNORMAL.
    params : (k, 3) float, each row's ``a, b, c`` in the input's units (see :func:`ppf`).
    lo, hi : (k,) float, the allowed range; a draw outside is clipped to it.
    min_nonzero : (k,) float, a draw between 0 and this (an "auto" zero's smallest set value) becomes it.
    whole : (k,) bool, inputs that take whole numbers: the draw is rounded.
    n : samples per row; seed : int from 0 to 2**63 - 1.
    stratified : True: Latin hypercube (McKay, Beckman & Conover 1979, Technometrics 21(2)), one draw in
        each of ``n`` equal-probability slices, in a random order of its own per row; False: independent.
    """
    from costcore.engine import config  # the lock numba's workqueue layer needs around parallel regions

    kinds = np.ascontiguousarray(kinds, dtype=np.int64)
    params = np.ascontiguousarray(params, dtype=np.float64).reshape(len(kinds), 3)
    lo, hi, min_nonzero = (np.ascontiguousarray(v, dtype=np.float64) for v in (lo, hi, min_nonzero))
    whole = np.ascontiguousarray(whole, dtype=np.bool_)
    out = np.empty((len(kinds), int(n)))
    args = (out, kinds, params, lo, hi, min_nonzero, whole, int(seed), bool(stratified))
    with np.errstate(over="ignore"):  # 64-bit products wrap by design; numpy warns when numba is switched off
        if len(kinds) > 1 and n >= 10_000:
            with config.PARALLEL_LOCK:
                _fill(*args)
        else:
            _fill_serial(*args)
    return out


@njit(cache=True)
def quantiles(kind: int, a: float, b: float, c: float, u: np.ndarray) -> np.ndarray:
    """:func:`ppf` at each probability of ``u`` (an array), in the input's units."""
    out = np.empty(u.shape[0])
    for i in range(u.shape[0]):
        out[i] = ppf(kind, a, b, c, u[i])
    return out


def warm_up() -> None:
    """Compile (or load from the on-disk cache) the parallel and the serial draw and the quantiles once."""
    for rows, n in ((2, 10_000), (1, 2)):
        draw([KIND_LOGNORMAL] * rows, [[1.0, 0.5, 0.0]] * rows, [0.0] * rows, [2.0] * rows, [0.0] * rows,
             [False] * rows, n, 0)
    quantiles(KIND_UNIFORM, 0.0, 1.0, 0.0, np.array([0.5]))
