"""The Markdown block splitter: which streamed text is closed and may be committed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ketch.ui.blocks import BlockSplitter

DOC = (
    "# Title\n"
    "First paragraph\ncontinues here.\n\n"
    "```python\ndef f():\n\n    return 1\n```\n"
    "- item one\n- item two\n\n"
    "1. first\n\n   more of first\n\n"
    "Last words."
)


def split_all(chunks: list[str]) -> list[str]:
    splitter = BlockSplitter()
    blocks: list[str] = []
    for chunk in chunks:
        blocks += splitter.feed(chunk)
    return blocks + splitter.finish()


def test_blocks_close_at_headings_blank_lines_and_fence_ends() -> None:
    assert split_all([DOC]) == [
        "# Title",
        "First paragraph\ncontinues here.",
        "```python\ndef f():\n\n    return 1\n```",
        "- item one\n- item two",
        "1. first\n\n   more of first",
        "Last words.",
    ]


def test_paragraph_stays_open_until_the_next_block_starts() -> None:
    splitter = BlockSplitter()
    assert splitter.feed("Hello wor") == []
    assert splitter.open_text == "Hello wor"
    assert splitter.feed("ld.\n\n") == []
    assert splitter.feed("Next") == ["Hello world."]
    assert splitter.open_text == "Next"


def test_unclosed_fence_is_open_and_keeps_blank_lines() -> None:
    splitter = BlockSplitter()
    assert splitter.feed("```\ncode\n\nmore\n") == []
    assert splitter.in_fence
    assert splitter.open_text == "```\ncode\n\nmore"
    assert splitter.feed("```\n") == ["```\ncode\n\nmore\n```"]
    assert not splitter.in_fence


def test_fence_interrupts_a_paragraph() -> None:
    assert split_all(["Run this:\n```sh\nls\n```\n"]) == ["Run this:", "```sh\nls\n```"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(DOC)), max_size=12))
def test_chunking_does_not_change_the_blocks(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    chunks = [DOC[a:b] for a, b in zip([0] + points, points + [len(DOC)])]
    assert split_all(chunks) == split_all([DOC])
