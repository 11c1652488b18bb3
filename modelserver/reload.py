"""Reloading the model config, as TF Serving does: a changed --model_config_file, polled every
--model_config_file_poll_wait_seconds, or ModelService.HandleReloadConfigRequest over gRPC."""
from __future__ import annotations

import asyncio
import logging
import os

from modelserver import configs
from modelserver.manager import ModelPathError, ModelSpec

log = logging.getLogger("modelserver")


def specs_of(config) -> list:
    """ModelSpecs of a ModelServerConfig proto (its model_config_list), checked as at startup."""
    if config.WhichOneof("config") != "model_config_list":
        raise configs.ConfigError("the config must hold a model_config_list")
    names = [c.name for c in config.model_config_list.config]
    if not names or len(set(names)) != len(names) or not all(names):
        raise configs.ConfigError("model_config_list needs models with distinct, non-empty names")
    return [ModelSpec.from_proto(c) for c in config.model_config_list.config]


async def watch(manager, path: str, every_s: float) -> None:
    """Poll the config file; on a change, reload it. A file that does not parse, or names a base path
    that cannot be served, is one log line and the running config stays."""
    last = _stamp(path)
    while True:
        await asyncio.sleep(every_s)
        now = _stamp(path)
        if now == last:
            continue
        last = now
        try:
            specs = specs_of(configs.load_model_server_config(path))
            await manager.reload(specs)
            log.info("reloaded %s: serving %s", path, ", ".join(s.name for s in specs))
        except (configs.ConfigError, ModelPathError) as e:
            log.error("not reloading %s: %s", path, e)


def _stamp(path: str):
    try:
        st = os.stat(path)
        return st.st_mtime_ns, st.st_size
    except OSError:
        return None
