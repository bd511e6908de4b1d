"""The provider matrix of hosted web search: one row per provider or access path.

``capability`` decides over these rows; ``ketch models --capabilities`` prints them. Each row
says which connections (presets, official hosts, endpoint paths) and which models it covers,
and over which protocols ketch can run that provider's search (none: a documented gap).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Protocol = Literal["openai-responses", "anthropic-messages", "openrouter", "gemini", "zai-chat", "mistral-conversations",
                   "groq-compound"]


def bare_model(model_name: str) -> str:
    """``openai:gpt-5`` or ``deepseek/deepseek-v4-pro`` -> the model id itself, lowercased."""
    return re.split(r"[:/]", model_name.strip())[-1].lower()


@dataclass(frozen=True)
class CapabilityRule:
    """One row of the provider matrix: who offers hosted search for which models, over what."""

    provider: str
    """Display name of the provider or access path."""
    presets: tuple[str, ...]
    """Connection presets this row covers (used when the connection has no base URL)."""
    hosts: tuple[str, ...]
    """Official API hosts; when a connection has a base URL its host must be one of these."""
    models: str
    """Regular expression (case-insensitive, anchored at the start) for the model ids covered."""
    protocols: tuple[Protocol, ...] = ()
    """Protocols ketch can use, preferred first; empty when ketch has no hosted path here."""
    note: str = ""
    model_family: str = ""
    """Human description of ``models``."""
    dynamic_models: str = ""
    """Anthropic only: the models (same syntax as ``models``) that take ``web_search_20260209``
    (dynamic filtering) on this row's official hosts; empty: none."""
    paths: tuple[str, ...] = ()
    """Base-URL path prefixes this row is limited to (one host, several endpoints); empty: any."""

    @property
    def supported(self) -> bool:
        return bool(self.protocols)

    def covers_connection(self, preset: str, host: str, path: str = "") -> bool:
        if host:
            return host in self.hosts and (not self.paths or path.startswith(self.paths))
        return preset in self.presets and not self.paths

    def covers_model(self, model_name: str) -> bool:
        return re.match(self.models, bare_model(model_name), re.IGNORECASE) is not None

    def filters_dynamically(self, model_name: str) -> bool:
        """Whether ``model_name`` takes the dynamic-filtering search tool on this row."""
        return bool(self.dynamic_models) and re.match(
            self.dynamic_models, bare_model(model_name), re.IGNORECASE
        ) is not None


CAPABILITY_RULES: tuple[CapabilityRule, ...] = (
    CapabilityRule(
        "OpenAI API", ("openai",), ("api.openai.com",), r"gpt-5", ("openai-responses",),
        "official connection only", "GPT-5 families",
    ),
    CapabilityRule(
        "DeepSeek", ("deepseek",), ("api.deepseek.com",), r"deepseek-v4-(flash|pro)\b",
        ("openai-responses", "anthropic-messages"),
        "Responses unless the connection speaks Anthropic Messages", "deepseek-v4-flash, deepseek-v4-pro",
    ),
    CapabilityRule(
        "xAI", ("xai",), ("api.x.ai",), r"grok-4", ("openai-responses",),
        "Responses wire", "Grok 4 families",
    ),
    CapabilityRule(
        "Anthropic", ("anthropic",), ("api.anthropic.com",),
        r"claude-((opus|sonnet|haiku|fable)-[4-9]|3-7-sonnet|3-5-haiku)", ("anthropic-messages",),
        "official connection only; web_search_20260209 (dynamic filtering) opt-in for the marked models",
        "Claude Opus/Sonnet/Haiku/Fable",
        dynamic_models=r"claude-(opus-4-[6-9]|sonnet-4-6|(opus|sonnet|fable|mythos)-5|haiku-5-5|mythos-preview)",
    ),
    CapabilityRule(
        "MiniMax", ("minimax",), ("api.minimax.io", "api.minimaxi.com"), r"minimax-m(2\.7|3)",
        ("anthropic-messages",), "Anthropic-compatible wire", "MiniMax M2.7, M3",
    ),
    CapabilityRule(
        "OpenRouter", ("openrouter",), ("openrouter.ai",), r".", ("openrouter",),
        "openrouter:web_search server tool on the Chat model in OpenRouter's dialect; a model "
        "id ending in :online counts as the opt-in and is sent without the tag (search on the wire once)",
        "routed models (search runs at OpenRouter)",
    ),
    CapabilityRule(
        "Alibaba Model Studio", ("qwen", "dashscope", "alibaba"),
        ("dashscope.aliyuncs.com", "dashscope-intl.aliyuncs.com"), r"qwen3\.5-(plus|flash)\b",
        ("openai-responses",),
        "Responses web_search, the OpenAI tool shape; needs wire = openai-responses and the "
        "/api/v2/apps/protocols/compatible-mode/v1 base URL",
        "Qwen 3.5 Plus/Flash",
    ),
    CapabilityRule(
        "Google Gemini", ("gemini", "google"), ("generativelanguage.googleapis.com",),
        r"gemini-[3-9]", ("gemini",),
        "grounding with Google Search (google_search tool) on the native gemini wire",
        "Gemini 3+ (2.x cannot combine Google Search with function tools)",
    ),
    CapabilityRule(
        "Groq compound", ("groq",), ("api.groq.com",), r"compound(-beta)?(-mini)?$", ("groq-compound",),
        "the model searches by itself (executed_tools); it takes no function tools, so ketch sends none",
        "groq/compound, groq/compound-mini",
    ),
    CapabilityRule(
        "Groq", ("groq",), ("api.groq.com",), r".",
        note="no hosted search: Groq does not document browser_search (gpt-oss) together with function tools",
    ),
    CapabilityRule(
        "Z.AI GLM Coding Plan", ("zai", "glm"), ("api.z.ai", "open.bigmodel.cn"), r".",
        note="the coding endpoint (/api/coding/) offers search only as a separate MCP server, "
        "not as its chat tool", paths=("/api/coding/",),
    ),
    CapabilityRule(
        "Z.AI / GLM", ("zai", "glm"), ("api.z.ai", "open.bigmodel.cn"),
        r"glm-(4\.[5-9]|5(\.\d+)?)(-[a-z]+)*$", ("zai-chat",),
        "web_search tool of its chat endpoint (/api/paas/v4); never the standalone Web Search API",
        "GLM-4.5+ and GLM-5 text models",
    ),
    CapabilityRule(
        "Mistral", ("mistral",), ("api.mistral.ai",), r".", ("mistral-conversations",),
        "web_search connector of the Conversations API (/v1/conversations, store: false); a searching "
        "session's requests move there from Chat Completions", "any Mistral model (per its websearch docs)",
    ),
    CapabilityRule(
        "Moonshot", ("moonshot", "kimi"), ("api.moonshot.ai", "api.moonshot.cn"), r".",
        note="no hosted search in the model API",
    ),
    CapabilityRule(
        "Cohere, Together, Fireworks, SiliconFlow",
        ("cohere", "together", "fireworks", "siliconflow"),
        ("api.cohere.com", "api.cohere.ai", "api.together.xyz", "api.fireworks.ai",
         "api.siliconflow.cn", "api.siliconflow.com"),
        r".", note="no hosted search; use source = tavily",
    ),
)
"""The provider matrix. First matching row decides; rows without protocols are documented gaps."""
