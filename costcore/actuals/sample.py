"""The sample data set: a FOCUS bill, a run CSV and sacct output of one made-up organisation.

``write_sample(out_dir, seed=7)`` writes ``focus.csv``, ``runs.csv``, ``sacct.txt`` and ``truth.json``
(the injected anomalies, the true efficiency factor and the exact BilledCost sums). Everything is
drawn from one seeded generator, so the same seed gives byte-identical files.

How it is made
    Four projects each spend a steady amount a day on GPUs, storage and network (times a lognormal
    noise of sigma ``NOISE_SIGMA``), plus untagged support charges. Into these daily series go
    ``n_anomalies`` known anomalies: one-day spikes (x2.5 to x4) and drifts (x1.7 to x2.2 for three
    to five days). Each day's amount is split over the runs active that day (GPU), the checkpoints
    of the project's first and last two runs (storage: those of runs that ended over
    ``RETENTION_DAYS`` ago are orphaned), idle reserved capacity (platform team, no run) and ``pieces`` billing rows. Runs
    chain one after another per project; some fail, some are cancelled, some repeat an earlier
    run's configuration. Pre-training runs carry model size, tokens and GPU type, and their
    GPU-hours are the planner's own estimate divided by ``TRUE_EFFICIENCY`` (times a small noise),
    so ``validate --db`` can recover the factor. Money is written with 6 decimals and kept exact.
"""
from __future__ import annotations

import csv
import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import numpy as np

START = dt.date(2025, 1, 6)
DAYS = 120
NOISE_SIGMA = 0.06
RETENTION_DAYS = 30
TRUE_EFFICIENCY = 0.8
PLAN_PRESET = "llama3-8b"
PROJECTS = {  # project: team, GPU, GPU $/h, base $/day of GPU, storage, network, task type, stages per version
    "atlas": ("research", "H100 SXM", 2.70, 9000.0, 250.0, 120.0, "chat", ("pretrain", "sft", "dpo", "eval")),
    "beacon": ("research", "H100 SXM", 2.70, 6000.0, 150.0, 60.0, "code", ("pretrain", "sft", "eval")),
    "cobalt": ("product", "A100 80GB", 1.60, 2500.0, 80.0, 40.0, "support-bot", ("sft", "dpo", "eval")),
    "delta": ("platform", "A100 80GB", 1.60, 1200.0, 40.0, 20.0, "benchmark", ("eval",)),
}
RESOURCES = {"GPU": ("Compute", "GPU Cloud Compute", "GPU-Hours"), "Storage": ("Storage", "Object Storage", "GB-Month"),
             "Network": ("Networking", "Data Transfer", "GB")}
SUPPORT_USD_PER_DAY = 90.0
IDLE_SHARE = {"delta": 0.12}  # reserved capacity no run used
SACCT_PROJECTS = ("cobalt", "delta")  # their runs come from the cluster's scheduler, the others from a run CSV
FOCUS_HEADER = ("BillingPeriodStart", "ChargePeriodStart", "ChargePeriodEnd", "BilledCost", "EffectiveCost",
                "ListCost", "BillingCurrency", "ServiceCategory", "ServiceName", "ResourceId", "ResourceType", "SkuId",
                "ConsumedQuantity", "ConsumedUnit", "Tags")


def _pretrain_shape(rng, gpus: int, days: float) -> tuple[float, float, float]:
    """(params_b, tokens_b, actual GPU-hours) of a pre-training run lasting about ``days`` on ``gpus`` GPUs."""
    from costcore import api
    from costcore.validation import runs as vruns
    params = float(rng.choice([0.5, 1.0, 1.5, 3.0]))
    scn = {"name": "probe", "model": {"params_b": params, "active_params_b": params},
           "hardware": {"gpu": "h100-80gb", "num_gpus": gpus}, "stages": {"pretrain": {"tokens_b": 100.0,
                                                                                       "seq_len": 4096}}}
    h100 = vruns.predicted_figure(api.estimate(scn), "GPU-hours")
    tokens = round(100.0 * days * 24 * gpus * TRUE_EFFICIENCY / h100, 1)
    scn["stages"]["pretrain"]["tokens_b"] = tokens
    predicted = vruns.predicted_figure(api.estimate(scn), "GPU-hours")
    return params, tokens, predicted / TRUE_EFFICIENCY * float(np.exp(rng.normal(0.0, 0.05)))


