"""Every preset's ``estimate --format json`` output is byte-identical to tests/golden/<preset>.json.

The golden files were written before the kernel was split into named parts, so
any refactoring that moves a number (even in the last bit) fails here.
Regenerate with ``python scripts/make_golden.py`` only when a change of the
numbers is intended.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("make_golden", ROOT / "scripts" / "make_golden.py")
make_golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_golden)


def test_every_preset_has_a_golden_file():
    have = sorted(p.stem for p in make_golden.GOLDEN_DIR.glob("*.json"))
    assert have == make_golden.presets()


@pytest.mark.parametrize("preset", make_golden.presets())
def test_preset_json_is_byte_identical(preset):
    want = (make_golden.GOLDEN_DIR / f"{preset}.json").read_text(encoding="utf-8")
    got = make_golden.cli_json(preset)
    assert got == want, f"{preset}: output differs from tests/golden/{preset}.json"
