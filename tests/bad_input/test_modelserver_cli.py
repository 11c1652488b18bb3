"""The server's command line: TF Serving's flags; every bad flag or file is one line and exit 2."""
import socket

import pytest
from servers import CONFIGS, TEST_VERSIONS, example_model, free_port, run_modelserver

pytestmark = pytest.mark.integration
V = TEST_VERSIONS[0]


def _file(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def _base(tmp_path):
    return f"--model_base_path={example_model(V)}"


CASES = [
    ("unknown flag", lambda t: ["--grpc_port=8500", _base(t)], "unrecognized arguments: --grpc_port"),
    ("bad bool", lambda t: ["--enable_batching=maybe", _base(t)], "expected true or false"),
    ("negative port", lambda t: ["--rest_api_port=-1", _base(t)], "expected a value >= 0"),
    ("no model", lambda t: ["--rest_api_port=8501"], "--model_config_file or --model_base_path"),
    ("seed's batching syntax", lambda t: [_base(t), "--enable_batching", "--batching_parameters_file="
                                          + _file(t, "b.config", "max_batch_size: 32\n")], "b.config"),
    ("unknown batching field", lambda t: [_base(t), "--enable_batching", "--batching_parameters_file="
                                          + _file(t, "b.config", "max_batch: { value: 3 }\n")], "max_batch"),
    ("zero batch threads", lambda t: [_base(t), "--enable_batching", "--batching_parameters_file="
                                      + _file(t, "b.config", "num_batch_threads { value: 0 }\n")], "positive"),
    ("seed's monitoring syntax", lambda t: [_base(t), "--monitoring_config_file="
                                            + _file(t, "m.config", "prometheus { port: 9090 }\n")], "prometheus"),
    ("missing config file", lambda t: [_base(t), "--monitoring_config_file=/nonexistent/m.config"], "cannot read"),
    ("model config typo", lambda t: ["--model_config_file=" + _file(
        t, "models.config", 'model_config_list { config { name: "m" base_pth: "/x" } }')], "base_pth"),
    # TF Serving's own integration test looks for these words (testBadModelConfig)
    ("model config unparsable", lambda t: ["--model_config_file=" + _file(t, "models.config", "improperly formatted")],
     "Error parsing text-format tensorflow.serving.ModelServerConfig"),
    ("model config without base_path", lambda t: ["--model_config_file=" + _file(
        t, "models.config", 'model_config_list { config { name: "m" } }')], "base_path"),
    ("base path missing", lambda t: ["--model_base_path=/nonexistent/model"], "not a directory"),
    ("base path is a SavedModel", lambda t: [f"--model_base_path={example_model(V) / '1'}"], "numbered version"),
    ("no SavedModel under base path", lambda t: [f"--model_base_path={t}"], "no SavedModel"),
]


@pytest.mark.parametrize("case,argv,needle", CASES, ids=[c[0] for c in CASES])
def test_bad_flags_and_files_exit_2_with_one_line(tmp_path, case, argv, needle):
    proc = run_modelserver(V, [f"--port={free_port()}", *argv(tmp_path)])
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and errors[0].startswith("tensorflow_model_server: error:"), proc.stderr
    assert needle in errors[0]


def test_port_in_use_is_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_modelserver(V, [f"--port={free_port()}", f"--rest_api_port={port}", _base(tmp_path),
                                   f"--monitoring_config_file={CONFIGS / 'monitoring.config'}"])
    assert proc.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port} for REST" in proc.stderr
    assert "Traceback" not in proc.stderr
