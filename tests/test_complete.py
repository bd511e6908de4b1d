from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ketch.ui.complete import AtToken, SlashToken, find_at_token, find_slash_token, insert_completion, rank

FILES = [
    "vendor/src/lib.rs",
    "vendor/src/",
    "src/",
    "src/main.py",
    "src/ketch/complete.py",
    "tests/test_complete.py",
    "docs/src.md",
    "README.md",
    "scripts/run_src.sh",
]


def test_at_must_start_a_word():
    assert find_at_token("look at @src/ma", 15) == AtToken(8, 15, "src/ma")
    assert find_at_token("@", 1) == AtToken(0, 1, "")
    assert find_at_token("mail user@host", 14) is None
    assert find_at_token("a\t@x", 4) == AtToken(2, 4, "x")


def test_token_runs_from_at_to_cursor_and_closes_at_whitespace():
    text = "see @src/main.py please"
    assert find_at_token(text, 9) == AtToken(4, 9, "src/")
    assert find_at_token(text, 16) == AtToken(4, 16, "src/main.py")
    assert find_at_token(text, 17) is None
    assert find_at_token(text, 3) is None


def test_prefix_beats_basename_beats_substring_beats_fuzzy():
    assert rank("src/", FILES) == ["src/", "src/main.py", "src/ketch/complete.py", "vendor/src/", "vendor/src/lib.rs"]
    assert rank("comp", FILES) == ["src/ketch/complete.py", "tests/test_complete.py"]
    assert rank("src", FILES)[:3] == ["src/", "src/main.py", "src/ketch/complete.py"]
    # basename prefix "src.md" beats the substring hits
    assert rank("src", FILES)[3] == "docs/src.md"
    assert rank("tcp", FILES) == ["tests/test_complete.py", "src/ketch/complete.py"]


def test_rank_ignores_case_unless_the_query_has_capitals():
    assert rank("readme", FILES) == ["README.md"]
    assert rank("Src", FILES) == []


def test_rank_limit_and_empty_query():
    assert rank("", FILES, limit=3) == ["src/", "README.md", "docs/src.md"]
    assert rank("", FILES, limit=0) == []


def test_insert_file_adds_a_space_and_directory_keeps_the_slash():
    text = "open @sr and more"
    token = find_at_token(text, 8)
    assert insert_completion(text, token, "src/main.py") == ("open @src/main.py and more", 18)
    assert insert_completion(text, token, "src/") == ("open @src/ and more", 10)
    assert insert_completion("@ma", AtToken(0, 3, "ma"), "main.py") == ("@main.py ", 9)


def test_slash_token_only_at_the_start_while_typing_the_name():
    assert find_slash_token("/mo", 3) == SlashToken(3, "mo")
    assert find_slash_token("/", 1) == SlashToken(1, "")
    assert find_slash_token("/model gpt", 10) is None
    assert find_slash_token(" /model", 7) is None
    assert find_slash_token("see /model", 10) is None


_word = st.text(st.characters(blacklist_categories=("Z", "Cc")), min_size=0, max_size=8)
_path = st.lists(st.sampled_from(["src", "lib", "a", "tests", "vendor", "x.py", "main.py"]), min_size=1, max_size=4).map("/".join)


@settings(max_examples=60, deadline=None)
@given(_word, _word)
def test_an_at_inside_a_word_never_opens_the_picker(before, after):
    if before:
        text = before + "@" + after
        assert find_at_token(text, len(text)) is None or find_at_token(text, len(text)).start < len(before)


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=20), _word, _path, st.booleans())
def test_inserting_a_choice_reopens_as_the_same_token_or_closes_it(prefix, query, choice, is_dir):
    prefix = prefix + " " if prefix else ""
    choice = choice + "/" if is_dir else choice
    text = prefix + "@" + query.replace("@", "")
    token = find_at_token(text, len(text))
    assert token is not None
    new_text, cursor = insert_completion(text, token, choice)
    assert new_text[:cursor].endswith("@" + choice + ("" if is_dir else " "))
    reopened = find_at_token(new_text, cursor)
    assert (reopened == AtToken(token.start, cursor, choice)) if is_dir else reopened is None


@settings(max_examples=60, deadline=None)
@given(st.lists(_path, max_size=30, unique=True), _word)
def test_rank_returns_each_match_once_with_prefix_hits_first(paths, query):
    ranked = rank(query, paths + paths)
    assert len(ranked) == len(set(ranked))
    assert set(ranked) <= set(paths)
    q = query.lower() if query == query.lower() else query
    norm = (lambda p: p.lower()) if query == query.lower() else (lambda p: p)  # noqa: E731
    prefix_hits = [p for p in ranked if norm(p).startswith(q)]
    assert ranked[: len(prefix_hits)] == prefix_hits
