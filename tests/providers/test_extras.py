"""The extras: importing an adapter without its SDK says which extra to install; the adapters'
vocabulary agrees with the AI SDK mapping's; the shared types import without either SDK."""

from __future__ import annotations

import subprocess
import sys
from typing import get_args

import pytest

from streamwire.aisdk import FinishReason as UIFinishReason
from streamwire.providers import FinishReason
from streamwire.providers.openai import CHAT_FINISH_REASONS, INCOMPLETE_REASONS

_WITHOUT = """
import sys
sys.modules[{sdk!r}] = None  # as if the package were not installed
try:
    import streamwire.providers.{sdk}
except ImportError as exc:
    print(exc)
else:
    print("imported")
"""


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_a_missing_sdk_names_the_extra(sdk: str) -> None:
    done = subprocess.run([sys.executable, "-c", _WITHOUT.format(sdk=sdk)], capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.strip() == (f"streamwire.providers.{sdk} needs the {sdk} package: "
                                   f"pip install 'streamwire[{sdk}]'")


def test_the_shared_types_need_neither_sdk() -> None:
    code = ("import sys; sys.modules['openai'] = sys.modules['anthropic'] = None; "
            "import streamwire.providers as p; print(p.Turn().finish_reason)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "other"


def test_finish_reasons_are_the_ai_sdks() -> None:
    assert get_args(FinishReason) == get_args(UIFinishReason)
    assert set(CHAT_FINISH_REASONS.values()) | set(INCOMPLETE_REASONS.values()) <= set(
        get_args(FinishReason))


def test_chat_finish_reasons_cover_the_sdk() -> None:
    from openai.types.chat.chat_completion_chunk import Choice

    literal = Choice.model_fields["finish_reason"].annotation
    (inner, _none) = get_args(literal)
    assert set(CHAT_FINISH_REASONS) == set(get_args(inner))


@pytest.mark.parametrize("package", ["streamwire.providers", "streamwire.providers.openai",
                                     "streamwire.providers.anthropic"])
def test_public_objects_report_a_public_module(package: str) -> None:
    import importlib

    module = importlib.import_module(package)
    names = list(module.__all__)
    assert names == sorted(names, key=lambda n: (not n.isupper(), n))
    private = {name: obj.__module__ for name in module.__all__
               if isinstance(obj := getattr(module, name), type) or (
                   callable(obj) and hasattr(obj, "__code__"))
               if any(part.startswith("_") for part in obj.__module__.split("."))}
    assert private == {}
