"""argparse types for numbers: finite and in range, or argparse's one-line error and exit 2.

`float("nan")` and `float("inf")` parse, and every later comparison with nan is False, so a bound
written as `if x <= 0: refuse` lets nan through; these types refuse it where the text is read.
Give environment defaults as strings (`default=os.environ.get("REPEAT", "2")`): argparse passes a
string default through the type too, so a bad variable is the same one line as a bad flag.
"""
from __future__ import annotations

import argparse
import math
import sys


class OneLineParser(argparse.ArgumentParser):
    """argparse's usage errors in one line, not the whole usage text; exit 2 (the README's table).
    Subparsers are made of the same class, so they say it the same way."""
    error_prefix = "error: "

    def error(self, message):
        sys.stderr.write(f"{self.error_prefix}{message} (see --help)\n")
        sys.exit(2)


def number(lo: float, hi: float, *, integer: bool = False, lo_open: bool = False, name: str = ""):
    """A type accepting lo <= x <= hi (lo < x with lo_open), finite, an int where integer.
    name: the environment variable the value may come from, said in the error."""
    kind = "an integer" if integer else "a number"
    what = f"{name} must be {kind}" if name else f"expected {kind}"

    def parse(text: str):
        try:
            value = int(text) if integer else float(text)
        except (TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"{what}, got {text!r}") from None
        if not math.isfinite(value) or not (lo < value if lo_open else lo <= value) or value > hi:
            raise argparse.ArgumentTypeError(f"{what} {'>' if lo_open else '>='} {lo:g} and <= {hi:g}, got {text!r}")
        return value

    parse.__name__ = kind  # argparse names the type in "invalid <name> value" messages
    return parse
