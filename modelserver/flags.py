"""tensorflow_model_server's command line, for the flags this server implements.

Flags are written as TF Serving writes them (`--rest_api_port=8501`,
`--enable_batching` or `--enable_batching=true`). An unknown flag or bad value is
one line on stderr and exit code 2, like the real binary.
"""
from __future__ import annotations

import argparse
import sys


def _bool(text: str) -> bool:
    low = text.lower()
    if low in ("true", "1", "yes"):
        return True
    if low in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a value >= 0, got {value}")
    return value


def _channel_arguments(text: str) -> tuple:
    """((key, int or str), ...) as TF Serving's parseGrpcChannelArgs reads them; a pair without "=" is
    refused here (TF Serving crashes on it)."""
    out = []
    for item in filter(None, text.split(",")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise argparse.ArgumentTypeError(f"expected key=value pairs separated by commas, got {item!r}")
        try:
            out.append((key, int(value)))
        except ValueError:
            out.append((key, value))
    return tuple(out)


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # noqa: D401 - argparse hook
        sys.stderr.write(f"tensorflow_model_server: error: {message}\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _OneLineParser(prog="tensorflow_model_server", allow_abbrev=False,
                       description="TF-Serving-compatible model server on the venv's TensorFlow runtime")
    flag = p.add_argument
    flag("--port", type=_non_negative, default=8500, help="gRPC port (0: no gRPC server)")
    flag("--grpc_socket_path", default="", help="also serve gRPC on this UNIX socket (relative or absolute path)")
    flag("--grpc_channel_arguments", type=_channel_arguments, default=(),
         help="comma separated gRPC server arguments, key=value (an integer value passes as one), "
              "e.g. grpc.max_connection_age_ms=2000")
    flag("--rest_api_port", type=_non_negative, default=0, help="REST port (0: no REST server)")
    flag("--model_name", default="default", help="name of the model, with --model_base_path")
    flag("--model_base_path", default="", help="directory holding numbered version directories")
    flag("--model_config_file", default="", help="ModelServerConfig text proto (instead of --model_base_path)")
    flag("--model_config_file_poll_wait_seconds", type=_non_negative, default=0)
    flag("--monitoring_config_file", default="", help="MonitoringConfig text proto (Prometheus endpoint)")
    flag("--enable_batching", type=_bool, nargs="?", const=True, default=False)
    flag("--batching_parameters_file", default="", help="BatchingParameters text proto")
    flag("--file_system_poll_wait_seconds", type=_non_negative, default=1,
         help="seconds between polls of the model base path for new versions (0: once)")
    flag("--num_load_threads", type=_non_negative, default=0,
         help="threads loading servables, in parallel; 0 (TF Serving's default): loads run one after another on "
              "the request threads, and can delay requests (serving#1866)")
    flag("--num_unload_threads", type=_non_negative, default=0, help="accepted as TF Serving does; unloads here "
                                                                      "only drop a reference")
    flag("--max_num_load_retries", type=_non_negative, default=5,
         help="times a failed model load is retried (a version still being copied, say)")
    flag("--load_retry_interval_micros", type=_non_negative, default=60 * 1000 * 1000,
         help="wait between load retries, microseconds")
    flag("--tensorflow_intra_op_parallelism", type=_non_negative, default=0)
    flag("--tensorflow_inter_op_parallelism", type=_non_negative, default=0)
    flag("--rest_api_num_threads", type=_non_negative, default=0,
         help="threads running unbatched TF calls (0: number of CPUs)")
    flag("--rest_api_timeout_in_ms", type=_non_negative, default=30000)
    flag("--grpc_max_threads", type=_non_negative, default=0,
         help="threads of the gRPC server, each runs its RPC's TF call (0: 4 x number of CPUs, as TF Serving)")
    flag("--enable_model_warmup", type=_bool, nargs="?", const=True, default=True)
    # What this server cannot do, refused in one line when asked for (TF Serving's defaults otherwise).
    flag("--prefer_tflite_model", type=_bool, nargs="?", const=True, default=False,
         help="not available here: this server runs SavedModels only")
    flag("--enable_profiler", type=_bool, nargs="?", const=True, default=None,
         help="not available here: no profiler service (TF Serving runs one by default; =false is accepted)")
    flag("--enable_signature_method_name_check", type=_bool, nargs="?", const=True, default=False,
         help="Classify/Regress only on signatures whose method_name says so (off by default, as TF Serving)")
    # Extensions of this server (real TF Serving binds every interface and has no limits here).
    flag("--listen_address", default="127.0.0.1", help="address REST and gRPC bind to")
    flag("--rest_api_max_body_bytes", type=_non_negative, default=64 << 20,
         help="larger request bodies are answered 413")
    flag("--rest_api_max_connections", type=_non_negative, default=1024,
         help="REST connections beyond this are answered 503 (never above the open-file limit); also caps concurrent gRPC calls (0: the most the open-file limit allows)")
    flag("--rest_api_read_timeout_ms", type=_non_negative, default=10000,
         help="a client that sends its request slower than this is disconnected")
    flag("--rest_api_max_json_containers", type=_non_negative, default=1 << 20,
         help="a JSON body with more arrays and objects than this is refused INVALID_ARGUMENT before it is parsed")
    flag("--max_tensor_bytes", type=_non_negative, default=128 << 20,
         help="a request tensor larger than this once decoded is refused INVALID_ARGUMENT (TF Serving has no bound)")
    flag("--pid_file", default="", help="write the process id here (local runtime bookkeeping)")
    flag("--version_label", default="", help="TF Serving version this server stands for (logs only)")
    return p


def parse_flags(argv: list[str] | None = None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    if args.model_config_file and args.model_base_path:
        build_parser().error("give --model_config_file or --model_base_path, not both")
    if not args.model_config_file and not args.model_base_path:
        build_parser().error("one of --model_config_file or --model_base_path is required")
    if args.port == 0 and args.rest_api_port == 0 and not args.grpc_socket_path:
        build_parser().error("both --port and --rest_api_port are 0 and no --grpc_socket_path: nothing to serve")
    if args.prefer_tflite_model:
        build_parser().error("--prefer_tflite_model: TensorFlow Lite models cannot be served here (SavedModels only); "
                             "see docs/parity.md")
    if args.enable_profiler:
        build_parser().error("--enable_profiler: this server has no profiler service (TF Serving's is on by "
                             "default); run without the flag or with --enable_profiler=false; see docs/parity.md")
    if args.batching_parameters_file and not args.enable_batching:
        build_parser().error("--batching_parameters_file needs --enable_batching")
    return args
