"""A Rich Markdown variant whose code blocks have no background and no padding."""

from __future__ import annotations

from typing import Any


def plain_code_markdown() -> Any:
    """Build (lazily, Rich imported on call) a Markdown class with background-free code."""
    from rich.markdown import CodeBlock, Heading, Markdown
    from rich.syntax import Syntax

    class PlainCodeBlock(CodeBlock):
        def __rich_console__(self, console: Any, options: Any) -> Any:
            code = str(self.text).rstrip()
            yield Syntax(code, self.lexer_name, theme=self.theme, word_wrap=True,
                         background_color="default", padding=0)

    class LeftHeading(Heading):
        LEVEL_ALIGN = {tag: "left" for tag in Heading.LEVEL_ALIGN}

    from markdown_it import MarkdownIt

    parser = MarkdownIt().enable("strikethrough").enable("table")

    class PlainMarkdown(Markdown):
        """Rich's Markdown with one shared parser (Rich builds a new one per instance,
        which was a third of the cost of re-rendering the open block)."""

        def __init__(self, markup: str, code_theme: str = "monokai", hyperlinks: bool = False) -> None:
            self.markup = markup
            self.parsed = parser.parse(markup)
            self.code_theme = code_theme
            self.justify = None
            self.style = "none"
            self.hyperlinks = hyperlinks
            self.inline_code_lexer = None
            self.inline_code_theme = code_theme

        elements = {
            **Markdown.elements,
            "fence": PlainCodeBlock,
            "code_block": PlainCodeBlock,
            "heading_open": LeftHeading,
        }

    return PlainMarkdown
