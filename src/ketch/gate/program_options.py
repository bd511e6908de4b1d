"""Programs and the options that make them write files, run commands or read configuration.

One table for the permission rules and the command guards. A read-only allow rule such
as ``find *`` or ``git log*`` covers a command only when none of its options (in any
spelling: ``--opt=V``, ``--opt V``, an unambiguous abbreviation ``--out``, ``-oV``, a
short option inside a cluster ``-no``) writes, runs or configures (``effects``); a guard
or a deny rule counts an option that runs text ketch does not parse (``opaque``) as a
program only known at run time. Wrappers (``env``, ``timeout``, ``nice`` ...) are looked
through by ``invocations``: the wrapped program's row applies to it.

``option_paths`` lists the paths a command names, in its operands and hidden in option
values (``--file=F``, ``-fF``, ``@F``, ``name=@F``), for the path rules.

It is one thing at this length: one table and the scanner that reads options against it;
split by program, rules and guards would again read the same options two ways.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ketch.gate.shell_parse import INTERPRETERS, SHELLS, Word


@dataclass(frozen=True)
class Effect:
    """What an option (or the program itself) does beyond reading."""

    kind: str
    """``write`` (files), ``exec`` (runs commands or code) or ``config`` (reads
    configuration that can run commands, from the command line or a file)."""
    what: str
    opaque: bool = False
    """It runs text ketch does not parse: for guards the command could run anything."""
    trigger: str = ""
    """The word that asks for it (an option, the program, a subcommand): an allow pattern
    that spells it before its first ``*`` vouches for it (``make test*``, ``npm test*``);
    empty when no pattern can (a sed or awk program's own commands)."""


@dataclass(frozen=True)
class Row:
    """One program: its options that do more than read, and the options that take a
    value (so the scanner does not read a value as an option)."""

    options: dict[str, tuple[str, bool]] = field(default_factory=dict)
    """spelling -> (kind, opaque); ``-x`` short, ``--long`` long, ``-long`` for ``words``."""
    valued: frozenset[str] = frozenset()
    style: str = "gnu"
    """``gnu``: clusters and ``--long[=v]``; ``words``: whole-word options (find)."""
    special: Callable[[str, list[Word]], list[Effect]] | None = None


def _row(options: dict[str, str], valued: str = "", *, opaque: str = "", style: str = "gnu", special: Callable[[str, list[Word]], list[Effect]] | None = None) -> Row:
    table = {o: (kind, o in opaque.split()) for o, kind in options.items()}
    return Row(table, frozenset(valued.split()), style, special)


# ---------------------------------------------------------------- special rows
def _interpreter(name: str, args: list[Word]) -> list[Effect]:
    """An interpreter runs code (a file, ``-c``/``-e`` text, a module, its input) unless
    it is only asked for its version or help."""
    if args and all(w.fixed and w.text in ("-V", "--version", "-v", "-h", "--help", "-VV") for w in args):
        return []
    found = [Effect("exec", f"{name} runs code", True, name)]
    if name.startswith("perl") and any(w.fixed and re.fullmatch(r"-[a-zA-Z]*i.*", w.text) for w in args):
        found.append(Effect("write", "perl -i edits files in place", False, "-i"))
    return found


def _always(kind: str, what: str, *, opaque: bool = False) -> Callable[[str, list[Word]], list[Effect]]:
    def check(name: str, args: list[Word]) -> list[Effect]:
        return [Effect(kind, what.format(name=name), opaque, name)]

    return check


def _sed(name: str, args: list[Word]) -> list[Effect]:
    found: list[Effect] = []
    scripts: list[str] = []
    operands: list[Word] = []
    i = 0
    while i < len(args):
        w = args[i]
        t = w.text
        if not w.static:
            return [Effect("exec", f"{name} with a word only known at run time (it could be a script or an option)", opaque=True)]
        if t in ("-e", "--expression") and i + 1 < len(args):
            scripts.append(args[i + 1].text)
            i += 2
            continue
        if t.startswith("--expression="):
            scripts.append(t.split("=", 1)[1])
        elif t in ("-f", "--file") or t.startswith("--file=") or re.fullmatch(r"-[a-zA-Z]*f.*", t) and not t.startswith("--"):
            found.append(Effect("exec", f"{name} -f runs a script from a file", True, "-f"))
        elif t.startswith("--in-place") or t.startswith("-") and not t.startswith("--") and "i" in t[1:].split("e", 1)[0]:
            found.append(Effect("write", f"{name} -i edits files in place", False, "-i"))
        elif re.fullmatch(r"-[a-zA-Z]*e", t) and i + 1 < len(args):
            scripts.append(args[i + 1].text)
            i += 2
            continue
        elif re.fullmatch(r"-[a-zA-Z]*e.+", t):
            scripts.append(t.split("e", 1)[1])
        elif not t.startswith("-") or t == "-":
            operands.append(w)
        i += 1
    if not scripts and operands:
        scripts.append(operands[0].text)
    for script in scripts:
        kind = _sed_script_effect(script)
        if kind:
            found.append(Effect(kind, f"the {name} script {script[:40]!r} " + ("writes a file" if kind == "write" else "runs a command"), opaque=kind == "exec"))
    return found


def _sed_script_effect(script: str) -> str:
    """``exec`` when a sed script may run a command (``e``, ``s///e``), ``write`` when it
    may write a file (``w``, ``W``, ``s///w``), else ''. Outside the pattern and the
    replacement of ``s`` and ``y`` any of those letters counts (labels and text too)."""
    rest: list[str] = []
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in "sy" and i + 1 < n and script[i + 1] not in "\\\n; }" and (i == 0 or not script[i - 1].isalnum()):
            delim = script[i + 1]
            j, parts = i + 2, 0
            while j < n and parts < 2:
                if script[j] == "\\":
                    j += 2
                    continue
                if script[j] == delim:
                    parts += 1
                j += 1
            i = j
            continue
        if c in "/\\":  # an address /re/ or \cREc
            delim = "/" if c == "/" else (script[i + 1] if i + 1 < n else "")
            j = i + (1 if c == "/" else 2)
            while j < n and script[j] != delim:
                j += 2 if script[j] == "\\" else 1
            i = j + 1
            continue
        rest.append(c)
        i += 1
    text = "".join(rest)
    if "e" in text:
        return "exec"
    if "w" in text or "W" in text:
        return "write"
    return ""


_AWK_CODE = re.compile(r"system|\||>|@load|@include|getline|fflush|close|ENVIRON|PROCINFO")


def _awk(name: str, args: list[Word]) -> list[Effect]:
    found: list[Effect] = []
    program_seen = False
    i = 0
    while i < len(args):
        w = args[i]
        t = w.text
        if not w.static:
            return [Effect("exec", f"{name} with a word only known at run time", opaque=True)]
        if t in ("-f", "--file", "-i", "--include", "-l", "--load", "-E", "--exec") or re.match(r"--(file|include|load|exec)=|-[fil].", t):
            found.append(Effect("exec", f"{name} runs a program from a file", True, t.split("=", 1)[0][:2]))
            program_seen = True
        elif t in ("-v", "--assign", "-F", "--field-separator"):
            i += 1
        elif t == "--":
            pass
        elif not t.startswith("-") and not program_seen:
            program_seen = True
            if _AWK_CODE.search(t):
                found.append(Effect("exec", f"the {name} program may run commands or write files", opaque=True))
        i += 1
    return found


def _tar(name: str, args: list[Word]) -> list[Effect]:
    row = _TAR_OPTIONS
    found = _scan(name, row, args)
    first = args[0].text if args and args[0].fixed else ""
    clusters = [first] if first and not first.startswith("-") else []
    clusters += [w.text[1:] for w in args if w.fixed and w.text.startswith("-") and not w.text.startswith("--")]
    longs = {w.text.split("=", 1)[0] for w in args if w.fixed and w.text.startswith("--")}
    writes = any(set(c) & set("xcruA") for c in clusters) or bool(longs & {"--extract", "--get", "--create", "--append", "--update", "--catenate", "--concatenate", "--delete"})
    if writes:
        found.append(Effect("write", f"{name} creates, changes or extracts files", False, name))
    values = [w.text for w in args if w.fixed]
    if any(":" in v.split("=", 1)[-1] and (k > 0 and values[k - 1] in ("-f", "--file") or v.startswith("--file=")) for k, v in enumerate(values)):
        found.append(Effect("exec", f"{name} with a remote archive runs a remote shell", True))
    return found


_GIT_READ_ONLY_CONFIG = ("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "get", "list", "--show-origin", "--show-scope", "--name-only", "-z", "--null", "--type", "--bool", "--int", "--path", "--default", "--includes", "--no-includes", "--global", "--system", "--local", "--worktree")
GIT_COMMANDS = frozenset(
    "add am annotate apply archive bisect blame branch bugreport bundle cat-file check-attr check-ignore check-mailmap check-ref-format checkout "
    "checkout-index cherry cherry-pick clean clone column commit commit-graph commit-tree config count-objects credential describe diagnose diff "
    "diff-files diff-index diff-tree difftool fast-export fast-import fetch fetch-pack fmt-merge-msg for-each-ref for-each-repo format-patch fsck "
    "gc get-tar-commit-id grep hash-object help hook index-pack init interpret-trailers log ls-files ls-remote ls-tree mailinfo mailsplit "
    "maintenance merge merge-base merge-file merge-index merge-tree mktag mktree multi-pack-index mv name-rev notes pack-objects pack-redundant "
    "pack-refs patch-id prune prune-packed pull push range-diff read-tree rebase receive-pack reflog remote repack replace rerere reset restore "
    "rev-list rev-parse revert rm send-pack shortlog show show-branch show-index show-ref sparse-checkout stage stash status stripspace "
    "submodule switch symbolic-ref tag unpack-file unpack-objects update-index update-ref update-server-info upload-archive upload-pack var "
    "verify-commit verify-pack verify-tag version whatchanged worktree write-tree filter-branch mergetool request-pull instaweb".split()
)
"""git's own commands: any other word after git's global options is an alias or a
``git-NAME`` program, which can be anything (``git p`` with ``alias.p = push``)."""

_GIT_RUNS = frozenset({"difftool", "mergetool", "filter-branch", "instaweb", "bisect", "submodule", "rebase", "am", "commit", "merge", "pull", "push", "fetch", "clone", "hook", "credential", "help", "archive", "send-pack", "fetch-pack", "receive-pack", "upload-pack", "upload-archive", "maintenance", "gc"})


def _git(name: str, args: list[Word]) -> list[Effect]:
    found: list[Effect] = []
    i = 0
    while i < len(args):
        w = args[i]
        if not w.static:
            return [Effect("config", "a git option only known at run time", opaque=True)]
        t = w.text
        key = t.split("=", 1)[0]
        if key in ("-c", "--config-env") or t.startswith("-c") and len(t) > 2:
            found.append(Effect("config", "git -c sets configuration (pagers, aliases, hooks, ssh commands ...)", True, "-c"))
        elif key == "--exec-path" and "=" in t:
            found.append(Effect("exec", "git --exec-path runs git's programs from another directory", True, "--exec-path"))
        elif key in ("-C", "--git-dir", "--work-tree") or t.startswith("-C") and len(t) > 2:
            found.append(Effect("config", f"git {key[:2] if key.startswith('-C') else key} reads another repository's configuration", False, key[:2] if key.startswith("-C") else key))
        elif key in ("-p", "--paginate"):
            found.append(Effect("exec", "git --paginate runs the configured pager", False, key))
        if key in ("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix", "--attr-source", "--list-cmds") and "=" not in t and len(t) == len(key):
            i += 2
            continue
        if t.startswith("-"):
            i += 1
            continue
        break
    if i >= len(args):
        return found
    sub, rest = args[i], args[i + 1 :]
    command = sub.text
    if command not in GIT_COMMANDS:
        return [*found, Effect("exec", f"git {command[:30]} is an alias or a git-{command[:30]} program: it can run anything", True, command)]
    if command == "config":
        if not any(w.text in ("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "get", "list") for w in rest if w.fixed):
            operands = [w for w in rest if not (w.fixed and (w.text.startswith("-") or w.text in _GIT_READ_ONLY_CONFIG))]
            if len(operands) != 1 or any(w.fixed and w.text in ("-e", "--edit", "--add", "--unset", "--unset-all", "--replace-all", "--rename-section", "--remove-section", "set", "unset", "edit") for w in rest):
                found.append(Effect("config", "git config writes configuration (aliases, pagers, hooks ...)", True, "config"))
    elif command in _GIT_RUNS:
        found.append(Effect("exec", f"git {command} runs hooks, helpers or configured programs", False, command))
    found += _scan("git", _GIT_SUB, rest)
    return found


# ---------------------------------------------------------------- the table
_FIND = _row({"-exec": "exec", "-execdir": "exec", "-ok": "exec", "-okdir": "exec", "-delete": "write", "-fprint": "write", "-fprint0": "write", "-fprintf": "write", "-fls": "write"}, "-fprint -fprint0 -fprintf -fls -name -iname -path -ipath -regex -newer -perm -type -user -group -size -mtime -maxdepth -mindepth -printf", style="words")
_TAR_OPTIONS = _row(
    {"--to-command": "exec", "-I": "exec", "--use-compress-program": "exec", "--checkpoint-action": "exec", "--info-script": "exec", "-F": "exec", "--new-volume-script": "exec", "--rsh-command": "exec", "--rmt-command": "exec", "--index-file": "write", "--backup": "write"},
    "-f --file -C --directory -I --use-compress-program --to-command --checkpoint-action --info-script -F --new-volume-script --rsh-command --rmt-command --index-file -T --files-from -X --exclude-from -b -H --format -V --label",
    opaque="--to-command -I --use-compress-program --checkpoint-action --info-script -F --new-volume-script --rsh-command --rmt-command",
)
_GIT_SUB = _row(
    {"--output": "write", "-o": "write", "--ext-diff": "exec", "-O": "exec", "--open-files-in-pager": "exec", "--exec": "exec", "-x": "exec", "--upload-pack": "exec", "-u": "exec", "--receive-pack": "exec", "--output-directory": "write", "--template": "config", "--config": "config"},
    "--output -o --exec -x --upload-pack -u --receive-pack --output-directory --template --config -O --open-files-in-pager -m -C -S -G --format --pretty -n --author --since --until --grep",
    opaque="--exec -x --upload-pack -u --receive-pack -O --open-files-in-pager --config",
)

TABLE: dict[str, Row] = {
    "find": _FIND,
    "fd": _row({"-x": "exec", "--exec": "exec", "-X": "exec", "--exec-batch": "exec"}),
    "fdfind": _row({"-x": "exec", "--exec": "exec", "-X": "exec", "--exec-batch": "exec"}),
    "sort": _row({"-o": "write", "--output": "write", "--compress-program": "exec"}, "-o --output --compress-program -T --temporary-directory -S --buffer-size -t --field-separator -k --key --files0-from --batch-size --parallel", opaque="--compress-program"),
    "rg": _row({"--pre": "exec", "--hostname-bin": "exec"}, "--pre --hostname-bin -e --regexp -f --file -g --glob -t --type -T --type-not -m --max-count -A -B -C --context -j --threads -M --max-columns -r --replace --ignore-file", opaque="--pre --hostname-bin"),
    "tar": Row(special=_tar),
    "sed": Row(special=_sed),
    "gsed": Row(special=_sed),
    **{awk: Row(special=_awk) for awk in ("awk", "gawk", "mawk", "nawk", "busybox-awk")},
    "xargs": Row(special=_always("exec", "xargs runs a command with words from its input", opaque=False)),
    "less": _row({"-o": "write", "--log-file": "write", "-O": "write", "--LOG-FILE": "write", "-k": "config", "--lesskey-file": "config", "--lesskey-src": "config", "--lesskey-content": "config"}, "-o --log-file -O --LOG-FILE -k --lesskey-file --lesskey-src --lesskey-content -b -h -j -p -P -t -T -x -y -z -#"),
    "more": _row({}),
    "man": _row({"-P": "exec", "--pager": "exec", "-H": "exec", "--html": "exec", "-p": "exec", "--preprocessor": "exec", "-C": "config", "--config-file": "config", "-T": "exec", "-X": "exec"}, "-P --pager -p --preprocessor -C --config-file -M --manpath -S -s --sections -L --locale -m --systems -E --encoding", opaque="-P --pager -H --html -p --preprocessor -C --config-file"),
    "env": Row(special=lambda name, args: _env(args)),
    "make": Row(special=_always("exec", "{name} runs the Makefile's recipes")),
    "gmake": Row(special=_always("exec", "{name} runs the Makefile's recipes")),
    "ninja": Row(special=_always("exec", "{name} runs the build file's commands")),
    "just": Row(special=_always("exec", "{name} runs the justfile's recipes")),
    "npx": Row(special=_always("exec", "{name} runs a package's program")),
    "git": Row(special=_git),
    "ssh": _row({"-o": "config", "-F": "config", "-E": "write", "-I": "exec", "-S": "config"}, "-o -F -E -I -S -b -c -D -e -i -J -L -l -m -O -p -Q -R -W -w -B", opaque="-o -F -I"),
    "scp": _row({"-o": "config", "-F": "config", "-S": "exec"}, "-o -F -S -c -i -J -l -P", opaque="-o -F -S"),
    "rsync": Row(special=lambda name, args: _rsync(args)),
    "curl": _row(
        {"-o": "write", "--output": "write", "-O": "write", "--remote-name": "write", "--remote-name-all": "write", "-D": "write", "--dump-header": "write", "-c": "write", "--cookie-jar": "write", "--trace": "write", "--trace-ascii": "write", "--libcurl": "write", "--stderr": "write", "--output-dir": "write", "-K": "config", "--config": "config", "--etag-save": "write", "--hsts": "write", "--alt-svc": "write"},
        "-o --output -D --dump-header -c --cookie-jar --trace --trace-ascii --libcurl --stderr --output-dir -K --config -d --data --data-binary --data-raw --data-urlencode -F --form -H --header -T --upload-file -b --cookie -u --user -x --proxy -X --request -e --referer -A --user-agent -w --write-out --cacert --cert --key -m --max-time --etag-save --etag-compare --hsts --alt-svc",
        opaque="-K --config",
    ),
    "wget": Row(special=lambda name, args: _wget(args)),
    "npm": Row(special=lambda name, args: _subcommands(name, args, {"ls", "list", "view", "info", "show", "outdated", "search", "help", "root", "prefix", "bin", "whoami", "ping", "doctor", "explain", "why", "-v", "--version", "-h", "--help"})),
    "pnpm": Row(special=lambda name, args: _subcommands(name, args, {"ls", "list", "why", "outdated", "-v", "--version", "--help"})),
    "yarn": Row(special=lambda name, args: _subcommands(name, args, {"list", "info", "why", "outdated", "-v", "--version", "--help"})),
    "pip": Row(special=lambda name, args: _subcommands(name, args, {"list", "show", "freeze", "check", "help", "-V", "--version", "-h", "--help", "search", "index", "inspect"})),
    "cargo": Row(special=lambda name, args: _subcommands(name, args, {"tree", "metadata", "version", "--version", "-V", "search", "locate-project", "pkgid", "verify-project", "help", "--help"})),
    "go": Row(special=lambda name, args: _subcommands(name, args, {"version", "env", "list", "doc", "help", "fmt"})),
}
for _alias, _name in (("pip3", "pip"), ("nodejs", "node"), ("gawk", "awk")):
    if _name in TABLE:
        TABLE.setdefault(_alias, TABLE[_name])

WRAPPERS = frozenset({"timeout", "nice", "nohup", "stdbuf", "ionice", "chrt", "taskset", "time", "command", "builtin", "exec", "setsid", "sudo", "doas", "env", "flock", "watch", "unbuffer", "strace", "ltrace"})
"""Programs that run another program: ``invocations`` looks through them and the wrapped
program must be covered on its own (an allow rule for ``timeout *`` is not one for rm)."""


def _env(args: list[Word]) -> list[Effect]:
    found: list[Effect] = []
    for k, w in enumerate(args):
        if not w.static:
            return [Effect("exec", "env with a word only known at run time", opaque=True)]
        t = w.text
        if t in ("-S", "--split-string") or t.startswith(("-S", "--split-string=")):
            found.append(Effect("exec", "env -S runs a command line", False, "-S"))
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", t, re.DOTALL):
            found.append(Effect("config", f"env sets {t.split('=', 1)[0]} for the program it runs (variables can load code or change what runs)", False, t.split("=", 1)[0]))
        elif not t.startswith("-"):
            break
    return found


def _rsync(args: list[Word]) -> list[Effect]:
    found = _scan("rsync", _row({"-e": "exec", "--rsh": "exec", "--rsync-path": "exec"}, "-e --rsh --rsync-path --exclude --include --filter -f --files-from --log-file --password-file -T --temp-dir --partial-dir", opaque="-e --rsh --rsync-path"), args)
    if not any(w.fixed and w.text == "--list-only" for w in args):
        found.append(Effect("write", "rsync copies files", False, "rsync"))
    return found


def _wget(args: list[Word]) -> list[Effect]:
    found = _scan("wget", _row({"-e": "config", "--execute": "config", "--config": "config", "-o": "write", "--output-file": "write", "-a": "write", "--append-output": "write"}, "-e --execute --config -o --output-file -a --append-output -O --output-document -P --directory-prefix -U --user-agent --header", opaque="-e --execute --config"), args)
    texts = [w.text for w in args]
    to_stdout = any(t in ("-O-", "--output-document=-") or t == "-O" and k + 1 < len(texts) and texts[k + 1] == "-" for k, t in enumerate(texts))
    if not to_stdout and "--spider" not in texts:
        found.append(Effect("write", "wget saves what it downloads", False, "wget"))
    return found


def _subcommands(name: str, args: list[Word], read_only: set[str]) -> list[Effect]:
    first = next((w for w in args if not (w.fixed and w.text.startswith("-") and w.text not in read_only)), None)
    if first is not None and first.fixed and first.text in read_only:
        return []
    if first is None and args and all(w.fixed and w.text in read_only for w in args):
        return []
    sub = first.text if first is not None and first.fixed else ""
    return [Effect("exec", f"{name} {sub}".rstrip() + " runs package scripts or builds code", False, sub or name)]


# ---------------------------------------------------------------- the scanner
def _long(row: Row, key: str) -> str:
    """A long option as the program reads it: the name, or the table option it is an
    unambiguous abbreviation of (GNU getopt takes ``--out`` for ``--output``)."""
    if key in row.options or key in row.valued:
        return key
    names = {o for o in (*row.options, *row.valued) if o.startswith("--") and o.startswith(key)}
    if len(key) > 2 and len(names) >= 1:
        dangerous = [o for o in names if o in row.options]
        return dangerous[0] if dangerous else sorted(names)[0]
    return key


def _scan(name: str, row: Row, args: Sequence[Word]) -> list[Effect]:
    found: list[Effect] = []
    i = 0
    while i < len(args):
        w = args[i]
        if not w.static:
            if row.options:
                found.append(Effect("exec", f"{name} with a word only known at run time (it could be an option)", opaque=True))
                return found
            i += 1
            continue
        t = w.text
        if t == "--" and row.style == "gnu":
            break
        if row.style == "words":
            if t in row.options:
                kind, opaque = row.options[t]
                found.append(Effect(kind, f"{name} {t}", opaque, t))
            i += 2 if t in row.valued else 1
            continue
        if t.startswith("--"):
            key = _long(row, t.split("=", 1)[0])
            if key in row.options:
                kind, opaque = row.options[key]
                found.append(Effect(kind, f"{name} {key}", opaque, t.split("=", 1)[0]))
            i += 2 if key in row.valued and "=" not in t else 1
            continue
        if t.startswith("-") and len(t) > 1:
            for k, letter in enumerate(t[1:], 1):
                option = "-" + letter
                if option in row.options:
                    kind, opaque = row.options[option]
                    found.append(Effect(kind, f"{name} {option}", opaque, option))
                if option in row.valued:
                    i += 1 if k < len(t) - 1 else 0
                    break
            i += 1
            continue
        i += 1
    return found


def effects(words: Sequence[Word]) -> list[Effect]:
    """What the options of one simple command do beyond reading (empty for programs not
    in the table, and for a program only known at run time: that is another check)."""
    if not words or not words[0].fixed:
        return []
    name = posixpath.basename(words[0].text.rstrip("/")) or words[0].text
    args = list(words[1:])
    if name in SHELLS:
        if args and all(w.fixed and w.text in ("--version", "--help") for w in args):
            return []
        return [Effect("exec", f"{name} runs shell code", False, name)]
    if INTERPRETERS.fullmatch(name):
        return _interpreter(name, args)
    row = TABLE.get(name)
    if row is None:
        return []
    if row.special is not None:
        return row.special(name, args)
    return _scan(name, row, args)


# ---------------------------------------------------------------- paths in option values
def option_paths(words: Sequence[Word]) -> list[str]:
    """The paths one simple command may open, as written: its operands and the values of
    its options (``--file=F``, ``-fF``, ``@F``, ``name=@F``). Over-inclusive on purpose:
    the deny and ask path rules look at them, and a false hit only asks."""
    found: list[str] = []
    for w in words[1:]:
        if not w.static and w.text.startswith("~") and not re.search(r"[$`]", w.text):
            found.append(w.text)  # a home-relative path (the path rules expand ~)
            continue
        if not w.fixed or not w.text:
            continue
        t = w.text
        if t.startswith("--") and "=" in t:
            value = t.split("=", 1)[1]
            found.append(value[1:] if value.startswith("@") else value)
        elif t.startswith("-") and not t.startswith("--") and len(t) > 2:
            found.append(t[2:])
            if t[2:].startswith("@"):
                found.append(t[3:])
        elif t.startswith("@"):
            found.append(t[1:])
        else:
            found.append(t)
            if "=@" in t:
                found.append(t.split("=@", 1)[1])
            elif "=" in t:
                found.append(t.split("=", 1)[1])
    return [p for p in dict.fromkeys(found) if p]


def vouched(effect: Effect, pattern: str) -> bool:
    """Whether an allow pattern names what causes the effect before its first ``*``
    (``make test*`` vouches for make running recipes; ``find *`` not for ``-exec``)."""
    if not effect.trigger:
        return False
    literal = " ".join(pattern.split("*", 1)[0].split())
    words = literal.split()
    if words and posixpath.basename(words[0]) == effect.trigger and (len(words) < 2 or "*" not in pattern and len(words) < 2):
        return False  # the program's own effect: "make *" does not vouch, "make test*" does
    return re.search(rf"(?:^|[\s/]){re.escape(effect.trigger)}(?:$|[\s=])", literal) is not None
