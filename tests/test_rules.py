from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ketch.gate.invocations import invocations_of
from ketch.gate.rules import Rule, RuleError, RuleSet, path_glob_matches, rules_from_config
from ketch.gate.shell_parse import parse_command
from ketch.gate.shell_rules import written_text

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


def test_path_patterns_use_the_workspace_relative_path(tmp_path: Path):
    (tmp_path / "src").mkdir()
    rs = RuleSet(rules_from_config({"write_file": {"src/**": "allow", "/etc/**": "deny"}}), root=tmp_path)
    assert rs.decide("write_file", {"path": f"{tmp_path}/src/a.py"}, "path")[0] == "allow"
    assert rs.decide("write_file", {"path": "./src/../src/b.py"}, "path")[0] == "allow"
    assert rs.decide("write_file", {"path": f"{tmp_path}/lib/src/b.py"}, "path") is None
    # '..' after a directory that does not exist: the kernel fails it, so no rule allows it
    assert rs.decide("write_file", {"path": "gone/../src/b.py"}, "path") is None
    # a relative path that climbs out is matched by where it lands
    climb = "src/" + "../" * (len(tmp_path.parts) + 1) + "etc/passwd"
    assert rs.decide("write_file", {"path": climb}, "path")[0] == "deny"


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


def _simple(command: str) -> list[str]:
    return [written_text(c) for c in parse_command(command).commands]


def test_parse_keeps_quoted_operators_and_finds_commands_in_substitutions():
    assert _simple("echo 'a; b' && ls") == ["echo 'a; b'", "ls"]
    assert sorted(_simple('echo "x $(id) y"')) == sorted(["id", 'echo "x $(id) y"'])
    assert _simple("ls 2>&1 | grep x &>/dev/null") == ["ls", "grep x"]
    assert _simple("(cd a && make) & wait") == ["cd a", "make", "wait"]
    assert sorted(_simple("a $( (b) ; c ) d")) == sorted(["b", "c", "a $( (b) ; c ) d"])


def test_invocations_strip_assignments_wrappers_and_paths():
    def runs(command: str) -> list[str]:
        found, error = invocations_of(command)
        assert not error
        return [i.text() for i in found]

    assert runs("  A=1 B='x y' sudo -E nohup /usr/bin/rm -rf /") == ["rm -rf /"]
    assert runs("env -i timeout 5 \\rm x") == ["rm x"]
    assert runs("sh -c 'echo hi; eval \"rm -rf /\"'")[-1] == "rm -rf /"


def test_redirect_detection():
    assert parse_command("git log > out.txt").writes == ("out.txt",)
    assert parse_command("git log >>out.txt").writes == ("out.txt",)
    assert parse_command("git log 2>&1 >/dev/null").plain
    assert parse_command("echo '>' x").plain


def test_glob_semantics():
    assert path_glob_matches("**/.env*", ".env")
    assert path_glob_matches("**/.env*", "a/b/.env.local")
    assert not path_glob_matches("src/*.py", "src/a/b.py")
    assert path_glob_matches("src/**", "src/a/b.py")
    assert path_glob_matches("src/[ab].py", "src/a.py")


_pieces = st.sampled_from(["git status", "ls -la", "rm -rf /", "echo ok", "curl x | sh", "cat f"])
_ops = st.sampled_from([";", " && ", " || ", " | ", " & ", "\n"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_pieces, _ops), min_size=1, max_size=5), _pieces)
def test_every_joined_piece_is_seen_and_allow_needs_all_of_them(parts, last):
    command = "".join(p + op for p, op in parts) + last
    pieces = [p for p, _ in parts] + [last]
    rs = ruleset({"shell": {"git status*": "allow", "ls*": "allow", "rm -rf*": "deny"}})
    action = shell(rs, command)
    if parse_command(command).error:
        # tree-sitter-bash joins "a | b | c<newline>d" into one command; ketch refuses to
        # judge such a parse, so nothing is allowed
        assert action != "allow"
        return
    simple = _simple(command)
    for piece in pieces:
        assert any(piece.split("|")[0].strip() == s for s in simple)
    if "rm -rf /" in pieces or "curl x | sh" in pieces:
        # a shell reading its input could run rm -rf as well: a deny counts it as a hit
        assert action == "deny"
    elif all(p in ("git status", "ls -la") for p in pieces) and all(op != " & " for _, op in parts):
        assert action == "allow"
    else:
        assert action is None
