"""A session raises the collector's young-generation threshold, and never lowers one or turns
collection back on (``context/collector.tune_for_long_sessions``; why: its docstring and
``bench/long_session.py``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from durable_session import open_session
from fakeprovider import FakeProvider, Turn

from ketch.context.collector import YOUNG_THRESHOLD, tune_for_long_sessions


@pytest.fixture
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*before)


async def test_building_a_session_raises_the_young_threshold(thresholds: None, tmp_path: Path) -> None:
    gc.set_threshold(700, 10, 10)
    with FakeProvider([Turn(text="hi")]) as fake:
        session = await open_session(fake, "openai-chat", tmp_path)
        await session.aclose()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    assert gc.isenabled()


@pytest.mark.parametrize("chosen", [(0, 10, 10), (50_000, 5, 5)])
def test_a_threshold_the_process_chose_is_left_alone(thresholds: None, chosen: tuple[int, int, int]) -> None:
    gc.set_threshold(*chosen)
    tune_for_long_sessions()
    assert gc.get_threshold() == chosen
