from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ketch.extensions.rules import (
    Rule,
    RuleError,
    RuleSet,
    command_words,
    expanded_commands,
    path_glob_matches,
    rules_from_config,
    split_shell_command,
    writes_by_redirect,
)

ROOT = Path("/work/proj")


def ruleset(config: dict) -> RuleSet:
    return RuleSet(rules_from_config(config, "test"), root=ROOT)


def shell(rs: RuleSet, command: str):
    decision = rs.decide("shell", {"command": command}, "command")
    return decision[0] if decision else None


def test_config_mapping_and_string_forms_parse_to_the_same_rules():
    by_mapping = rules_from_config({"shell": {"git status*": "allow", "rm -rf*": "deny"}, "web_fetch": "ask"}, "user")
    by_strings = rules_from_config({"allow": ["shell(git status*)"], "deny": ["shell(rm -rf*)"], "ask": ["web_fetch"]}, "user")
    assert sorted(by_mapping, key=repr) == sorted(by_strings, key=repr)
    assert Rule("web_fetch", None, "ask", "user") in by_mapping


@pytest.mark.parametrize(
    "config, message",
    [
        ({"shell": {"ls*": "maybe"}}, "action 'maybe'"),
        ({"shell": 3}, "must be an action"),
        ({"allow": ["shell("]}, "malformed"),
        ({"allow": ["shell()"]}, "malformed"),
    ],
)
def test_malformed_rules_are_rejected_with_a_message_naming_them(config, message):
    with pytest.raises(RuleError, match=message.replace("(", r"\(")):
        rules_from_config(config)


def test_prefix_allow_does_not_cover_a_chained_command():
    rs = ruleset({"shell": {"git status*": "allow"}})
    assert shell(rs, "git status") == "allow"
    assert shell(rs, "git status --short") == "allow"
    for sneaky in [
        "git status; rm -rf /",
        "git status && rm -rf /",
        "git status || rm -rf /",
        "git status | sh",
        "git status & rm -rf /",
        "git status\nrm -rf /",
        "git status $(rm -rf /)",
        "git status `rm -rf /`",
        'git status "$(rm -rf /)"',
        "git status > ~/.bashrc",
    ]:
        assert shell(rs, sneaky) is None, sneaky


def test_allow_applies_when_every_segment_is_allowed():
    rs = ruleset({"shell": {"git status*": "allow", "git diff*": "allow"}})
    assert shell(rs, "git status && git diff HEAD | git diff --stat") == "allow"
    assert shell(rs, "git status 2>&1 >/dev/null") == "allow"


def test_deny_applies_when_any_segment_matches_even_behind_wrappers():
    rs = ruleset({"shell": {"rm -rf*": "deny", "*": "allow"}})
    assert shell(rs, "ls") == "allow"
    for bad in ["echo hi; rm -rf /", "ls $(rm -rf /)", "FOO=1 sudo rm -rf /", "bash -c 'rm -rf /'", "  /bin/rm -rf x"]:
        assert shell(rs, bad) == "deny", bad


def test_deny_beats_ask_beats_allow():
    rs = ruleset({"write_file": {"src/**": "allow", "src/secret/**": "deny", "src/gen/**": "ask"}})
    decide = lambda p: rs.decide("write_file", {"path": p}, "path")  # noqa: E731
    assert decide("src/a.py")[0] == "allow"
    assert decide("src/gen/x.py")[0] == "ask"
    action, rule = decide("src/secret/key.pem")
    assert (action, rule.pattern) == ("deny", "src/secret/**")
    assert decide("docs/a.md") is None


def test_path_patterns_use_the_workspace_relative_path():
    rs = ruleset({"write_file": {"src/**": "allow", "/etc/**": "deny"}})
    assert rs.decide("write_file", {"path": "/work/proj/src/a.py"}, "path")[0] == "allow"
    assert rs.decide("write_file", {"path": "./src/../src/b.py"}, "path")[0] == "allow"
    assert rs.decide("write_file", {"path": "/work/proj/lib/src/b.py"}, "path") is None
    # a relative path that climbs out is matched by where it lands
    assert rs.decide("write_file", {"path": "src/../../../etc/passwd"}, "path")[0] == "deny"


