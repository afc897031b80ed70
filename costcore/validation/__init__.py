"""Predicted against published runs, and the calibration of the default utilization model.
"""
from __future__ import annotations

import functools
from pathlib import Path

import yaml


@functools.lru_cache(maxsize=None)
def _runs_file(path: Path) -> dict:
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)["runs"]


def runs_of(path: Path) -> dict[str, dict]:
    """The ``runs`` mapping of a data file of public runs (read once), as fresh copies a caller may change."""
    return {k: yaml.safe_load(yaml.safe_dump(v)) for k, v in _runs_file(path).items()}
