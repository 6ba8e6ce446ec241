"""The In-fill report's clauses about the rate and the curve (addon/core/rates.py, addon/core/gate_report.py), and
the scene rate the add-on reads (a standard rate when within 0.1% of one)."""
from __future__ import annotations

from helpers.addon import addon_module

rates = addon_module("core.rates")
gate_report = addon_module("core.gate_report")


def test_a_scene_rate_within_a_tenth_of_a_percent_of_a_standard_rate_is_that_rate():
    assert rates.standard_rate(30.0 / 0.99999) == 30.0   # Blender's BVH importer, Update Scene FPS: 30.0003 fps
    assert rates.standard_rate(24.0) == 24.0 and rates.standard_rate(120.0 / 1.0005) == 120.0
    assert rates.standard_rate(30.0 / 1.001) == 29.97   # NTSC is a rate of its own
    assert rates.standard_rate(27.0) == 27.0 and rates.standard_rate(30.1) == 30.1   # 0.33% off: kept


def test_the_report_says_in_one_line_that_the_fill_used_another_rate():
    named = {"fps": 24.0, "best": 30.0, "gain": 0.18, "pseudo": 6, "length": 15, "error": {"24": 2.8, "30": 2.1},
             "filled_at": 30.0}
    msg = rates.rate_message([None, named])
    assert msg.startswith("; filled at 30 fps: on 6 test gaps cut from your keys it fills 18% closer than at the "
                          "scene's 24") and "keys stay on their frames" in msg and "\n" not in msg
    assert "WARNING" in rates.rate_message([{**named, "filled_at": None}])   # Best Rate off: a warning, as before


def test_the_gate_clause_names_the_curve_the_user_has():
    fit = {"length": 15, "frames": 12, "rot": 0.9, "root": 0.7, "pseudo": 24, "method": "pseudo-gaps",
           "error": {"bezier": [4.4, 3.0], "model": [4.2, 2.9], "gated": [4.1, 2.9]}, "curve": "linear", "blend": 1.0,
           "curve_error": {"curve": [5.8, 4.0], "fill": [4.1, 2.9], "blended": [4.1, 2.9]}}
    msg = gate_report.gate_message([fit])
    assert "the Bezier of your keys 4.4 cm" in msg and "Blender's curve" not in msg
    assert "gaps of 12: the model's fill (on 24 test gaps cut from your keys: fill 4.1 cm / 2.9 deg, your linear " \
           "curve 5.8 cm / 4.0 deg)" in msg
    assert "kept your linear curve" in gate_report.gate_message([{**fit, "blend": 0.0}])
    assert "40% of the way from your constant (stepped) keys" in gate_report.gate_message(
        [{**fit, "blend": 0.4, "curve": "constant"}])
    bez = {**fit, "curve": "bezier", "curve_error": {}}
    assert "Blender's curve 4.4 cm" in gate_report.gate_message([bez]) and "your linear" not in gate_report.gate_message([bez])


def test_the_gate_clause_counts_the_actions_own_frames():
    """A 24 fps action filled through the model's 30 fps: the server's fit says 19 model frames; the report says 15."""
    requests = addon_module("core.requests")
    fits = requests.scene_frames([{"length": 19, "rot": 1.0, "root": 1.0}, {"length": 8, "frames": 6}], 24.0, 30.0)
    assert [f["frames"] for f in fits] == [15, 6]
    assert requests.scene_frames([{"length": 15}], 30.0, 30.0)[0]["frames"] == 15
    assert requests.scene_frames(None, 24.0, 30.0) is None


def test_the_gate_clause_says_a_gap_too_long_for_one_pass_keeps_the_curve():
    fit = {"length": 150, "frames": 120, "rot": 0.0, "root": 0.0, "pseudo": 0, "method": "too-long", "plant": False}
    msg = gate_report.gate_message([fit])
    assert "gaps of 120: longer than the model takes in one pass" in msg and "kept Blender's curve" in msg
    assert "feet not planted" not in msg   # nothing was judged: no reason to give


def test_the_gate_clause_says_how_far_the_feet_were_planted_and_what_planting_cost():
    part = {"length": 15, "rot": 1.0, "root": 1.0, "pseudo": 8, "method": "pseudo-gaps", "plant": True,
            "plant_error": {"strength": 0.5, "unplanted": [2.0, 3.0, 40.0, 5.0], "planted": [1.8, 3.0, 20.0, 5.0]}}
    off = {"length": 30, "rot": 1.0, "root": 1.0, "pseudo": 8, "method": "pseudo-gaps", "plant": False,
           "plant_error": {"strength": 0.0, "unplanted": [4.0, 4.5, 30.0, 9.0], "planted": [3.7, 4.8, 20.0, 9.4]}}
    msg = gate_report.gate_message([part, off])
    assert "gaps of 15: feet planted at 50% strength" in msg
    assert "gaps of 30: feet not planted" in msg and "4.5 -> 4.8 deg" in msg
    assert "feet planted" not in gate_report.gate_message([{**part, "plant_error": {"strength": 1.0}}])
