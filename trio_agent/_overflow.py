"""What kind of failure an error reply is, and whether the context no longer fits.

:func:`error_kind` names the kind of a failure (an :data:`~trio_agent.ErrorKind`)
from what the server said: the HTTP status, the codes of its error body (OpenAI's
``code`` and ``type``, Anthropic's ``type``, Google's ``status``) and its text.
The providers call it only on the error path. :func:`is_context_overflow` is the
public test for a reply that failed, or stopped, because the conversation no
longer fits the model's context window, as pi-ai's ``isContextOverflow`` tells it.

Whatever a server sends, neither raises: the text is matched with RE2, in time
linear in its length, and every value is read for what its type is.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, Final

from ._messages import AssistantMessage, ErrorKind

__all__ = ["error_kind", "is_context_overflow"]

# Each service's way of saying that the input is too long, with an example of its text.
_OVERFLOW: Final[tuple[tuple[str, str], ...]] = (
    # Anthropic (and z.ai): "prompt is too long: 213462 tokens > 200000 maximum"
    (r"prompt (?:is )?too long", "Anthropic, z.ai"),
    # z.ai's China endpoint: "Prompt exceeds max length"
    (r"prompt exceeds max length", "z.ai (CN)"),
    # Anthropic, a request of too many bytes (HTTP 413): "request_too_large"
    (r"request_too_large", "Anthropic (413)"),
    # Amazon Bedrock: "Input is too long for requested model."
    (r"input is too long for requested model", "Amazon Bedrock"),
    # OpenAI, chat and Responses: "Your input exceeds the context window of this model."
    (r"exceeds the context window", "OpenAI"),
    # proxies of the OpenAI API (LiteLLM, vLLM): "... exceeds the model's maximum context
    # length of 131072 tokens", "Input length (265330) exceeds model's maximum context
    # length (262144)."
    (
        r"exceeds (?:the )?(?:model'?s )?maximum context length"
        r"(?: of [\d,]+ tokens?|\s*\([\d,]+\))",
        "OpenAI-compatible proxies",
    ),
    # LiteLLM's own check before the call: "ContextWindowExceededError: ... Context Window
    # exceeded for given call."
    (r"context window exceeded", "LiteLLM"),
    # Google Gemini: "The input token count (1196265) exceeds the maximum number of tokens
    # allowed (1048575)."
    (r"input token count.*exceeds the maximum", "Google"),
    # xAI: "This model's maximum prompt length is 131072 but the request contains 537812
    # tokens."
    (r"maximum prompt length is \d+", "xAI"),
    # Groq: "Please reduce the length of the messages or completion."
    (r"reduce the length of the messages", "Groq"),
    # OpenRouter: "This endpoint's maximum context length is 128000 tokens. However, you
    # requested about 140000 tokens."
    (r"maximum context length is \d+ tokens", "OpenRouter"),
    # OpenRouter (Poolside): "Input length 9000 exceeds the maximum allowed input length of
    # 8192 tokens."
    (r"exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?", "OpenRouter"),
    # Together AI: "The input (9000 tokens) is longer than the model's context length (8192
    # tokens)."
    (
        r"input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)",
        "Together AI",
    ),
    # GitHub Copilot: "prompt token count of 130000 exceeds the limit of 128000"
    (r"exceeds the limit of \d+", "GitHub Copilot"),
    # llama.cpp's server: "the request exceeds the available context size, try increasing it"
    (r"exceeds the available context size", "llama.cpp"),
    # LM Studio: "tokens to keep from the initial prompt is greater than the context length"
    (r"greater than the context length", "LM Studio"),
    # MiniMax: "invalid params, context window exceeds limit"
    (r"context window exceeds limit", "MiniMax"),
    # Kimi for coding: "Your request exceeded model token limit: 262144 (requested: 300000)"
    (r"exceeded model token limit", "Kimi"),
    # Mistral: "Prompt contains 140000 tokens ... too large for model with 131072 maximum
    # context length"
    (r"too large for model with \d+ maximum context length", "Mistral"),
    # DS4: "Prompt has 70000 tokens, but the configured context size is 65536 tokens"
    (r"prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?", "DS4"),
    # z.ai, a stop reason given as an error: "model_context_window_exceeded"
    (r"model_context_window_exceeded", "z.ai"),
    # Ollama: "prompt too long; exceeded max context length by 1200 tokens"
    (r"prompt too long; exceeded (?:max )?context length", "Ollama"),
    # DashScope (Qwen): "Range of input length should be [1, 129024]"
    (r"range of input length should be", "DashScope"),
    # anyone's: "context_length_exceeded", "too many tokens", "token limit exceeded"
    (r"context[_ ]length[_ ]exceeded", "any"),
    (r"too many tokens", "any"),
    (r"token limit exceeded", "any"),
    # a 413 as an SDK or pi formats it: "413 Request Entity Too Large", "x API error (413):";
    # and as this library does: "HTTP 413 from github-copilot: ..."
    (r"^(?:[\w -]+ API error \(413\):|413(?:\s|:|$)|HTTP 413 from )", "HTTP 413"),
)

# Texts that may match the above but are not about the context: a throttled request's
# "Too many tokens, please wait before trying again" is a rate limit.
_NOT_OVERFLOW: Final[tuple[tuple[str, str], ...]] = (
    # Amazon Bedrock's prefixes: "Throttling error: ...", "Service unavailable: ..."
    (r"^(?:Throttling error|Service unavailable):", "Amazon Bedrock"),
    # anyone's: "Rate limit reached for ...", "429 Too Many Requests"
    (r"rate limit", "any"),
    (r"too many requests", "any"),
)

# Cerebras answers an input too long with a 400 or 413 and no body: "400 status code (no
# body)" as an SDK says it, "HTTP 400 from cerebras: (empty body)" as this library does.
_CEREBRAS_BODYLESS: Final = (
    r"^(?:4(?:00|13)\s*(?:status code)?\s*\(no body\)|HTTP 4(?:00|13) from [^:]*: \(empty body\)$)"
)


@functools.cache
def _patterns() -> tuple[Any, Any, Any]:
    """The tables compiled (overflow, not overflow, Cerebras'), on the first error read:
    compiling them costs every ``import trio_agent`` a millisecond or two otherwise."""
    import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = False

    def any_of(table: tuple[tuple[str, str], ...]) -> Any:
        return re2.compile("|".join(f"(?:{pattern})" for pattern, _ in table).encode(), options)

    return (
        any_of(_OVERFLOW),
        any_of(_NOT_OVERFLOW),
        re2.compile(_CEREBRAS_BODYLESS.encode(), options),
    )


def overflow_text(text: str, provider: str = "") -> bool:
    """Whether an error's ``text`` (from ``provider``) says that the input is too long, and
    is not about a rate limit."""
    data = text.encode("utf-8", "surrogatepass")
    overflow, not_overflow, cerebras = _patterns()
    if not_overflow.search(data):
        return False
    if overflow.search(data):
        return True
    return provider == "cerebras" and bool(cerebras.search(data))


# What an error body's codes say (lower case): OpenAI's ``code`` and ``type``, Anthropic's
# ``type``, Google's ``status``.
_CODES: Final[dict[str, ErrorKind]] = {
    "context_length_exceeded": "context_overflow",
    "string_above_max_length": "context_overflow",
    "request_too_large": "context_overflow",
    "model_context_window_exceeded": "context_overflow",
    "rate_limit_exceeded": "rate_limit",
    "rate_limit_error": "rate_limit",
    "resource_exhausted": "rate_limit",
    "overloaded_error": "overloaded",
    "authentication_error": "authentication",
    "permission_error": "authentication",
    "invalid_api_key": "authentication",
    "unauthenticated": "authentication",
    "permission_denied": "authentication",
    "server_error": "server",
    "api_error": "server",
    "internal": "server",
    "internal_error": "server",
    "unavailable": "server",
    "invalid_request_error": "refused",
    "invalid_prompt": "refused",
    "not_found_error": "refused",
    "invalid_argument": "refused",
    "failed_precondition": "refused",
    "not_found": "refused",
}


def error_kind(
    text: str,
    *,
    status: int | None = None,
    codes: Iterable[object] = (),
    provider: str = "",
    default: ErrorKind = "server",
) -> ErrorKind:
    """The kind of a failure: from its HTTP ``status``, the ``codes`` of its error body (any
    values: those that are not strings are passed over) and its ``text``, else ``default``.

    In order: 429 is ``rate_limit`` and 529 ``overloaded``, whatever the text; a code of an
    input too long is ``context_overflow``; a code of a rate limit or of an overloaded
    service is that; 413, or a text that says the input is too long
    (:func:`overflow_text`), is ``context_overflow``; 401, 403 or a code of a refused key is
    ``authentication``; another 5xx is ``server``, another 4xx ``refused``; then the
    codes' ``server`` or ``refused``.
    """
    if status == 429:
        return "rate_limit"
    if status == 529:
        return "overloaded"
    known = {_CODES.get(code.lower()) for code in codes if isinstance(code, str)}
    if "context_overflow" in known:
        return "context_overflow"
    if "rate_limit" in known:
        return "rate_limit"
    if "overloaded" in known:
        return "overloaded"
    if status == 413 or overflow_text(text, provider):
        return "context_overflow"
    if status in (401, 403) or "authentication" in known:
        return "authentication"
    if status is not None and 500 <= status <= 599:
        return "server"
    if status is not None and 400 <= status <= 499:
        return "refused"
    if "server" in known:
        return "server"
    if "refused" in known:
        return "refused"
    return default


_SILENT_FILL: Final = 0.99
"""How full the window must be for a length stop without output to be an overflow."""


def is_context_overflow(message: AssistantMessage, context_window: int | None = None) -> bool:
    """Whether ``message`` failed, or stopped, because the conversation no longer fits the
    model's context window — the reply to act on by making the conversation shorter (see
    errors.md#when-the-context-no-longer-fits).

    True for:

    * an error reply whose ``error_kind`` is ``"context_overflow"``; or, for a reply
      without a kind (one read from an older transcript, or made by another library), an
      error reply whose ``error_message`` says so in the words of one of the services
      pi-ai 1.6.0 knows (Anthropic, OpenAI, Google, xAI, Groq, OpenRouter, Mistral,
      Cerebras, llama.cpp, Ollama, ...), unless the text is about a rate limit;
    * with ``context_window`` (the model's, in tokens): a reply that stopped normally
      although its input (``input + cache_read + cache_write``) is larger than the window,
      which some servers accept without a word; and a ``"length"`` stop with no output
      whose input fills at least 99% of the window (the server cut the input to fit,
      leaving no room for a reply).

    Never raises, whatever the message holds.
    """
    reason = message.stop_reason
    if reason == "error":
        kind = message.error_kind
        if kind is not None:
            return kind == "context_overflow"
        text = message.error_message
        if isinstance(text, str) and text:
            provider = message.provider if isinstance(message.provider, str) else ""
            return overflow_text(text, provider)
        return False
    if not context_window or (reason != "stop" and reason != "length"):
        return False
    usage = message.usage
    try:
        used = usage.input + usage.cache_read + usage.cache_write
        if reason == "stop":
            return bool(used > context_window)
        return bool(usage.output == 0 and used >= context_window * _SILENT_FILL)
    except (TypeError, AttributeError):  # a message made with values of other types
        return False
