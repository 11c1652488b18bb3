"""Each version's answers against the baseline's: identical, within 1e-5, or differ with the worst request; labels
compare as equal or not; other requests are never compared. The first lines say it when a version differs."""
from analysis import outputs
from analysis.verdict_text import output_lines


def _run(mine: dict, bodies: str = "h") -> dict:
    base = {"bodies": "h", "outputs": {"p": [[[0.5, 0.5]], [[0.25, 0.75]]], "classes": [[["a"]], [["b"]]]}}
    return {"config": {"versions": ["2.9", "2.21"]},
            "outputs": {"2.9": base, "2.21": {"bodies": bodies, "outputs": mine}}}


def test_identical_within_and_differ_are_told_apart_with_the_worst_request():
    same = outputs.rows(_run({"p": [[[0.5, 0.5]], [[0.25, 0.75]]], "classes": [[["a"]], [["b"]]]}))
    assert {r["output"]: r["verdict"] for r in same} == {"p": "identical", "classes": "identical"}
    near = outputs.rows(_run({"p": [[[0.5, 0.5]], [[0.25, 0.750003]]], "classes": [[["a"]], [["b"]]]}))
    assert {r["output"]: r["verdict"] for r in near}["p"] == "within 1e-5"
    far = {r["output"]: r for r in outputs.rows(_run({"p": [[[0.5, 0.5]], [[0.2, 0.8]]], "classes": [[["a"]], [["c"]]]}))}
    assert far["p"]["verdict"] == "differ" and far["p"]["worst_request"] == 1
    assert abs(far["p"]["max_abs"] - 0.05) < 1e-12 and abs(far["p"]["max_rel"] - 0.2) < 1e-12
    assert far["classes"]["verdict"] == "differ: 1 of 2 requests" and far["classes"]["worst_request"] == 1
    lines = output_lines({"outputs": list(far.values()), "baseline_version": "2.9"})
    assert lines == ["**Outputs:** 2.21 answers differently from 2.9 on `classes` (differ: 1 of 2 requests), worst "
                     "request 2.", "**Outputs:** 2.21 answers differently from 2.9 on `p` (differ): max abs 0.05 "
                     "(relative 0.2), worst request 2."]
    assert output_lines({"outputs": same, "baseline_version": "2.9"}) == []


def test_answers_to_other_requests_or_shapes_are_never_called_identical():
    other = outputs.rows(_run({"p": [[[0.5, 0.5]], [[0.25, 0.75]]]}, bodies="other"))
    assert [r["verdict"] for r in other] == ["not comparable: other requests"]
    shape = {r["output"]: r["verdict"] for r in outputs.rows(_run({"p": [[[0.5]], [[0.25]]], "classes": [[["a"]], [["b"]]]}))}
    assert shape["p"] == "differ: another shape or a missing output"


def test_rest_answers_become_arrays_per_output():
    got = outputs._arrays({"predictions": [{"a": [1, 2], "b": 3}, {"a": [4, 5], "b": 6}]})
    assert got["a"].tolist() == [[1, 2], [4, 5]] and got["b"].tolist() == [[3], [6]]
    cls = outputs._arrays({"results": [[["skip", 0.4], ["click", 0.6]]]})
    assert cls["scores"].tolist() == [[0.4, 0.6]] and cls["classes"].tolist() == [["skip", "click"]]
    assert outputs._arrays({"results": [0.5, 0.25]})["outputs"].tolist() == [[0.5], [0.25]]
