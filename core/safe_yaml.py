"""Every YAML file the project reads goes through here: safe types only, no aliases, bounded size.

YAML aliases let a few hundred bytes expand into gigabytes (nested `*a` references, the
"billion laughs"); none of our files needs them, so an alias is refused at parse time, before
anything is expanded. Files are capped at MAX_BYTES for the same reason.
"""
from __future__ import annotations

from pathlib import Path

import yaml
from core.errors import UsageError

MAX_BYTES = 1 << 20  # 1 MiB: a scenario, a profile, the registry are a few KiB


class YamlError(UsageError):
    """A YAML file that cannot be used; the message names the file and, where known, the line."""


class _NoAliasLoader(yaml.SafeLoader):
    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed", event.start_mark)
        return super().compose_node(parent, index)


def loads(text: str, where: str = "<string>"):
    if len(text.encode(errors="replace")) > MAX_BYTES:
        raise YamlError(f"{where}: larger than {MAX_BYTES // 1024} KiB")
    try:
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark else ""
        raise YamlError(f"{where}: not valid YAML{at}: {getattr(e, 'problem', None) or e}") from None


def load_path(path) -> object:
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_BYTES:
            raise YamlError(f"{path}: larger than {MAX_BYTES // 1024} KiB")
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise YamlError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise YamlError(f"{path}: not a UTF-8 text file") from None
    return loads(text, str(path))