def _runs(rng) -> list[dict]:
    """Runs of every project, chained from START to past the last day."""
    runs, n = [], 0
    end_all = dt.datetime.combine(START, dt.time()) + dt.timedelta(days=DAYS)
    for project, (team, gpu, _, _, _, _, task, stages) in PROJECTS.items():
        t = dt.datetime.combine(START, dt.time()) + dt.timedelta(hours=float(rng.uniform(0, 20)))
        version, prev_config = 1, None
        while t < end_all:
            for stage in stages:
                n += 1
                gpus = int(rng.choice([64, 128])) if stage == "pretrain" else int(rng.choice([8, 16, 32]))
                run = {"run_id": f"r{n:04d}", "project": project, "team": team, "model_version": f"{project}-v{version}",
                       "task_type": task, "stage": stage, "gpu_type": gpu, "gpu_count": gpus, "params_b": "",
                       "tokens_b": "", "eval_score": ""}
                if stage == "pretrain":
                    params, tokens, gpu_h = _pretrain_shape(rng, gpus, float(rng.uniform(5, 10)))
                    run.update(params_b=params, tokens_b=tokens)
                    hours = gpu_h / gpus
                else:
                    hours = float(rng.uniform(24, 96))
                u = rng.uniform()
                run["status"] = "failed" if u < 0.12 else "cancelled" if u < 0.17 else "completed"
                if run["status"] != "completed" and stage == "pretrain":
                    hours *= float(rng.uniform(0.2, 0.6))
                config = f"{project}-{stage}-v{version}-{n}"
                if prev_config and run["status"] == "completed" and rng.uniform() < 0.12:
                    config = prev_config  # the same experiment run again
                run["config"] = config
                prev_config = config if run["status"] == "completed" else prev_config
                if stage == "eval" and run["status"] == "completed":
                    run["eval_score"] = round(45 + 25 * (1 - 0.75 ** version) + float(rng.normal(0, 0.8)), 2)
                run["start"], run["end"] = t, t + dt.timedelta(hours=hours)
                runs.append(run)
                t = run["end"] + dt.timedelta(hours=float(rng.uniform(0.5, 6)))
            version += 1 if len(stages) > 1 or n % 8 == 0 else 0
    return runs


def _anomalies(rng, n: int) -> dict:
    """{(project, resource, day index): multiplier} of ``n`` spikes and drifts, spread over the series."""
    series = [(p, r) for p in PROJECTS for r in RESOURCES]
    out, events = {}, 0
    busy = {s: [] for s in series}
    while events < n:
        s = series[int(rng.integers(len(series)))]
        start = int(rng.integers(21, DAYS - 6))
        length = 1 if rng.uniform() < 0.6 else int(rng.integers(3, 6))
        if any(abs(start - b) < 25 for b in busy[s]):
            continue
        busy[s].append(start)
        mult = float(rng.uniform(2.5, 4.0)) if length == 1 else float(rng.uniform(1.7, 2.2))
        for d in range(start, start + length):
            out[(s[0], s[1], d)] = mult
        events += 1
    return out


def _split_micro(rng, total_micro: int, k: int) -> list[int]:
    """``total_micro`` (millionths of a dollar) split into ``k`` positive-ish integer pieces summing exactly."""
    if k <= 1:
        return [total_micro]
    w = rng.uniform(0.5, 1.5, k)
    parts = np.floor(w / w.sum() * total_micro).astype(np.int64)
    parts[-1] += total_micro - int(parts.sum())
    return [int(x) for x in parts]


