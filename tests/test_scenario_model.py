"""The validated Scenario: checked once, immutable, carrying where each value came from."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import costcore
from costcore import Scenario, ScenarioError
from costcore.scenario import schema


def test_same_numbers_as_a_dict_for_every_preset():
    for name in costcore.preset_names():
        assert costcore.estimate(Scenario.of(name)).to_dict() == costcore.estimate(name).to_dict()


def test_frozen_and_read_only_vector():
    scn = Scenario.of("llama3-8b")
    with pytest.raises(dataclasses.FrozenInstanceError):
        scn.vector = np.zeros(3)
    with pytest.raises(ValueError):
        scn.vector[0] = 1.0
    with pytest.raises(TypeError):
        scn.provenance["model.params_b"] = "me"


def test_with_value_makes_a_new_scenario_and_leaves_the_old_one():
    a = Scenario.of("llama3-8b")
    b = a.with_value("model.params_b", 13)
    assert a.value("model.params_b") != 13 and b.value("model.params_b") == 13
    assert costcore.estimate(b).total_usd > costcore.estimate(a).total_usd
    with pytest.raises(ScenarioError) as info:
        a.with_value("model.params_b", -1)
    assert info.value.field == "model.params_b"


def test_provenance_preset_link_user_default():
    preset = Scenario.of("llama3-8b")
    assert preset.source_of("model.params_b") == "preset llama3-8b"
    assert preset.source_of("efficiency.sustained_fraction") == "default"
    link = Scenario.of(dict(preset.to_dict(), name="shared"), origin="the link", base=preset)
    assert link.source_of("name") == "the link" and link.source_of("model.params_b") == "preset llama3-8b"
    mine = link.with_value("hardware.num_gpus", 64, origin="you")
    assert mine.source_of("hardware.num_gpus") == "you" and mine.source_of("name") == "the link"


def test_no_revalidation_per_call(monkeypatch):
    """estimate, batch and the sensitivity functions use the Scenario as it is."""
    scn = Scenario.of("alpaca-7b-sft")
    want = costcore.estimate(scn).total_usd

    def boom(*_a, **_k):
        raise AssertionError("validated again")
    monkeypatch.setattr(schema, "validate", boom)
    monkeypatch.setattr(schema, "to_vector", boom)
    assert costcore.estimate(scn).total_usd == want
    out = costcore.batch(scn, {"model.params_b": [float(scn.value("model.params_b")), 13.0]})
    assert out.shape[0] == 2 and out[0].sum() == pytest.approx(want)
    assert costcore.tornado(scn, inputs=["model.params_b"]).base_total == want
    assert len(costcore.sweep(scn, "model.params_b", [7.0, 8.0])) > 0
    assert costcore.heatmap(scn, "model.params_b", [7.0, 8.0], "hardware.num_gpus", [8, 16]).shape == (2, 2)


def test_bad_sources_raise_the_one_exception():
    for bad in (None, 3, [1, 2], "no-such-preset", {"model": {"params_b": "x"}}):
        with pytest.raises(ScenarioError):
            Scenario.of(bad)


@pytest.mark.parametrize("data, path, hint", [
    ({"stages": {"rl": {"prompts": 5}}}, "stages.rl.prompts", "did you mean prompts_per_step?"),
    ({"stages": {"sft": {"lora_r": 8}}}, "stages.sft.lora_r", "did you mean lora_rank?"),
    ({"stages": {"pretraining": {}}}, "stages.pretraining", "did you mean pretrain?"),
    ({"hardware": {"gpus": 8}}, "hardware.gpus", "num_gpus"),
    ({"stages": {"sft": {"zzz": 1}}}, "stages.sft.zzz", None),
])
def test_an_unknown_setting_names_the_near_one(data, path, hint):
    """A misspelt key is refused with the field's path, the closest allowed names when one is near, and the list."""
    with pytest.raises(ScenarioError) as e:
        Scenario.of(data)
    msg = str(e.value)
    assert path in msg and "allowed" in msg
    if hint is None:
        assert "did you mean" not in msg
    else:
        assert hint in msg
