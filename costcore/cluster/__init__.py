"""Shared cluster: many projects on pools of reserved GPUs (issue 18).

* :mod:`costcore.cluster.portfolio` reads and validates a portfolio file (pools, teams, projects);
  light (no numba, no pandas), so the CLI refuses a bad file fast;
* :mod:`costcore.cluster.jobs` turns each project's stages into jobs from ``costcore.api.estimate``
  (estimates cached per project: the scheduling knobs never change them);
* :mod:`costcore.cluster.kernel` is the numba scheduler (Kueue ClusterQueues in one cohort per pool);
* :mod:`costcore.cluster.rules` holds the cluster's own rules (lost work, latest start, cent allocation);
* :mod:`costcore.cluster.results` reads the schedule into per-project, per-team and attribution tables;
* :mod:`costcore.cluster.focus` exports FOCUS 1.x and plain CSV; :mod:`costcore.cluster.cli` the command.

Typical use::

    from costcore.cluster import portfolio, results
    pf = portfolio.load("cluster-quarter")
    model = results.ClusterModel(pf)          # estimates every project once
    res = model.run()                         # schedule + results (what-if: model.run(pool_gpus=...))
    res.to_json()["total_usd"]
"""
