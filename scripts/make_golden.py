"""Regenerate tests/golden/<preset>.json: the output of
``python -m costcore estimate <preset> --format json`` for every preset in presets/.

    python scripts/make_golden.py          # rewrite the golden files
    python scripts/make_golden.py --check  # exit 1 if any differs (what tests/test_golden.py asserts)

Only regenerate when a change of the numbers is intended, and say why in the commit.
"""
from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GOLDEN_DIR = ROOT / "tests" / "golden"


def presets() -> list[str]:
    return sorted(p.stem for p in (ROOT / "presets").glob("*.yaml"))


def cli_json(preset: str) -> str:
    """What ``python -m costcore estimate PRESET --format json`` prints, byte for byte."""
    from costcore.cli import main as cli
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli.main(["estimate", preset, "--format", "json"])
    if rc != 0:
        raise RuntimeError(f"estimate {preset} exited with {rc}")
    return buf.getvalue()


def main(argv=None) -> int:
    check = "--check" in (argv if argv is not None else sys.argv[1:])
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    bad = []
    for name in presets():
        path = GOLDEN_DIR / f"{name}.json"
        text = cli_json(name)
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                bad.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if bad:
        print("differs from its golden file: " + ", ".join(bad))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
