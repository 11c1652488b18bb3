"""The op table names ops by what they compute, whatever kernel a release and a CPU pick for them:
oneDNN (on by default in 2.9 only on CPUs with AVX512_VNNI, BF16 or AMX) runs MatMul as
_MklNativeFusedMatMul and Softmax as _MklSoftmax. The traced test runs with oneDNN off and on, so both
paths are covered on any x86 machine, and asserts what the runtime itself reported."""
import pytest
from servers import TEST_VERSIONS, example_model, version_python

from analysis import optable


@pytest.mark.parametrize("kernel, op", [
    ("MatMul", "MatMul"), ("_MklNativeFusedMatMul", "MatMul"), ("_FusedMatMul", "MatMul"), ("_MklMatMul", "MatMul"),
    ("_MklSoftmax", "Softmax"), ("_MklNativeConv2D", "Conv2D"), ("_FusedConv2D", "Conv2D"),
    ("_MklNativeFusedConv2D", "Conv2D"), ("_MklFusedBatchMatMulV2", "BatchMatMulV2"),
    ("FusedBatchNormV3", "FusedBatchNormV3"), ("_MklNativeFusedBatchNormV3", "FusedBatchNormV3"),
    ("_MklToTf", "_MklToTf"), ("_Arg", "_Arg"), ("_Retval", "_Retval"),
])
def test_a_kernel_counts_as_the_op_it_computes(kernel, op):
    assert optable.op_identity(kernel) == op


def test_a_rename_between_versions_is_one_op_with_its_kernels_beside_it():
    run = {"config": {"rows": [32]}, "optrace": {
        "a": {"rows": {"32": {"op_us": {"Softmax": [10.0, 11.0, 9.0], "MatMul": [50.0, 52.0, 51.0]},
                              "traced_us_per_call": [80.0] * 3, "untraced_us_per_call": [60.0] * 3}}},
        "b": {"rows": {"32": {"op_us": {"_MklSoftmax": [60.0, 61.0, 59.0], "_MklNativeFusedMatMul": [49.0, 50.0, 51.0]},
                              "traced_us_per_call": [130.0] * 3, "untraced_us_per_call": [110.0] * 3}}}}}
    tests = []
    rows = optable.table(run, ["a", "b"], tests)
    ops = [(r["op"], r["version"], r["kernels"]) for r in rows if "kernels" in r]
    assert ops == [("MatMul", "a", ["MatMul"]), ("MatMul", "b", ["_MklNativeFusedMatMul"]),
                   ("Softmax", "a", ["Softmax"]), ("Softmax", "b", ["_MklSoftmax"])]
    softmax = next(r for r in rows if r["op"] == "Softmax" and r["version"] == "b")
    assert softmax["vs_baseline"]["diff"] == pytest.approx(50.0) and len(tests) == 2


@pytest.mark.integration
@pytest.mark.parametrize("onednn", ["0", "1"])
def test_the_traced_example_model_spends_most_in_matmul_with_onednn_off_and_on(onednn):
    v = TEST_VERSIONS[0]
    got = optable.trace_one(version_python(v), example_model(v) / "1", [32], 100, None,
                            (("onednn", onednn),))
    kernels = got["rows"]["32"]["op_us"]
    ops, names = optable.grouped({k: [us] for k, us in kernels.items()})
    top = max(ops, key=lambda op: ops[op][0])
    assert top == "MatMul", kernels  # the example model is a Dense stack: its MatMuls take most of the time
    renamed = [k for k in names["MatMul"] if k != "MatMul"]
    # what the runtime reported: oneDNN off keeps TF's own kernel; on, every MatMul runs as a oneDNN kernel
    assert (renamed == []) if onednn == "0" else (renamed and all(k.startswith("_Mkl") for k in renamed)), kernels
