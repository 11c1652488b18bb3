"""SECURITY.md's static promises: no subprocess call with shell=True in the product's code, and
every subprocess call gets an argument list, not a string a user's input could end up in."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["modelserver", "loadgen", "exporter", "fileio", "stack", "analysis", "models", "benchmarks"]
CALLS = {"run", "Popen", "call", "check_call", "check_output"}


def subprocess_calls():
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CALLS \
                        and isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess":
                    yield f"{path.relative_to(ROOT)}:{node.lineno}", node


def test_no_shell_true_and_arguments_are_lists():
    calls = list(subprocess_calls())
    assert len(calls) > 20  # the walk found the stack's subprocess calls
    shell = [where for where, n in calls if any(k.arg == "shell" for k in n.keywords)]
    assert not shell, f"shell= in {shell}"
    strings = [where for where, n in calls if n.args and isinstance(n.args[0], (ast.Constant, ast.JoinedStr))]
    assert not strings, f"a command line as a string in {strings}"
