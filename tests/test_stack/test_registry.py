"""The registry's interpreter rule: the versions of one compare share the newest Python they all have
wheels for, and only a version that shares none keeps its own."""
import pytest

from core.registry import RegistryError, load_registry


def _pythons(names: str) -> dict:
    return {v.name: v.python for v in load_registry().select(names)}


def test_versions_of_one_compare_share_the_newest_common_python():
    assert _pythons("2.9 2.21") == {"2.9": "3.10", "2.21": "3.10"}
    assert _pythons("2.8 2.9 2.12 2.21") == {"2.8": "3.10", "2.9": "3.10", "2.12": "3.10", "2.21": "3.10"}
    assert _pythons("2.12 2.21") == {"2.12": "3.11", "2.21": "3.11"}
    # alone: the interpreter most versions share, so its venv is the one its compares with 2.8-2.12 reuse
    assert _pythons("2.21") == {"2.21": "3.10"} and _pythons("2.6") == {"2.6": "3.9"}


def test_a_version_that_shares_no_python_keeps_its_own_and_only_it():
    assert _pythons("2.6 2.9 2.21") == {"2.6": "3.9", "2.9": "3.10", "2.21": "3.10"}
    assert _pythons("2.6 2.12") == {"2.6": "3.9", "2.12": "3.11"}


def test_the_offline_image_keeps_its_interpreter():
    reg = load_registry()
    assert reg.get("2.9").image_python == "3.9" and reg.get("2.21").image_python == "3.11"


def test_a_malformed_pythons_list_is_one_line(tmp_path, monkeypatch):
    text = (load_registry.__globals__["REGISTRY_PATH"]).read_text().replace('pythons: ["3.9", "3.10"]',
                                                                          'pythons: ["three"]', 1)
    f = tmp_path / "versions.yaml"
    f.write_text(text)
    with pytest.raises(RegistryError, match=r"pythons must be a list like"):
        load_registry(f)
