"""Anthropic Messages streaming events -> VS Code parts.

Written against the Messages API streaming reference (``event: <type>`` + ``data: {...}``):
``message_start``, ``content_block_start`` / ``content_block_delta`` / ``content_block_stop``,
``message_delta``, ``message_stop``, ``ping`` and ``error``.

What each event becomes:

- ``text`` blocks and ``text_delta`` -> :class:`TextPart`;
- ``thinking`` blocks and ``thinking_delta`` -> :class:`ThinkingPart` with the id
  ``"<message id>:<block index>"``; the block's ``signature_delta`` is kept and, at
  ``content_block_stop``, emitted as a final ``ThinkingPart("", id, {"signature": ...})``;
  ``redacted_thinking`` -> ``ThinkingPart("", id, {"redactedData": data})`` (the metadata keys
  :mod:`lmbridge.convert` reads back);
- ``tool_use`` blocks -> one :class:`ToolCallPart` at ``content_block_stop``, the input parsed
  from the ``input_json_delta`` fragments (no fragments: the block's own ``input``, else ``{}``);
- server tools (``server_tool_use``, ``mcp_tool_use``, web search / web fetch / code execution)
  run at Anthropic: they are never tool calls. ``web_search_tool_result`` results,
  ``web_fetch_tool_result`` documents and ``citations_delta`` become citation data parts
  (:mod:`lmbridge.upstream._citations`); other result blocks produce nothing;
- ``message_start`` / ``message_delta`` usage -> :class:`Usage` (input counts the cache reads and
  writes, which Anthropic reports apart); ``message_delta.stop_reason`` -> the finish reason;
- ``error`` -> :class:`UpstreamReportedError` with the error's ``type`` (``overloaded_error`` ...);
- ``message_stop`` ends the stream; ``ping`` and unknown events produce nothing.

Message order: a repeated ``message_start`` for the open message is ignored; a ``message_start``
for another message while one is open is an :class:`UpstreamProtocolError` (the parts so far
stay, a half-received tool call is dropped). A stream that ends with neither ``message_stop``
nor a ``stop_reason`` was cut off: an :class:`UpstreamProtocolError`, with the same guarantees.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

from .._mypyc import mypyc_attr
from ..errors import UpstreamProtocolError, UpstreamReportedError
from ..parts import FinishReason, TextPart, Usage
from ._assembler import AssemblerOptions, new_usage
from ._base import StreamDecoder, update_counts
from ._citations import camel_fields, citation_part

__all__ = ["STOP_REASONS", "AnthropicDecoder", "detect"]

STOP_REASONS: Final[dict[str, FinishReason]] = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_CALLS,
    "refusal": FinishReason.CONTENT_FILTER,
    # pause_turn: a long server-tool turn was paused; the caller may continue it.
    "pause_turn": FinishReason.OTHER,
}
"""Anthropic ``stop_reason`` -> normalised finish reason (anything else is ``OTHER``)."""

_SERVER_TOOL_BLOCKS: Final = frozenset({"server_tool_use", "mcp_tool_use"})
_USAGE_KEYS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)

BlockKind = Literal["text", "thinking", "tool", "server", "other"]


class _Block:
    __slots__ = ("initial_input", "kind", "signature", "thinking_id")

    def __init__(
        self,
        kind: BlockKind,
        thinking_id: str | None = None,
        signature: str = "",
        initial_input: Any = None,
    ) -> None:
        self.kind: BlockKind = kind
        self.thinking_id = thinking_id
        self.signature = signature
        self.initial_input = initial_input


@mypyc_attr(allow_interpreted_subclasses=True)
class AnthropicDecoder(StreamDecoder):
    """Anthropic Messages streaming events -> VS Code parts (see the module docstring)."""

    format = "anthropic"

    def __init__(self, options: AssemblerOptions | None = None) -> None:
        super().__init__(options)
        self.message_id: str | None = None
        """The id of the open message."""
        self.model: str | None = None
        """The model named by ``message_start``."""
        self._started = False
        self._stop_reason_seen = False
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, int] = {}

    # -- events

    def on_close(self) -> None:
        """A stream cut off before its end is an error; one that said why it stopped is not."""
        if self._started and not self._stop_reason_seen:
            open_blocks = ", ".join(f"{i} ({b.kind})" for i, b in sorted(self._blocks.items()))
            self._assembler.fail(
                UpstreamProtocolError(
                    "anthropic: the stream ended before message_stop and without a stop_reason"
                    + (f"; blocks still open: {open_blocks}" if open_blocks else "")
                )
            )

    # -- message level

    def _on_delta(self, obj: dict[str, Any]) -> None:
        index = obj["index"]
        delta = obj["delta"]
        if delta["type"] == "text_delta":  # the usual event: no block to look up
            text = delta["text"]
            asm = self._assembler
            if asm.plain and type(text) is str and text.isascii():  # asm.text, inline
                if text:
                    asm.emitted_text = True
                    asm.out.append(TextPart(text))
            else:
                asm.text(text)
        else:
            self._delta(index, delta)

    def _on_block_start(self, obj: dict[str, Any]) -> None:
        self._block_start(obj["index"], obj["content_block"])

    def _on_block_stop(self, obj: dict[str, Any]) -> None:
        self._block_stop(obj["index"])

    def _on_message_start(self, obj: dict[str, Any]) -> None:
        self._message_start(obj["message"])

    def _on_message_delta(self, obj: dict[str, Any]) -> None:
        self._message_delta(obj.get("delta") or {}, obj.get("usage"))

    def _on_message_stop(self, obj: dict[str, Any]) -> None:
        self.close_stream()

    def _on_error(self, obj: dict[str, Any]) -> None:
        self._error(obj.get("error"))

    def _message_start(self, message: dict[str, Any]) -> None:
        new_id = message.get("id")
        if self._started:
            if new_id and self.message_id and new_id != self.message_id:
                self._assembler.fail(
                    UpstreamProtocolError(
                        f"anthropic: message_start for message {new_id!r} while message "
                        f"{self.message_id!r} is still open"
                    )
                )
            return  # the same message again (some proxies repeat it): nothing new
        self._started = True
        self.message_id = new_id if isinstance(new_id, str) else None
        model = message.get("model")
        self.model = model if isinstance(model, str) else None
        self._update_usage(message.get("usage"))

    def _message_delta(self, delta: dict[str, Any], usage: Any) -> None:
        reason = delta.get("stop_reason")
        if isinstance(reason, str) and reason:
            self._stop_reason_seen = True
            self._assembler.set_finish(STOP_REASONS.get(reason, FinishReason.OTHER), reason)
            details = delta.get("stop_details")
            explanation = details.get("explanation") if isinstance(details, dict) else None
            if reason == "refusal" and isinstance(explanation, str) and explanation.strip():
                # Without it the user sees an empty answer: say why the model stopped.
                sep = "\n\n" if self._assembler.emitted_text else ""
                self._assembler.text(f"{sep}{explanation.strip()}")
        self._update_usage(usage)

    def _update_usage(self, usage: Any) -> None:
        # message_delta repeats the counts cumulatively (output always, input on some
        # servers): the latest value of each field wins. Each report is the counts so far:
        # the Usage is made once, when asked for.
        if update_counts(self._usage, usage, _USAGE_KEYS):
            self._assembler.set_usage_from(self._usage_so_far)

    def _usage_so_far(self) -> Usage:
        u = self._usage
        cache_read = u.get("cache_read_input_tokens")
        cache_write = u.get("cache_creation_input_tokens")
        uncached = u.get("input_tokens")
        # Anthropic's input_tokens leaves out cache reads and writes; Usage counts them in.
        total_in = None
        if uncached is not None:
            total_in = uncached + (cache_read or 0) + (cache_write or 0)
        # (input, output, cache reads, cache writes, reasoning)
        return new_usage(total_in, u.get("output_tokens"), cache_read, cache_write, None)

    def _error(self, error: Any) -> None:
        if isinstance(error, dict):
            etype = error.get("type")
            message = error.get("message")
        else:
            etype, message = None, error
        etype = etype if isinstance(etype, str) else None
        text = message if isinstance(message, str) and message else "no message"
        self._assembler.fail(
            UpstreamReportedError(
                f"anthropic: {etype or 'error'}: {text}", error_type=etype, body=error
            )
        )

    # -- content blocks

    def _thinking_id(self, index: int) -> str:
        return f"{self.message_id}:{index}" if self.message_id else str(index)

    def _block_start(self, index: int, block: dict[str, Any]) -> None:
        btype = block["type"]
        asm = self._assembler
        if btype == "text":
            self._blocks[index] = _Block("text")
            asm.text(block.get("text"))
        elif btype == "thinking":
            tid = self._thinking_id(index)
            self._blocks[index] = _Block("thinking", tid, block.get("signature") or "")
            asm.thinking(block.get("thinking"), id=tid)
        elif btype == "redacted_thinking":
            self._blocks[index] = _Block("other")
            data = block.get("data")
            if isinstance(data, str) and data:
                asm.thinking("", id=self._thinking_id(index), metadata={"redactedData": data})
        elif btype == "tool_use":
            self._blocks[index] = _Block("tool", initial_input=block.get("input"))
            asm.tool_start(index, call_id=block.get("id"), name=block.get("name"))
        elif btype in _SERVER_TOOL_BLOCKS:
            # Anthropic runs these itself: VS Code must never be asked to run them.
            self._blocks[index] = _Block("server")
        elif btype == "web_search_tool_result":
            self._blocks[index] = _Block("other")
            content = block.get("content")
            if isinstance(content, list):  # else an error object: nothing to cite
                for result in content:
                    if isinstance(result, dict) and result.get("type") == "web_search_result":
                        asm.data(
                            citation_part(
                                url=result.get("url"),
                                title=result.get("title"),
                                source_id=block.get("tool_use_id"),
                                extra=camel_fields(result, skip=("type", "url", "title")),
                            )
                        )
        elif btype == "web_fetch_tool_result":
            self._blocks[index] = _Block("other")
            content = block.get("content")
            if isinstance(content, dict) and content.get("type") == "web_fetch_result":
                document = content.get("content")
                title = document.get("title") if isinstance(document, dict) else None
                asm.data(
                    citation_part(
                        url=content.get("url"),
                        title=title if isinstance(title, str) else None,
                        source_id=block.get("tool_use_id"),
                    )
                )
        else:
            # mcp_tool_result, code execution results, fallback markers, future blocks
            self._blocks[index] = _Block("other")

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        dtype = delta["type"]
        block = self._blocks.get(index)
        if dtype == "text_delta":
            self._assembler.text(delta["text"])
        elif dtype == "input_json_delta":
            if block is not None and block.kind == "tool":
                self._assembler.tool_delta(index, delta["partial_json"])
            # server tools' input, or a block never started: nothing to emit
        elif dtype == "thinking_delta":
            tid = block.thinking_id if block and block.thinking_id else self._thinking_id(index)
            self._assembler.thinking(delta["thinking"], id=tid)
        elif dtype == "signature_delta":
            if block is not None and block.kind == "thinking":
                block.signature += delta["signature"]
        elif dtype == "citations_delta":
            citation = delta["citation"]
            title = citation.get("title") or citation.get("document_title")
            self._assembler.data(
                citation_part(
                    url=citation.get("url"),
                    title=title if isinstance(title, str) else None,
                    cited_text=citation.get("cited_text"),
                    extra={
                        "kind": citation.get("type"),
                        **camel_fields(
                            citation, skip=("type", "url", "title", "document_title", "cited_text")
                        ),
                    },
                )
            )
        # other deltas (future types): nothing

    def _block_stop(self, index: int) -> None:
        block = self._blocks.pop(index, None)
        if block is None:
            return
        if block.kind == "tool":
            arguments = None
            if not self._assembler.tool_arguments_so_far(index).strip() and isinstance(
                block.initial_input, dict
            ):
                arguments = block.initial_input  # input given whole at block start
            self._assembler.tool_end(index, arguments=arguments)
        elif block.kind == "thinking" and block.signature:
            self._assembler.thinking("", id=block.thinking_id, metadata={"signature": block.signature})



_HANDLERS: dict[str, Callable[[AnthropicDecoder, dict[str, Any]], None]] = {
    "content_block_delta": AnthropicDecoder._on_delta,
    "content_block_start": AnthropicDecoder._on_block_start,
    "content_block_stop": AnthropicDecoder._on_block_stop,
    "message_start": AnthropicDecoder._on_message_start,
    "message_delta": AnthropicDecoder._on_message_delta,
    "message_stop": AnthropicDecoder._on_message_stop,
    "error": AnthropicDecoder._on_error,
}
"""Event type -> its handler; ``ping`` and unknown events produce nothing."""
AnthropicDecoder.handlers = _HANDLERS

_EVENT_TYPES = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "ping",
    }
)


def detect(obj: Mapping[str, Any], event_name: str = "") -> bool:
    """Whether a parsed event is an Anthropic Messages event (the format's detection rule)."""
    return obj.get("type") in _EVENT_TYPES
