"""The cost model: the numba kernel, its formulas, feasibility and the numba settings.
"""
