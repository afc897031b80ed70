"""Settings of the cost core, in one place.

- Numba's on-disk cache (``cache=True``) is keyed on the source file of each
  jitted function, not on the globals it reads. The kernel reads the vector
  layout from :mod:`costcore.schema` (derived from ``data/schema.yaml``), so a
  schema change would silently reuse stale machine code. We therefore put
  the cache in a folder named after a hash of everything the compiled code
  depends on. ``NUMBA_CACHE_DIR`` set by the user wins.
- ``PARALLEL_LOCK`` serializes calls into parallel kernels: numba's default
  ``workqueue`` threading layer is not safe when two threads (two Streamlit
  sessions) run parallel regions at once.
"""
from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import numba

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # costcore/
_DEPENDS_ON = ("scenario/schema.py", "engine/formulas.py", "engine/kernel.py", "engine/layout.py", "data/schema.yaml",
               "data/hardware.yaml")


def layout_hash() -> str:
    h = hashlib.sha256()
    for name in _DEPENDS_ON:
        h.update((PACKAGE_DIR / name).read_bytes())
    h.update(numba.__version__.encode())
    return h.hexdigest()[:16]


CACHE_DIR = os.environ.get("NUMBA_CACHE_DIR") or str(PACKAGE_DIR.parent / ".numba_cache" / layout_hash())
if not os.environ.get("NUMBA_CACHE_DIR"):
    numba.config.CACHE_DIR = CACHE_DIR

PARALLEL_LOCK = threading.Lock()

# Threads for parallel kernels (None = numba's default, the core count).
NUM_THREADS = int(os.environ["COSTCORE_THREADS"]) if os.environ.get("COSTCORE_THREADS") else None
if NUM_THREADS:
    numba.set_num_threads(NUM_THREADS)
