"""How the report words what the statistics and the search found."""
from analysis.report_text import unstable_above
from analysis.verdict_text import vs_text


def test_an_interval_that_excludes_zero_without_a_verdict_says_why():
    d = {"rel": 0.35, "rel_ci_low": 0.27, "rel_ci_high": 0.43, "verdict": "no significant difference"}
    assert vs_text(d) == "+35% [+27%, +43%] no significant difference (after Holm)"
    assert vs_text({**d, "rel_ci_low": -0.05}) == "+35% [-5%, +43%] no significant difference"
    assert vs_text({**d, "verdict": "slower"}) == "+35% [+27%, +43%] slower"
    assert vs_text({"rel": None, "verdict": "too few repeats"}) == "too few repeats"


def test_max_stable_qps_names_the_rate_that_failed_above_it():
    probes = [{"rate": 100.0, "stable": True}, {"rate": 547.7, "stable": False}, {"rate": 234.0, "stable": True},
              {"rate": 358.0, "stable": True}, {"rate": 90.0, "stable": False}]
    assert unstable_above({"max_stable_rate": 358.0, "probes": probes}) == " (unstable at 548/s)"
    # every probe held: nothing above the maximum failed, so nothing is claimed about it
    assert unstable_above({"max_stable_rate": 358.0, "probes": probes[:1] + probes[2:4]}) == ""
    assert unstable_above({"max_stable_qps": None, "probes": probes[1:2]}) == ""
