"""The shell parser and what each command really invokes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ketch.gate.invocations import invocations_of
from ketch.extensions.plugins import compile_guard, config_rules
from ketch.gate.rules import RuleSet, rules_from_config
from ketch.gate.shell_parse import parse_command


@pytest.mark.parametrize(
    "command, target",
    [
        ("ls > out", "out"),
        ("ls >> out", "out"),
        ("ls >| out", "out"),
        ("ls &> out", "out"),
        ("ls &>> out", "out"),
        ("ls 2> out", "out"),
        ("ls 9>out", "out"),
        ("ls >& out", "out"),
        ("ls > 'my out'", "my out"),
        ("ls > $HOME/x", "$HOME/x"),
        ("ls > /dev/null > out", "out"),
        ("ls 3> /dev/tcp/127.0.0.1/9", "/dev/tcp/127.0.0.1/9"),
    ],
)
def test_every_redirection_that_opens_a_file_for_writing_is_a_hazard(command: str, target: str) -> None:
    parsed = parse_command(command)
    assert not parsed.plain
    assert parsed.writes == (target,)


@pytest.mark.parametrize("command, words", [("ls \\\n  -la", ["ls", "-la"]), ('echo "p\\\nush"', ["echo", "push"]), ("echo 'p\\\nq'", ["echo", "p\\\nq"])])
def test_line_continuations_bash_and_the_grammar_agree_on(command: str, words: list[str]) -> None:
    parsed = parse_command(command)
    assert not parsed.error
    assert [w.text for w in parsed.commands[0].words] == words


@pytest.mark.parametrize("command", ["ls 2>&1", "ls >/dev/null", "ls 2>/dev/null", "ls &>/dev/null", "ls >&2", "ls 2>&-", "ls < in", "cat <<'X'\nhi\nX"])
def test_harmless_redirections_are_not_hazards(command: str) -> None:
    assert parse_command(command).plain, parse_command(command)


def test_a_read_redirection_from_a_bash_network_path_is_a_hazard() -> None:
    assert not parse_command("cat < /dev/tcp/127.0.0.1/9").plain
    assert parse_command("cat < /dev/stdin").plain


@pytest.mark.parametrize("command", ["ls <> f", "echo 'unterminated", "ls $(", "if true; then ls", "ls )", "case x in", "git p\\\nush", "ls >\\\n> f", "a | b | c\nd e && f", "ls >\nx", "ls $((1))\n\\touch x", "echo `ls` `ls`"])
def test_what_the_grammar_cannot_parse_is_an_error(command: str) -> None:
    assert parse_command(command).error


def test_an_unparsable_command_asks_and_the_reason_names_the_parse() -> None:
    rs = RuleSet(rules_from_config({"shell": {"ls*": "allow"}}))
    assert rs.decide("shell", {"command": "ls <> f"}, "command") is None
    assert "cannot parse" in rs.shell_note("ls <> f")


def test_an_unparsable_command_is_refused_by_every_command_guard() -> None:
    guard = compile_guard([], config_rules([{"kind": "command_prefix", "prefix": "git push", "reason": "no"}]))
    # bash runs the first line before it fails on the second: the guard cannot read it
    for command in ("git push 'unterminated", "g\\it push\necho 'x", "ls 'unterminated"):
        refusal = guard.check("shell", {"command": command})
        assert refusal is not None and "cannot be parsed" in refusal.reason, command
    assert guard.check("web_fetch", {"url": "x'"}) is None
    rs = RuleSet(rules_from_config({"shell": {"rm*": "deny"}}))
    assert rs.decide("shell", {"command": "rm x 'unterminated"}, "command")[0] == "deny"
    assert rs.decide("shell", {"command": "ls 'unterminated"}, "command") is None


@pytest.mark.parametrize(
    "command, runs",
    [
        ("git -C x --no-pager push", ["git push"]),
        ("sudo -u root env -i FOO=1 nice -n 5 /usr/bin/git push", ["git push"]),
        ("timeout -s KILL 5 git push", ["git push"]),
        ("nohup time -p stdbuf -oL ionice -c 3 git push", ["git push"]),
        ("command -p git --git-dir=.git --work-tree=. push", ["git push"]),
        ("bash -lc 'git status && git push'", ["bash -lc", "git status", "git push"]),
        ("env -S 'git push'", ["git push"]),
        ("find . -exec git push \\;", ["find . -exec git push ';'", "git push"]),
        ("watch -n 1 git push", ["watch -n 1 git push", "git push"]),
        ("ssh -p 22 host git push", ["ssh -p 22 host git push", "git push"]),
    ],
)
def test_invocations_see_through_wrappers_and_global_options(command: str, runs: list[str]) -> None:
    found, error = invocations_of(command)
    assert not error
    assert [i.text() for i in found] == runs


@pytest.mark.parametrize(
    "command",
    ["$X push", "eval $X", "cat s | sh", "bash -s", "python3 -c 'print(1)'", "node -e 1", "perl -e 1", "awk '{system($0)}'", "echo x | xargs sh", "git -c alias.p=push p", "bash -c \"$X\""],
)
def test_a_program_built_at_run_time_could_be_any_program(command: str) -> None:
    found, error = invocations_of(command)
    assert not error
    assert any(not inv.words[0].fixed for inv in found), [i.text() for i in found]
    assert all(inv.why_unknown for inv in found if not inv.words[0].fixed)


def test_the_parser_is_not_imported_for_version() -> None:
    code = "import sys; from ketch.frontends.cli import main; sys.argv = ['ketch', '--version']\ntry:\n    main()\nexcept SystemExit:\n    pass\nprint('tree_sitter' in sys.modules, 'ketch.gate.shell_parse' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "False False"


def test_a_command_nested_deeper_than_the_walker_follows_is_unparsed_and_refused() -> None:
    deep = "echo " + "$(" * 3000 + "git push" + ")" * 3000
    assert "nested too deeply" in parse_command(deep).error
    guard = compile_guard([], config_rules([{"kind": "command_prefix", "prefix": "git push", "reason": "no"}]))
    assert guard.check("shell", {"command": deep}) is not None
    rs = RuleSet(rules_from_config({"shell": {"echo*": "allow"}}))
    assert rs.decide("shell", {"command": deep}, "command") is None


def test_shells_nested_beyond_the_limit_count_as_any_program() -> None:
    import shlex

    command = "git push"
    for _ in range(9):
        command = "bash -c " + shlex.quote(command)
    guard = compile_guard([], config_rules([{"kind": "command_prefix", "prefix": "rm", "reason": "no rm"}]))
    refusal = guard.check("shell", {"command": command})
    assert refusal is not None and "nested too deeply" in refusal.reason


def test_a_glob_that_can_expand_to_an_option_is_not_allowed(tmp_path) -> None:
    rs = RuleSet(rules_from_config({"shell": {"git diff*": "allow"}}), root=tmp_path)
    assert rs.decide("shell", {"command": "git diff *"}, "command")[0] == "allow"
    (tmp_path / "--output=.git/config").mkdir(parents=True)
    assert rs.decide("shell", {"command": "git diff *"}, "command") is None
    assert "option" in rs.shell_note("git diff *")
    (tmp_path / "src").mkdir()
    assert rs.decide("shell", {"command": "git diff src/*"}, "command")[0] == "allow"
    (tmp_path / "src" / "-x").touch()
    assert rs.decide("shell", {"command": "git diff src/*"}, "command") is None


@pytest.mark.parametrize("command", ["strace -f git push", "chroot / /usr/bin/git push", "runuser -u x -- git push", "./run git push", "echo git push"])
def test_a_guard_of_two_words_refuses_them_in_a_row_among_the_arguments(command: str) -> None:
    guard = compile_guard([], config_rules([{"kind": "command_prefix", "prefix": "git push", "reason": "no"}]))
    assert guard.check("shell", {"command": command}) is not None


@pytest.mark.parametrize("command", ["git commit -m 'git push later'", "grep -r 'git push' .", "ls git", "git status"])
def test_a_guard_leaves_the_words_alone_inside_one_argument(command: str) -> None:
    guard = compile_guard([], config_rules([{"kind": "command_prefix", "prefix": "git push", "reason": "no"}]))
    assert guard.check("shell", {"command": command}) is None
