"""The sample data set of the actuals tests, generated once per test session (not a test module)."""
from __future__ import annotations

import functools
import tempfile
from pathlib import Path


@functools.lru_cache(maxsize=4)
def sample_files(seed: int = 7) -> tuple[Path, dict]:
    """(directory, truth) of costcore.actuals.sample written with ``seed`` into a session temp dir."""
    from costcore.actuals import sample
    out = Path(tempfile.mkdtemp(prefix=f"costcore-actuals-{seed}-"))
    return out, sample.write_sample(out, seed=seed)
