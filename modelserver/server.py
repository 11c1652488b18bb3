"""Wire the model server together and run it until SIGTERM/SIGINT."""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from fileio.atomic import write_atomic
from modelserver import configs
from modelserver.flags import parse_flags
from modelserver.manager import ModelManager, ModelPathError, ModelSpec, check_base_path

log = logging.getLogger("modelserver")
# A SIGTERM ends the process within this bound whatever is running: the graceful steps (gRPC grace 2 s, REST
# shutdown 2 s) take about 3 s under load (tests/bad_input/test_shutdown.py), but a TF call or a model load in
# a pool thread is joined at exit and has no bound of its own. A second SIGTERM/SIGINT exits at once.
SHUTDOWN_GRACE_S = 10.0


def _exit_now(why: str, code: int) -> None:
    log.error("%s; exiting without finishing the shutdown", why)
    logging.shutdown()
    os._exit(code)


def stop_on_signals(loop, stopping: asyncio.Event) -> None:
    def on_signal(signum: int) -> None:
        if stopping.is_set():
            _exit_now(f"{signal.Signals(signum).name} again", 128 + signum)
        stopping.set()
        timer = threading.Timer(SHUTDOWN_GRACE_S, _exit_now, (f"shutdown took over {SHUTDOWN_GRACE_S:g} s", 1))
        timer.daemon = True  # still runs while the interpreter joins pool threads at exit
        timer.start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)


class StartupError(Exception):
    """One line for the user; the process exits 2."""


def model_specs(args) -> list:
    if args.model_config_file:
        cfg = configs.load_model_server_config(args.model_config_file)
        return [ModelSpec.from_proto(c) for c in cfg.model_config_list.config]
    return [ModelSpec(args.model_name, os.path.abspath(args.model_base_path))]


def _check_port_free(host: str, port: int, what: str) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise StartupError(f"cannot listen on {host}:{port} for {what}: {e.strerror}") from None


async def serve(args) -> None:

    from modelserver.batching import BatchingRunner, DirectRunner
    from modelserver.grpc_api import build_server
    from modelserver.guard import ConnectionGuard
    from modelserver.metrics import ServingMetrics
    from modelserver.predict import PredictAPI
    from modelserver import rest as rest_module
    from modelserver.rest import RestAPI, build_server as build_rest

    from modelserver import inference, tensors

    tensors.MAX_TENSOR_BYTES = args.max_tensor_bytes
    inference.CHECK_METHOD_NAME = args.enable_signature_method_name_check
    rest_module.MAX_JSON_CONTAINERS = args.rest_api_max_json_containers
    import tensorflow as tf  # the metrics page's shape depends on the release (batch size histogram)

    metrics = ServingMetrics(tf.__version__)
    metrics_path = configs.load_monitoring(args.monitoring_config_file)
    batching = configs.load_batching(args.batching_parameters_file) if args.enable_batching else None
    specs = model_specs(args)
    threads = args.rest_api_num_threads or os.cpu_count() or 1
    direct = DirectRunner(threads, metrics)
    runner = BatchingRunner(batching, metrics, direct) if batching else direct
    # TF Serving's --num_load_threads: 0 loads one servable at a time where requests run; N, N at a time on a pool
    # of their own
    loads = ThreadPoolExecutor(args.num_load_threads, thread_name_prefix="load") if args.num_load_threads else None
    manager = ModelManager(specs, metrics, warmup=args.enable_model_warmup,
                           poll_wait_s=args.file_system_poll_wait_seconds, executor=loads or direct.pool,
                           parallel_loads=args.num_load_threads,
                           max_load_retries=args.max_num_load_retries,
                           retry_interval_s=args.load_retry_interval_micros / 1e6, session_config=session_config(args))
    try:
        await manager.start()
    except ModelPathError as e:
        raise StartupError(str(e)) from None
    watcher = None
    if args.model_config_file and args.model_config_file_poll_wait_seconds > 0:
        from modelserver.reload import watch

        watcher = asyncio.ensure_future(watch(manager, args.model_config_file,
                                              args.model_config_file_poll_wait_seconds))
    api = PredictAPI(manager, runner, metrics)

    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    stop_on_signals(loop, stopping)

    grpc_server = site = None
    addresses = ([f"{args.listen_address}:{args.port}"] if args.port else []) + \
        ([f"unix:{args.grpc_socket_path}"] if args.grpc_socket_path else [])
    if addresses:
        try:
            grpc_server = build_server(api, manager, metrics, addresses, args.rest_api_max_body_bytes,
                                       args.rest_api_max_connections,
                                       args.grpc_max_threads or 4 * (os.cpu_count() or 1), args.grpc_channel_arguments)
        except (OSError, RuntimeError) as e:  # grpc raises RuntimeError("Failed to bind ...") in newer releases
            raise StartupError(f"cannot serve gRPC on {' and '.join(addresses)}: {e}") from None
        grpc_server.start()
        for a in addresses:
            log.info("Running gRPC ModelServer at %s ...", a)
    if args.rest_api_port:
        read_timeout_s = args.rest_api_read_timeout_ms / 1000
        rest = RestAPI(api, manager, metrics, metrics_path, read_timeout_s, args.rest_api_timeout_in_ms)
        guard = ConnectionGuard(None, raise_open_file_limit(args.rest_api_max_connections), read_timeout_s)
        rest_server = build_rest(rest, args.rest_api_max_body_bytes, guard.wrap, access_log=None, keepalive_timeout=75)
        guard.factory = rest_server
        # Our own listener instead of web.TCPSite, so every connection passes the guard.
        site = await loop.create_server(guard, args.listen_address, args.rest_api_port, backlog=1024,
                                        reuse_address=True)
        guard.start()
        log.info("Exporting HTTP/REST API at %s:%d ...", args.listen_address, args.rest_api_port)
    if args.pid_file:
        write_atomic(args.pid_file, f"{os.getpid()}\n")

    await stopping.wait()
    log.info("shutting down")
    if grpc_server:
        await loop.run_in_executor(None, lambda: grpc_server.stop(grace=2).wait())
    if site:
        site.close()
        guard.stop()
        await rest_server.shutdown(2.0)
    if watcher:
        watcher.cancel()
    await manager.stop()
    runner.close()
    direct.close()
    if args.pid_file:
        try:
            os.unlink(args.pid_file)
        except OSError:
            pass


