"""Plan vs actual: imported bills and job records, and the review of them against a plan.

``store`` (the DuckDB file, its versioned schema and migrations, Ibis connections to a warehouse),
``importers`` (FOCUS 1.x billing CSV, Slurm ``sacct --parsable2``, a plain CSV of runs), ``queries``
(the review, written once as Ibis expressions), ``anomalies`` (rolling median and MAD of daily
spend), ``report`` (the figures the CLI prints and the Review page draws), ``efficiency`` (the
organisation's measured efficiency factor, fitted on its own runs), ``sample`` (the generated sample
data set) and ``cli`` (``python -m costcore actuals ...``). docs/actuals.md describes all of it.

Heavy modules (duckdb, ibis, numba) load only when a command needs them.
"""