def _money(micro: int) -> str:
    sign = "-" if micro < 0 else ""
    m = abs(micro)
    return f"{sign}{m // 1_000_000}.{m % 1_000_000:06d}"


def _day_targets(day: dt.date, project: str, resource: str, runs: list[dict]) -> list[tuple[dict | None, float, str]]:
    """Who a project's resource spend of one day goes to: [(run or None, weight, resource id)]."""
    t0 = dt.datetime.combine(day, dt.time())
    t1 = t0 + dt.timedelta(days=1)
    mine = [r for r in runs if r["project"] == project]
    if resource == "GPU":
        out = []
        for r in mine:
            overlap = (min(r["end"], t1) - max(r["start"], t0)).total_seconds()
            if overlap > 0:
                out.append((r, overlap * r["gpu_count"], f"gpu-{project}-{r['run_id']}"))
        if not out:  # between runs: the reservation idles
            return [(None, 1.0, f"reservation-{project}")]
        idle = IDLE_SHARE.get(project, 0.0)
        if idle:
            s = sum(w for _, w, _ in out)
            out.append((None, s * idle / (1 - idle), f"reservation-{project}"))
        return out
    if resource == "Storage":
        started = [r for r in mine if r["start"] < t1]
        kept = started[:1] + started[-2:] if len(started) > 2 else started  # the first run's checkpoints never go
        return [(r, 1.0, f"bucket-{project}-{r['run_id']}") for r in kept] or [(None, 1.0, f"bucket-{project}")]
    active = [r for r in mine if r["start"] < t1 and r["end"] > t0]
    return [(r, 1.0, f"net-{project}") for r in active] or [(None, 1.0, f"net-{project}")]


def _tags(run: dict | None, project: str) -> str:
    compact = {"separators": (",", ":")}
    if run is None:
        return json.dumps({"project": project, "team": PROJECTS[project][0]}, **compact)
    return json.dumps({k: run[k] for k in ("project", "team", "model_version", "task_type", "stage", "run_id")},
                      **compact)


def _focus_rows(rng, runs, anomalies, pieces: int):
    """Yield (FOCUS row, project, resource type, day index, micro-dollars) for every billing line."""
    for d in range(DAYS):
        day = START + dt.timedelta(days=d)
        stamp, stamp_end = f"{day.isoformat()}T00:00:00Z", f"{(day + dt.timedelta(days=1)).isoformat()}T00:00:00Z"
        period = f"{day.replace(day=1).isoformat()}T00:00:00Z"
        for project, spec in PROJECTS.items():
            rate = spec[2]
            for res, base in zip(RESOURCES, spec[3:6]):
                usd = base * float(np.exp(rng.normal(0.0, NOISE_SIGMA))) * anomalies.get((project, res, d), 1.0)
                targets = _day_targets(day, project, res, runs)
                wsum = sum(w for _, w, _ in targets)
                for run, w, rid0 in targets:
                    for k, micro in enumerate(_split_micro(rng, int(round(usd * w / wsum * 1e6)), pieces)):
                        rid = rid0 if pieces == 1 else f"{rid0}-{k}"  # one line per resource of the day
                        cat, svc, unit = RESOURCES[res]
                        qty = micro / 1e6 / rate if res == "GPU" else micro / 1e6 / (0.023 if res == "Storage" else 0.05)
                        yield ((period, stamp, stamp_end, _money(micro), _money(micro), _money(int(micro * 1.25)), "USD",
                                cat, svc, rid, res, f"sku-{res.lower()}-{spec[1].split()[0].lower()}", f"{qty:.6f}",
                                unit, _tags(run, project)), project, res, d, micro)
        micro = int(round(SUPPORT_USD_PER_DAY * float(np.exp(rng.normal(0.0, NOISE_SIGMA))) * 1e6))
        yield ((period, stamp, stamp_end, _money(micro), _money(micro), _money(micro), "USD", "Other", "Support",
                "support-plan", "Support", "sku-support", "1.000000", "Day", ""), "unattributed", "Support", d, micro)


