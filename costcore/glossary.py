"""The glossary of terms (costcore/data/glossary.yaml), read with yaml.safe_load."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

FILE = Path(__file__).resolve().parent / "data" / "glossary.yaml"


@lru_cache(maxsize=1)
def _load() -> tuple:
    data = yaml.safe_load(FILE.read_text(encoding="utf-8"))
    return tuple(dict(t) for t in data["terms"])


def terms() -> list[dict]:
    """Each term as {term, means, formula, source}, in the file's order."""
    return [dict(t) for t in _load()]
