"""The package installs: `import costcore` and the `costcore` command work outside the repository root.

scripts/test.sh installs it (`-e .` in requirements-dev.txt); a plain checkout needs `pip install -e .`.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from server_support import NEVER_S  # the one wait limit of the suite (not a speed)

ROOT = Path(__file__).resolve().parent.parent


def test_import_from_another_directory(tmp_path):
    out = subprocess.run([sys.executable, "-c", "import costcore, json; r = costcore.estimate('llama3-8b'); "
                          "print(json.dumps([costcore.__file__, r.total_usd]))"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=NEVER_S, check=False)
    assert out.returncode == 0, out.stderr[-800:] + "\n(install the package: pip install -e .)"
    path, total = json.loads(out.stdout)
    assert Path(path).resolve().is_relative_to(ROOT), path
    assert total > 0


def test_console_command_from_another_directory(tmp_path):
    exe = shutil.which("costcore")
    assert exe, "no costcore command on PATH: pip install -e . (scripts/test.sh does)"
    out = subprocess.run([exe, "estimate", "llama3-8b", "--format", "json"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=NEVER_S, check=False)
    assert out.returncode == 0, out.stderr[-800:]
    assert json.loads(out.stdout)["feasible"] is True
    bad = subprocess.run([exe, "estimate", "no-such-preset"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=NEVER_S, check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
