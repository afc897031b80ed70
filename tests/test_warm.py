"""``python -m costcore warm`` compiles what the app runs: after it, opening every page compiles nothing.

A kernel called with an argument type warm_up never used (a read-only scenario vector, an array where
warm_up passed a float) makes numba compile that kernel and everything it calls again on the page's
first use: ~15 s of a blank page after an install (found 2026-12-06; benchmarks/bench_cold_start.py
times the first start). The check is on numba's dispatchers, not on the clock: in one process the warm
command runs, every compiled signature is noted, every page runs in AppTest, and no dispatcher may have
gained a signature.
"""
from __future__ import annotations

import subprocess
import sys

from shared import ROOT
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)

CHECK = r"""
import contextlib, io, glob, sys
from numba.core.registry import CPUDispatcher
from costcore.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as said:
    assert main(["warm"]) == 0
assert "kernels ready" in said.getvalue(), said.getvalue()
from costcore.engine import kernel, layout, formulas
from costcore.cluster import kernel as cluster_kernel
MODS = (kernel, layout, formulas, cluster_kernel)

def signatures():
    return {(m.__name__, n): set(map(str, f.signatures)) for m in MODS for n, f in vars(m).items()
            if isinstance(f, CPUDispatcher)}

before = signatures()
from streamlit.testing.v1 import AppTest
for page in sorted(glob.glob("pages/*.py")):
    if page.endswith(("common.py", "__init__.py")):
        continue
    at = AppTest.from_file("app.py", default_timeout=float(sys.argv[1]))
    at.switch_page(page).run()
    assert not at.exception, (page, at.exception)
after = signatures()
new = {k: sorted(after[k] - before.get(k, set())) for k in after if after[k] - before.get(k, set())}
print(new)
sys.exit(1 if new else 0)
"""


def test_after_warm_no_page_compiles_a_kernel():
    got = subprocess.run([sys.executable, "-c", CHECK, str(NEVER_S)], cwd=ROOT, capture_output=True, text=True, timeout=NEVER_S)
    assert got.returncode == 0, f"kernels compiled after warm (name: new signatures): {got.stdout[-3000:]}" \
                                f"{got.stderr[-3000:]}"