def _write_runs(out: Path, runs: list[dict]) -> None:
    fields = ("run_id", "name", "project", "team", "model_version", "task_type", "stage", "gpu_type", "gpu_count",
              "start", "end", "status", "config", "params_b", "tokens_b", "eval_score")
    with open(out / "runs.csv", "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(fields)
        for r in runs:
            if r["project"] in SACCT_PROJECTS:
                continue
            row = dict(r, name=f"{r['project']}-{r['stage']}", start=r["start"].isoformat(timespec="seconds"),
                       end=r["end"].isoformat(timespec="seconds"))
            w.writerow([row[f] for f in fields])


def _elapsed(td: dt.timedelta) -> str:
    s = int(td.total_seconds())
    d, s = divmod(s, 86400)
    return (f"{d}-" if d else "") + f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _write_sacct(out: Path, runs: list[dict]) -> None:
    states = {"completed": "COMPLETED", "failed": "FAILED", "cancelled": "CANCELLED by 1001"}
    lines = ["JobID|JobName|Account|Partition|AllocTRES|Elapsed|Start|End|State|Comment"]
    for i, r in enumerate(x for x in runs if x["project"] in SACCT_PROJECTS):
        jid = 40000 + i
        tres = f"billing={r['gpu_count'] * 8},cpu={r['gpu_count'] * 8},gres/gpu={r['gpu_count']},node={max(1, r['gpu_count'] // 8)}"
        comment = ";".join(f"{k}={r[k]}" for k in ("run_id", "team", "model_version", "task_type", "stage", "config"))
        if r["eval_score"] != "":
            comment += f";eval_score={r['eval_score']}"
        start, end = r["start"].isoformat(timespec="seconds"), r["end"].isoformat(timespec="seconds")
        lines.append(f"{jid}|{r['project']}-{r['stage']}|{r['project']}|a100|{tres}|{_elapsed(r['end'] - r['start'])}|"
                     f"{start}|{end}|{states[r['status']]}|{comment}")
        lines.append(f"{jid}.batch|batch|{r['project']}|a100|cpu=8|{_elapsed(r['end'] - r['start'])}|{start}|{end}|"
                     f"{states[r['status']].split()[0]}|")
    (out / "sacct.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_sample(out_dir, seed: int = 7, pieces: int = 1, n_anomalies: int = 14, focus_only: bool = False) -> dict:
    """Write the sample files into ``out_dir`` and return the truth (also written to truth.json).

    ``pieces``: billing rows per (day, project, resource, run) (1 gives ~2,600 rows, under 1 MB; ~390 gives a
    million). Returns {"files", "anomalies": [{"date", "project", "resource_type"}], "billed_usd",
    "by_project_usd", "true_efficiency", "plan"}; the sums are exact decimal strings.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    runs = _runs(rng)
    anomalies = _anomalies(rng, n_anomalies)
    total, by_project = 0, {}
    with open(out / "focus.csv", "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(FOCUS_HEADER)
        for row, project, _, _, micro in _focus_rows(rng, runs, anomalies, pieces):
            w.writerow(row)
            total += micro
            by_project[project] = by_project.get(project, 0) + micro
    files = [out / "focus.csv"]
    if not focus_only:
        _write_runs(out, runs)
        _write_sacct(out, runs)
        files += [out / "runs.csv", out / "sacct.txt"]
    truth = {"files": [str(f) for f in files], "plan": PLAN_PRESET, "true_efficiency": TRUE_EFFICIENCY,
             "anomalies": [{"date": (START + dt.timedelta(days=d)).isoformat(), "project": p, "resource_type": r}
                           for (p, r, d) in sorted(anomalies, key=lambda k: (k[2], k[0], k[1]))],
             "billed_usd": str(Decimal(total) / Decimal(1_000_000)),
             "by_project_usd": {p: str(Decimal(v) / Decimal(1_000_000)) for p, v in sorted(by_project.items())}}
    (out / "truth.json").write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    return truth