def test_allow_everything_pattern_does_not_reach_outside_the_workspace():
    rs = ruleset({"write_file": {"**": "allow"}})
    assert rs.decide("write_file", {"path": "notes/a.md"}, "path")[0] == "allow"
    assert rs.decide("write_file", {"path": "/etc/passwd"}, "path") is None
    assert rs.decide("write_file", {"path": "../other/x"}, "path") is None


def test_patternless_rule_and_tool_wildcards():
    rs = ruleset({"web_fetch": "ask", "mcp__github__*": "allow"})
    assert rs.decide("web_fetch", {"url": "https://x"}, "url")[0] == "ask"
    assert rs.decide("mcp__github__list_issues", {}, "")[0] == "allow"
    assert rs.decide("read_file", {"path": "a"}, "path") is None


def test_url_patterns_are_wildcards():
    rs = ruleset({"web_fetch": {"https://docs.python.org/*": "allow"}})
    assert rs.decide("web_fetch", {"url": "https://docs.python.org/3/library/re.html"}, "url")[0] == "allow"
    assert rs.decide("web_fetch", {"url": "https://evil.example/?https://docs.python.org/"}, "url") is None


def test_session_rule_added_later_takes_effect_and_describe_reads_well():
    rs = ruleset({})
    assert shell(rs, "make test") is None
    rule = Rule("shell", "make test*", "allow", "session")
    rs.add(rule)
    assert shell(rs, "make test -j2") == "allow"
    assert RuleSet.describe(rule) == "allow shell(make test*) from session"
    assert RuleSet.describe(Rule("web_fetch", None, "ask")) == "ask web_fetch"


def test_split_keeps_quoted_operators_and_cuts_out_substitutions():
    assert split_shell_command("echo 'a; b' && ls") == ["echo 'a; b'", "ls"]
    assert split_shell_command('echo "x $(id) y"') == ["id", 'echo "x  y"']
    assert split_shell_command("ls 2>&1 | grep x &>/dev/null") == ["ls 2>&1", "grep x &>/dev/null"]
    assert split_shell_command("(cd a && make) & wait") == ["cd a", "make", "wait"]
    assert split_shell_command("a $( (b) ; c ) d") == ["b", "c", "a  d"]


def test_command_words_strip_assignments_wrappers_and_paths():
    assert command_words("  A=1 B='x y' sudo -E nohup /usr/bin/rm -rf /") == ["rm", "-rf", "/"]
    assert command_words("env -i timeout 5 \\rm x") == ["rm", "x"]
    assert expanded_commands("sh -c 'echo hi; eval \"rm -rf /\"'")[-1] == "rm -rf /"


def test_redirect_detection():
    assert writes_by_redirect("git log > out.txt")
    assert writes_by_redirect("git log >>out.txt")
    assert not writes_by_redirect("git log 2>&1 >/dev/null")
    assert not writes_by_redirect("echo '>' x")


def test_glob_semantics():
    assert path_glob_matches("**/.env*", ".env")
    assert path_glob_matches("**/.env*", "a/b/.env.local")
    assert not path_glob_matches("src/*.py", "src/a/b.py")
    assert path_glob_matches("src/**", "src/a/b.py")
    assert path_glob_matches("src/[ab].py", "src/a.py")


_pieces = st.sampled_from(["git status", "ls -la", "rm -rf /", "echo ok", "curl x | sh", "cat f"])
_ops = st.sampled_from([";", " && ", " || ", " | ", " & ", "\n"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_pieces, _ops), min_size=1, max_size=5), _pieces)
def test_every_joined_piece_is_seen_and_allow_needs_all_of_them(parts, last):
    command = "".join(p + op for p, op in parts) + last
    pieces = [p for p, _ in parts] + [last]
    segments = split_shell_command(command)
    for piece in pieces:
        assert any(piece.split("|")[0].strip() == s for s in segments)
    rs = ruleset({"shell": {"git status*": "allow", "ls*": "allow", "rm -rf*": "deny"}})
    action = shell(rs, command)
    if "rm -rf /" in pieces:
        assert action == "deny"
    elif all(p in ("git status", "ls -la") for p in pieces):
        assert action == "allow"
    else:
        assert action is None
