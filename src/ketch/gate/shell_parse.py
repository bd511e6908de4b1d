"""Parse a bash command line into what it would run, with tree-sitter's bash grammar.

The result lists every simple command (program and arguments, quotes resolved where the
value is fixed before the command runs) wherever it stands: in pipelines and lists, in
subshells and groups, in command and process substitutions, in function bodies and
control structures, in here-document bodies. Next to them it lists *hazards*: everything
that lets a command line write or run code beyond the programs it names (a redirection
that opens a file for writing, a substitution, a background job, a subshell, a function
definition, a variable assignment, ``eval``/``source``, an arithmetic expansion, a here-doc
feeding a shell, ...). A permission rule may allow a command only when it has none.

The grammar is a guess at what bash will do; where it reports an error or a missing token
(``error``), nothing about the command is proved and callers must ask.

The tree-sitter modules are imported on first use, never at import time of this module.

It is one thing at this length: one walk over one tree-sitter parse, producing the simple
commands and the hazards together; split, the two halves would walk the tree twice and
disagree about where a command starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ketch.gate.shell_disagreements import joined_lines, skipped_text, split_continuation
from ketch.gate.shell_heredocs import heredoc_mismatch

MAX_COMMAND_BYTES = 256 * 1024
"""Longer command lines are not parsed (and so never allowed by a rule)."""


@dataclass(frozen=True)
class Word:
    """One word of a simple command."""

    text: str
    """The value bash passes when ``static``; otherwise the source text."""
    static: bool = True
    """Fixed before the command runs: no expansion or substitution in it."""
    glob: bool = False
    """Unquoted glob or brace characters: bash may turn it into other words."""

    @property
    def fixed(self) -> bool:
        """Both static and not subject to pathname or brace expansion."""
        return self.static and not self.glob


@dataclass(frozen=True)
class SimpleCommand:
    """A program and its arguments, as one node of the parse."""

    words: tuple[Word, ...]
    assignments: tuple[str, ...] = ()
    """``NAME=value`` prefixes, as written."""
    stdin_from_text: bool = False
    """Standard input is a here-document or here-string."""
    enclosed_by: str = ""
    """Empty at the top level; else the construct around it (``subshell`` ...)."""


@dataclass(frozen=True)
class ParsedCommand:
    """Everything a command line would run, and why a rule could not vouch for it."""

    source: str
    commands: tuple[SimpleCommand, ...] = ()
    hazards: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    """Destinations of redirections that open a file for writing, as written."""
    error: str = ""
    """Why the grammar could not parse the command (then nothing is proved)."""
    assignments: tuple[str, ...] = ()
    """Every ``NAME=value`` in it (prefixes, statements, declarations), as written."""
    opaque: tuple[str, ...] = ()
    """Code bash will run that the grammar did not parse (e.g. a backtick in a here-doc)."""

    @property
    def plain(self) -> bool:
        """Parsed, and nothing in it writes or runs code besides its simple commands."""
        return not self.error and not self.hazards


SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "yash", "tcsh", "csh"})
INTERPRETERS = re.compile(r"(python[0-9.]*|pypy[0-9.]*|node|nodejs|deno|bun|perl[0-9.]*|ruby[0-9.]*|php[0-9.]*|lua[0-9.]*|luajit|tclsh|wish|Rscript|osascript|pwsh|powershell)")

_STRUCTURES = {
    "subshell": "a subshell",
    "compound_statement": "a command group",
    "if_statement": "an if statement",
    "while_statement": "a loop",
    "for_statement": "a loop",
    "c_style_for_statement": "a loop",
    "case_statement": "a case statement",
    "function_definition": "a function definition",
}
_SUBSTITUTIONS = {
    "command_substitution": "a command substitution",
    "process_substitution": "a process substitution",
    "arithmetic_expansion": "an arithmetic expansion (it can run commands through array subscripts)",
    "test_command": "a test expression",
    "declaration_command": "a declaration (export/declare/local/readonly)",
    "unset_command": "an unset",
    "variable_assignment": "a variable assignment",
    "variable_assignments": "a variable assignment",
}
_PASS_THROUGH = frozenset({"program", "list", "pipeline", "negated_command", "redirected_statement", "do_group", "else_clause", "elif_clause", "case_item"})
_RUNS_TEXT = frozenset({"eval", "source", ".", "trap", "alias", "enable", "fc", "mapfile", "readarray", "coproc"})
_RESERVED = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "case", "esac", "while", "until", "for", "in", "select", "function", "{", "}", "[[", "]]", "!"})
"""Words bash reads as syntax in a command's first position (the grammar sometimes reads
them as a program: ``! if x; then ...``)."""
_HARMLESS_TARGETS = frozenset({"/dev/null"})
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>"})
_TILDE = re.compile(r"(?:^|[=:])~")
"""An unquoted tilde bash expands: at a word's start, or after ``=`` or ``:`` (bash does
it in arguments that look like assignments too)."""
_GLOB_CHARS = re.compile(r"(?<!\\)[*?\[]|(?<!\\)\{.*(?<!\\)\}")


@lru_cache(maxsize=1)
def _parser() -> Any:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


@lru_cache(maxsize=512)
def parse_command(source: str) -> ParsedCommand:
    """Parse one command line (cached: the gate asks about the same command several times)."""
    data = source.encode("utf-8", "surrogatepass")
    if len(data) > MAX_COMMAND_BYTES:
        return ParsedCommand(source, error=f"the command is longer than {MAX_COMMAND_BYTES // 1024} KB")
    if "\x00" in source:
        return ParsedCommand(source, error="the command contains a NUL byte")
    tree = _parser().parse(data)
    if tree.root_node.has_error:
        try:
            at = _first_error(tree.root_node)
        except RecursionError:
            at = (0, 0)
        return ParsedCommand(source, error=f"bash syntax ketch cannot parse near line {at[0] + 1}, column {at[1] + 1}")
    split = split_continuation(tree.root_node, data)
    if split is not None:
        return ParsedCommand(source, error=f"a line continuation splits a word near byte {split}, which bash would join")
    try:
        joined = joined_lines(tree.root_node, data)
        heredoc = heredoc_mismatch(tree.root_node, data)
    except RecursionError:
        return ParsedCommand(source, error="the command is nested too deeply to follow")
    if joined is not None:
        return ParsedCommand(source, error=f"the grammar read {joined[1]} near byte {joined[0]}, which bash would not")
    if heredoc is not None:
        return ParsedCommand(source, error=f"a here-document near byte {heredoc} that bash may end elsewhere")
    skipped = skipped_text(tree.root_node, data)
    if skipped is not None:
        return ParsedCommand(source, error=f"the grammar skipped text near byte {skipped} that bash would read")
    walker = _Walker(data=data)
    try:
        walker.visit(tree.root_node, "")
    except RecursionError:
        return ParsedCommand(source, error="the command is nested too deeply to follow")
    if walker.error:
        return ParsedCommand(source, error=walker.error)
    return ParsedCommand(
        source,
        tuple(walker.commands),
        tuple(dict.fromkeys(walker.hazards)),
        tuple(walker.writes),
        assignments=tuple(walker.assignments),
        opaque=tuple(walker.opaque),
    )


def _first_error(node: Any) -> tuple[int, int]:
    if node.type == "ERROR" or node.is_missing:
        return tuple(node.start_point)  # type: ignore[return-value]
    for child in node.children:
        if child.has_error:
            return _first_error(child)
    return tuple(node.start_point)  # type: ignore[return-value]


def _text(node: Any) -> str:
    return node.text.decode("utf-8", "surrogateescape")


def _unescape_word(raw: str) -> str:
    """An unquoted word's value: a backslash quotes the next character, and a
    backslash-newline disappears."""
    return re.sub(r"\\(\n|.)", lambda m: "" if m.group(1) == "\n" else m.group(1), raw, flags=re.DOTALL)


def _unescape_double(inner: str) -> str:
    return re.sub(r'\\([$`"\\\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), inner)


_ANSI_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _ansi_c(inner: str) -> str | None:
    """A ``$'...'`` string's value as bash makes it; None for escapes ketch does not
    work out (``\\c``, ``\\u``, octal or hex that is not plain ASCII ...)."""
    out, i = [], 0
    while i < len(inner):
        c = inner[i]
        if c != "\\" or i + 1 == len(inner):
            out.append(c)
            i += 1
            continue
        e = inner[i + 1]
        if e in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[e])
            i += 2
        elif e in "01234567":
            m = re.match(r"[0-7]{1,3}", inner[i + 1 :])
            assert m is not None
            value = int(m.group(0), 8)
            if not 0 < value < 128:
                return None
            out.append(chr(value))
            i += 1 + len(m.group(0))
        elif e == "x":
            m = re.match(r"[0-9a-fA-F]{1,2}", inner[i + 2 :])
            if m is None or not 0 < int(m.group(0), 16) < 128:
                return None
            out.append(chr(int(m.group(0), 16)))
            i += 2 + len(m.group(0))
        elif e in "cuU":
            return None
        else:
            out.append(c + e)  # bash keeps an unknown escape (and a backslash-newline) as written
            i += 2
    return "".join(out)


@dataclass
class _Walker:
    commands: list[SimpleCommand] = field(default_factory=list)
    hazards: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    assignments: list[str] = field(default_factory=list)
    opaque: list[str] = field(default_factory=list)
    error: str = ""
    data: bytes = b""
    """The command line's bytes (to see what follows a word)."""
    stdin_next: bool = False
    """The next simple command's input is a here-document (set by its redirected statement)."""

    # ------------------------------------------------------------ statements
    def visit(self, node: Any, enclosed: str) -> None:
        if self.error:
            return
        kind = node.type
        if node.is_missing or kind == "ERROR":
            at = node.start_point
            self.error = f"bash syntax ketch cannot parse near line {at[0] + 1}, column {at[1] + 1}"
            return
        if not node.is_named:
            if kind == "&":
                self.hazards.append("a background job (&)")
            return
        if kind == "comment":
            return
        if kind == "pipeline":
            later = [c for c in node.named_children[1:] if c.type == "negated_command"]
            if later:  # bash refuses ``a | ! b`` (``!`` only starts a pipeline); the grammar takes it
                self.error = f"bash syntax ketch cannot parse: '!' inside a pipeline near byte {later[0].start_byte}"
                return
        if kind == "command":
            self._command(node, enclosed)
        elif kind in _PASS_THROUGH:
            body = node.child_by_field_name("body") if kind == "redirected_statement" else None
            if body is not None and body.type == "command":
                self.stdin_next = any(c.type in ("heredoc_redirect", "herestring_redirect") for c in node.children)
                after = body.next_sibling
                if body.children and after is not None and after.type.endswith("redirect") and _descriptor_like(body.children[-1], after):
                    self.error = f"a word bash reads as the file descriptor of a redirection near byte {after.start_byte}"
                    return
            for child in node.children:
                self._redirect(child, enclosed) if child.type.endswith("redirect") else self.visit(child, enclosed)
        elif kind in _STRUCTURES:
            self.hazards.append(_STRUCTURES[kind])
            for child in node.children:
                self.visit(child, enclosed or kind)
        elif kind.endswith("redirect"):
            self._redirect(node, enclosed)
        else:
            self._expression(node, enclosed)

    def _expression(self, node: Any, enclosed: str) -> None:
        """Anything inside a word or a statement we do not model: note a hazard for
        constructs that run or set something, and look for commands inside."""
        kind = node.type
        if kind == "variable_assignment":
            self.assignments.append(_text(node))
        if kind in _SUBSTITUTIONS:
            self.hazards.append(_SUBSTITUTIONS[kind])
        elif kind == "expansion" and not _plain_expansion(node):
            self.hazards.append(f"a parameter expansion with an operator ({_text(node)[:40]})")
        elif kind not in _WORD_KINDS and kind not in _INERT:
            self.hazards.append(f"a construct ketch does not model ({kind})")
        inner = enclosed or (kind if kind in _SUBSTITUTIONS else "")
        for child in node.children:
            self.visit(child, inner) if child.type in _STATEMENTS else self._expression_child(child, inner)

    def _expression_child(self, child: Any, enclosed: str) -> None:
        if child.is_missing or child.type == "ERROR":
            self.visit(child, enclosed)
        elif child.is_named:
            self._expression(child, enclosed)

    # ------------------------------------------------------------ simple commands
    def _command(self, node: Any, enclosed: str) -> None:
        words: list[Word] = []
        assignments: list[str] = []
        stdin_text, self.stdin_next = self.stdin_next, False
        for child in node.children:
            if node.field_name_for_child(node.children.index(child)) == "argument" and re.fullmatch(r"\d+|\{\w+\}", _text(child)) and self.data[child.end_byte : child.end_byte + 1] in (b"<", b">"):
                self.error = f"a word bash reads as the file descriptor of a redirection near byte {child.start_byte}"
                return
        for left, right in zip(node.children, node.children[1:]):
            if right.type.endswith("redirect") and _descriptor_like(left, right):
                self.error = f"a word bash reads as the file descriptor of a redirection near byte {left.start_byte}"
                return
        head = node.child_by_field_name("name")
        if head is not None and _text(head) in _RESERVED:
            self.error = f"the reserved word {_text(head)!r} read as a program name near byte {head.start_byte}"
            return
        for i, child in enumerate(node.children):
            name = node.field_name_for_child(i)
            if child.type == "variable_assignment":
                assignments.append(_text(child))
                self._expression(child, enclosed)
            elif child.type.endswith("redirect"):
                stdin_text |= child.type in ("heredoc_redirect", "herestring_redirect")
                self._redirect(child, enclosed)
            elif child.type == "command_name" or name in ("name", "argument"):
                target = child.children[0] if child.type == "command_name" and child.children else child
                words.append(self.word(target, enclosed))
            elif child.is_named:
                self._expression(child, enclosed)
        self.commands.append(SimpleCommand(tuple(words), tuple(assignments), stdin_text, enclosed))
        if not words:
            return
        program = words[0].text.rsplit("/", 1)[-1]
        if not words[0].fixed:
            self.hazards.append(f"a program name built at run time ({words[0].text[:40]})")
        elif program in _RUNS_TEXT:
            self.hazards.append(f"{program} (runs text as commands)")
        if stdin_text and (program in SHELLS or INTERPRETERS.fullmatch(program)):
            self.hazards.append("a here-document feeding a shell or an interpreter")

    def _redirect(self, node: Any, enclosed: str) -> None:
        if node.type == "file_redirect":
            ops = [c.type for c in node.children if not c.is_named]
            dest = node.child_by_field_name("destination")
            op = ops[0] if ops else ""
            dest_text = _text(dest) if dest is not None else ""
            word = self.word(dest, enclosed) if dest is not None else Word("", False)
            if op in _WRITE_OPS:
                if not (word.fixed and word.text in _HARMLESS_TARGETS):
                    self.hazards.append(f"a redirection that writes to {dest_text or 'a file'}")
                    self.writes.append(word.text if word.fixed else dest_text)
            elif op in (">&", "<&"):
                if dest is None or not re.fullmatch(r"\d+|-", dest_text):
                    self.hazards.append(f"a redirection that writes to {dest_text or 'a file'}")
                    self.writes.append(dest_text)
            elif op == "<":
                if word.fixed and word.text.startswith(("/dev/tcp/", "/dev/udp/")):
                    self.hazards.append(f"a redirection that opens a network connection ({dest_text[:40]})")
            elif op not in (">&-", "<&-"):
                self.hazards.append(f"a redirection ketch does not model ({op or _text(node)[:20]})")
            for child in node.children:
                if child.type in _STATEMENTS:
                    self.visit(child, enclosed)
        elif node.type in ("heredoc_redirect", "herestring_redirect"):
            self._expanded_body(node)
            # a here-document node also holds what follows it on the line (| sh, && x, > f)
            for child in node.children:
                if not child.is_named:
                    if child.type == "&":
                        self.hazards.append("a background job (&)")
                elif child.type == "heredoc_body":
                    self._body(child, enclosed)
                elif child.type.endswith("redirect"):
                    self._redirect(child, enclosed)
                elif child.type in _STATEMENTS:
                    self.visit(child, enclosed)
                elif child.type not in ("heredoc_start", "heredoc_end"):
                    self._expression(child, enclosed)  # the here-string's word
        else:
            self.hazards.append(f"a redirection ketch does not model ({node.type})")
            self._expression(node, enclosed)

    def _expanded_body(self, node: Any) -> None:
        """An unquoted here-document's body is expanded by bash, but the grammar leaves
        backticks (and ``<<-`` bodies) unparsed: any substitution syntax in it is code
        the parse cannot see."""
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        if start is None or body is None or re.search(r"['\"\\]", _text(start)):
            return
        if re.search(r"`|\$\(|\$\{|\$\[", _text(body)):
            self.hazards.append("a here-document whose body bash expands with substitutions")
            self.opaque.append("a here-document body with substitutions")

    def _body(self, node: Any, enclosed: str) -> None:
        for child in node.children:
            if child.is_named and child.type != "heredoc_content":
                self._expression(child, enclosed)

    # ------------------------------------------------------------ words
    def word(self, node: Any, enclosed: str) -> Word:
        """The value of a word node; walks it for substitutions and hazards."""
        kind = node.type
        raw = _text(node)
        if node.is_missing or kind == "ERROR":
            self.visit(node, enclosed)
            return Word(raw, False)
        if kind == "word":
            if _TILDE.search(raw):
                return Word(raw, False)  # bash puts a home directory there
            return Word(_unescape_word(raw), True, bool(_GLOB_CHARS.search(raw)))
        if kind == "number":
            return Word(raw)
        if kind == "raw_string":
            return Word(raw[1:-1])
        if kind == "ansi_c_string":
            value = _ansi_c(raw[2:-1])
            return Word(raw, False) if value is None else Word(value)
        if kind == "string" and all(c.type in ('"', "string_content") for c in node.children):
            return Word(_unescape_double(raw[1:-1]))
        if kind == "concatenation":
            parts = [self.word(c, enclosed) for c in node.children if c.is_named or c.type not in ("{", "}")]
            if any(c.type == "word" and _TILDE.search(_text(c)) for c in node.children):
                return Word(raw, False)
            glob = any(p.glob for p in parts) or bool(_GLOB_CHARS.search("".join(_text(c) for c in node.children if c.type == "word")))
            if all(p.static for p in parts):
                return Word("".join(p.text for p in parts), True, glob)
            return Word(raw, False, glob)
        self._expression(node, enclosed)
        return Word(raw, False)