def session_config(args):
    """The ConfigProto every model's Session gets: TF Serving's thread flags (0: TF's defaults)."""
    import tensorflow as tf

    return tf.compat.v1.ConfigProto(intra_op_parallelism_threads=args.tensorflow_intra_op_parallelism,
                                    inter_op_parallelism_threads=args.tensorflow_inter_op_parallelism)


def _configure_tf(args) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    if args.tensorflow_intra_op_parallelism:
        tf.config.threading.set_intra_op_parallelism_threads(args.tensorflow_intra_op_parallelism)
    if args.tensorflow_inter_op_parallelism:
        tf.config.threading.set_inter_op_parallelism_threads(args.tensorflow_inter_op_parallelism)


class OneLine(logging.Filter):
    """aiohttp and grpc log a traceback for every request they cannot parse (a malformed chunk, a
    bad gzip body): a client's mistake is worth one line, not a screen."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.name.startswith(("aiohttp", "grpc")):
            exc = record.exc_info[1]
            detail = (str(exc).strip().splitlines() or [""])[-1].strip()
            record.msg, record.args = f"{record.getMessage()}: {type(exc).__name__}: {detail}", ()
            record.exc_info = record.exc_text = None
        return True


def raise_open_file_limit(wanted_connections: int, reserve: int = 64) -> int:
    """Raise the soft open-file limit to the hard one and return the REST connection cap that fits
    under it: past the limit accept() fails and clients see resets instead of a 503."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    room = max(16, soft - reserve)  # model files, sockets of gRPC, Prometheus scrapes
    if wanted_connections == 0 or wanted_connections > room:
        log.warning("REST connection cap %d lowered to %d: the open-file limit is %d", wanted_connections, room, soft)
        return room
    return wanted_connections


def main(argv=None) -> int:
    args = parse_flags(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s modelserver %(levelname)s %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(OneLine())
    try:
        # Files, model paths and ports are checked before TensorFlow is imported
        # (seconds): a typo fails fast.
        configs.load_monitoring(args.monitoring_config_file)
        if args.enable_batching:
            configs.load_batching(args.batching_parameters_file)
        for spec in model_specs(args):
            check_base_path(spec)
        for port, what in ((args.port, "gRPC"), (args.rest_api_port, "REST")):
            if port:
                _check_port_free(args.listen_address, port, what)
        _configure_tf(args)
        try:
            import uvloop
            uvloop.install()
        except ImportError:
            pass
        asyncio.run(serve(args))
    except (configs.ConfigError, StartupError, ModelPathError) as e:
        sys.stderr.write(f"tensorflow_model_server: error: {e}\n")
        return 2
    except KeyboardInterrupt:
        return 0
    return 0
