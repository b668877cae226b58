"""Message conversion between VS Code and every upstream, both directions.

Provider side (VS Code messages + options -> an upstream's streaming request body):

- :func:`to_chat_completions` -- OpenAI Chat Completions and compatible servers
- :func:`to_responses` -- OpenAI Responses / OpenResponses
- :func:`to_anthropic` -- Anthropic Messages
- :func:`to_ai_sdk` -- Vercel AI SDK ``ModelMessage`` list
- :func:`to_gemini` -- Google Gemini ``contents`` (Gemini API and Vertex AI)

Consumer side (another shape -> VS Code messages, and VS Code's answer back):

- :func:`from_anthropic` -- Anthropic ``MessageParam`` history (+ system prompt)
- :func:`from_chat_completions` -- OpenAI Chat Completions history
- :func:`from_gemini` -- Gemini ``contents`` (+ ``systemInstruction``)
- :func:`to_anthropic_message` / :func:`to_chat_completions_message` -- VS Code response
  parts as an assistant message of that shape

Every ``to_*`` function takes the shared rules of :class:`ConversionPolicy` as keyword
arguments (``image_in_non_user``, ``image_input``, ``missing_tool_result``,
``orphan_tool_result``, ``leading_assistant_as_system``, ``clean_terminal``) or as
``policy=``. :func:`sampling_options` reads the model options every upstream knows
(temperature, top_p, max tokens, stop, seed) under one name each. Caller-side problems raise :class:`~lmbridge.errors.ConversionError` naming the
message and part (``messages[2].content[1]: ...``).

System prompt
    VS Code's System role (3, a proposed API Copilot uses) is taken as the system prompt.
    A conversation without System messages uses the stable API's convention instead: the
    assistant messages before the first user message are the system prompt (the seeds'
    ``fixSystemMessages``). An assistant message after the first user message is always an
    assistant turn, and a leading assistant message with a tool call is a turn, not a prompt.

Tool call ids
    Each call goes out under an id no other call of the conversation has, its result right
    after it and named by its own tool. Ids are unique within one answer (the decoders see to
    it), but an upstream that sends none gets ``call_1`` ... in every answer, and after the user
    switches models two upstreams may have made the same id: a call whose id an earlier turn
    used is renamed (``call_1_2``), with the result that answers it. So lmbridge's providers
    set no :attr:`~lmbridge.upstream.AssemblerOptions.call_id_prefix`: ids that are already
    unique reach their upstream unchanged, as OpenAI's replayed reasoning items need.

Thinking metadata
    A :class:`~lmbridge.parts.ThinkingPart`'s ``metadata`` carries what an upstream needs to
    accept its reasoning back. Decoders write, and converters read, these keys (all strings):

    ``signature``
        Anthropic ``thinking`` block signature (replayed as ``thinking`` with ``signature``;
        AI SDK ``providerOptions.anthropic.signature``).
    ``redactedData``
        Anthropic ``redacted_thinking`` block ``data`` (the part's text is empty).
    ``encryptedContent``
        Responses ``reasoning`` item ``encrypted_content`` (AI SDK
        ``providerOptions.openai.reasoningEncryptedContent``).
    ``itemId``
        Responses ``reasoning`` item ``id`` (``rs_...``; AI SDK ``providerOptions.openai.itemId``).
    ``thoughtSignature`` / ``signedPart``
        Gemini thought signature; with ``signedPart`` (``text``, ``functionCall`` ...) it
        belongs to the next part of that kind, not to the thinking part (see
        :mod:`lmbridge.convert.gemini`).

    Parts of one reasoning block share the part ``id`` (the closing part, often with empty
    text, carries the metadata); converters join them into one block, also when blocks
    interleave (a part joins the block with its id anywhere in the same run of reasoning
    parts, i.e. since the last text or tool call). Without ids, consecutive thinking
    parts are one block until a part carrying ``signature``, ``redactedData`` or
    ``encryptedContent`` closes it. Chat Completions replay (``reasoning_content``) needs no
    metadata and is off unless asked for, since plain OpenAI rejects the field.

Images
    Each target sends as images only the types its API takes (Anthropic and OpenAI: PNG, JPEG,
    GIF, WebP); any other image becomes the placeholder text ``[image omitted: <type>, <n>
    bytes]``, the same in every target, rather than a request the API answers with a 400.

Merged messages
    Consecutive user (or assistant) messages become one turn; the first text of each merged
    message starts with a blank line, so texts stay apart where a target or server
    concatenates them. Anthropic: a last user message with nothing the API takes (only
    whitespace) is sent as ``[empty message]`` so the request does not end on an assistant
    turn, which the API would take as a prefill.

Valid Unicode
    Request bodies are sent as UTF-8, which cannot carry a lone UTF-16 surrogate (what a JSON
    escape such as ``"\\ud83d"`` without its other half decodes to). Every ``to_*`` body and
    message, and the messages :func:`from_anthropic` / :func:`from_chat_completions` build,
    have each lone surrogate replaced by U+FFFD (a pair written as two escapes is joined);
    :func:`valid_unicode` does this for any JSON-like value.

Copilot's internal data parts (MIME ``cache_control``, ``stateful_marker`` ...) are not sent:
``cache_control`` becomes Anthropic ``cache_control`` on the block before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._common import (
        MESSAGE_SEPARATOR,
        MISSING_RESULT_TEXT,
        CleanTerminal,
        ConversionPolicy,
        ImagePolicy,
        MissingResultPolicy,
        OrphanResultPolicy,
        clean_terminal_output,
        clean_terminal_scope,
        clean_terminal_text,
        parse_data_url,
        sampling_options,
        valid_unicode,
    )
    from .ai_sdk import to_ai_sdk
    from .anthropic import to_anthropic, to_anthropic_message
    from .chat_completions import ReasoningReplay, to_chat_completions, to_chat_completions_message
    from .from_anthropic import from_anthropic
    from .from_chat_completions import from_chat_completions
    from .from_gemini import from_gemini
    from .gemini import gemini_schema, to_gemini
    from .responses import to_responses

# Loaded on first use (see lmbridge._lazy): importing the package costs nothing more.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    globals(),
    {
        "._common": (
            "MESSAGE_SEPARATOR", "MISSING_RESULT_TEXT", "CleanTerminal", "ConversionPolicy",
            "ImagePolicy", "MissingResultPolicy", "OrphanResultPolicy", "clean_terminal_output",
            "clean_terminal_scope", "clean_terminal_text", "parse_data_url", "sampling_options",
            "valid_unicode",
        ),
        ".ai_sdk": ("to_ai_sdk",),
        ".anthropic": ("to_anthropic", "to_anthropic_message"),
        ".chat_completions": (
            "ReasoningReplay", "to_chat_completions", "to_chat_completions_message",
        ),
        ".from_anthropic": ("from_anthropic",),
        ".from_chat_completions": ("from_chat_completions",),
        ".from_gemini": ("from_gemini",),
        ".gemini": ("gemini_schema", "to_gemini"),
        ".responses": ("to_responses",),
    },
)

__all__ = [
    "MESSAGE_SEPARATOR",
    "MISSING_RESULT_TEXT",
    "THINKING_METADATA_KEYS",
    "CleanTerminal",
    "ConversionPolicy",
    "ImagePolicy",
    "MissingResultPolicy",
    "OrphanResultPolicy",
    "ReasoningReplay",
    "clean_terminal_output",
    "clean_terminal_scope",
    "clean_terminal_text",
    "from_anthropic",
    "from_chat_completions",
    "from_gemini",
    "gemini_schema",
    "parse_data_url",
    "sampling_options",
    "to_ai_sdk",
    "to_anthropic",
    "to_anthropic_message",
    "to_chat_completions",
    "to_chat_completions_message",
    "to_gemini",
    "to_responses",
    "valid_unicode",
]

THINKING_METADATA_KEYS = (
    "signature",
    "redactedData",
    "encryptedContent",
    "itemId",
    "thoughtSignature",
    "signedPart",
)
"""The ThinkingPart metadata keys converters read (see the module docstring)."""