_STATEMENTS = frozenset({"command", "redirected_statement", "pipeline", "list", "subshell", "compound_statement", "if_statement", "while_statement", "for_statement", "c_style_for_statement", "case_statement", "function_definition", "negated_command", "test_command", "declaration_command", "unset_command", "variable_assignment", "variable_assignments", "ERROR"})
_WORD_KINDS = frozenset({"word", "number", "raw_string", "ansi_c_string", "string", "string_content", "concatenation", "simple_expansion", "expansion", "variable_name", "special_variable_name", "heredoc_body", "heredoc_content", "translated_string", "brace_expression", "array", "extglob_pattern"})
_INERT = frozenset({"file_descriptor", "test_operator", "binary_expression", "unary_expression", "parenthesized_expression", "postfix_expression", "ternary_expression", "subscript", "regex", "command_name"})


def _descriptor_like(word: Any, redirect: Any) -> bool:
    """A word that ends where a redirection starts and that bash would read as its file
    descriptor (``a\\<newline> 2>&1``: the grammar reads ``2`` as an argument)."""
    return word.end_byte == redirect.start_byte and re.fullmatch(r"\d+|\{\w+\}", _text(word)) is not None


def _plain_expansion(node: Any) -> bool:
    """``${NAME}``: a plain variable reference with no operator."""
    named = [c for c in node.children if c.is_named]
    anonymous = [c.type for c in node.children if not c.is_named]
    return len(named) == 1 and named[0].type in ("variable_name", "special_variable_name") and anonymous == ["${", "}"]


