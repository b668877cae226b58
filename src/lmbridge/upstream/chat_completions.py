"""OpenAI Chat Completions stream chunks -> VS Code parts.

Written against the ``chat.completion.chunk`` objects of OpenAI and of the vendors that copy
its shape (Azure OpenAI, xAI, DeepSeek, Groq, Mistral, OpenRouter, vLLM, Ollama, LM Studio ...).
Every variant seen in real streams is accepted:

- ``delta.content`` as a string, or (Mistral) as a list of ``{"type": "text", "text"}`` and
  ``{"type": "thinking", "thinking": [{"type": "text", "text"}]}`` items;
- reasoning as ``delta.reasoning_content`` (DeepSeek, xAI, older vLLM), ``delta.reasoning``
  (OpenRouter, Ollama, Groq, newer vLLM) or only ``delta.reasoning_details`` (OpenRouter).
  Servers that send both a reasoning string and ``reasoning_details`` repeat the same text, so
  the details give text only when no reasoning string came in the same delta; their encrypted
  entries become an empty :class:`ThinkingPart` with ``metadata={"reasoningDetails": [entry]}``;
- ``delta.refusal`` is shown as text (it is what the model said);
- ``delta.tool_calls`` keyed by ``index``; the id and name arrive once, the arguments in pieces.
  Vendors that omit ``index`` (Mistral sends each call whole) are keyed by the call id, and a
  fragment with neither continues the call opened last. A new id under an index that already
  holds a call with another id starts a new call (some gateways reuse index 0). The legacy
  ``delta.function_call`` is one more call. Calls are emitted when ``finish_reason`` arrives,
  or at the end of the stream (the assembler flushes complete ones);
- usage from ``usage`` (also in chunks whose ``choices`` is empty, and Groq's ``x_groq.usage``):
  ``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.cached_tokens`` (or
  DeepSeek's ``prompt_cache_hit_tokens``), ``completion_tokens_details.reasoning_tokens``;
- ``finish_reason`` normalised to :class:`FinishReason`;
- an ``error`` object inside the stream ends it with :class:`UpstreamReportedError`.

Only the first choice (``index`` 0) is decoded: a VS Code response has one answer.
``[DONE]`` ends the stream.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from typing import Any, Final

from .._mypyc import mypyc_attr
from ..errors import UpstreamReportedError
from ..parts import FinishReason, TextPart, Usage
from ._assembler import AssemblerOptions, new_usage, token_count
from ._base import StreamDecoder

__all__ = ["ChatCompletionsDecoder", "chat_finish_reason", "chat_usage", "detect", "reported_error"]

_FINISH: Final[dict[str, FinishReason]] = {
    "stop": FinishReason.STOP,
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "eos": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "max_tokens": FinishReason.LENGTH,
    "model_length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "tool_use": FinishReason.TOOL_CALLS,
    "content_filter": FinishReason.CONTENT_FILTER,
    "error": FinishReason.ERROR,
}


def chat_finish_reason(raw: str) -> FinishReason:
    """Normalise a Chat Completions ``finish_reason`` (unknown values are ``OTHER``)."""
    return _FINISH.get(raw, FinishReason.OTHER)




def chat_usage(usage: dict[str, Any]) -> Usage:
    """Usage from a Chat Completions ``usage`` object (fields that are missing stay ``None``)."""
    prompt_details = usage.get("prompt_tokens_details")
    completion_details = usage.get("completion_tokens_details")
    cached = cache_write = reasoning = None
    if isinstance(prompt_details, dict):
        cached = token_count(prompt_details.get("cached_tokens"))
        cache_write = token_count(prompt_details.get("cache_write_tokens"))
    if cached is None:
        cached = token_count(usage.get("prompt_cache_hit_tokens"))  # DeepSeek
    if isinstance(completion_details, dict):
        reasoning = token_count(completion_details.get("reasoning_tokens"))
    prompt = token_count(usage.get("prompt_tokens"))
    output = token_count(usage.get("completion_tokens"))
    total = token_count(usage.get("total_tokens"))
    if (
        reasoning
        and prompt is not None
        and output is not None
        and total == prompt + output + reasoning
    ):
        # Some vendors (xAI) leave reasoning out of completion_tokens, as the total shows;
        # lmbridge's output tokens always include reasoning.
        output += reasoning
    # (input, output, cache reads, cache writes, reasoning)
    return new_usage(prompt, output, cached, cache_write, reasoning)


def reported_error(error: Any, where: str) -> UpstreamReportedError:
    """An :class:`UpstreamReportedError` from an upstream's ``error`` value (object or string);
    the error type is its ``type``, else Google's ``status``."""
    if isinstance(error, dict):
        message = error.get("message") or error.get("error") or json.dumps(error)[:500]
        etype = error.get("type") or error.get("status")
        code = error.get("code")
        return UpstreamReportedError(
            f"{where}: the upstream reported an error: {message}",
            error_type=etype if isinstance(etype, str) else None,
            code=None if code is None else str(code),
            body=error,
        )
    return UpstreamReportedError(f"{where}: the upstream reported an error: {error}", body=error)


@mypyc_attr(allow_interpreted_subclasses=True)
class ChatCompletionsDecoder(StreamDecoder):
    """Decodes ``chat.completion.chunk`` objects (see the module docstring for the variants)."""

    format = "chat-completions"

    def __init__(self, options: AssemblerOptions | None = None) -> None:
        super().__init__(options)
        # open tool calls: key -> call id seen for it (to spot a reused index); insertion order
        # is the order the calls started, which is the order they are emitted in
        self._open: dict[Hashable, str | None] = {}
        self._last_key: Hashable | None = None
        self._index_generation: dict[int, int] = {}  # bumps when an index is reused for a new call

    def handle(self, obj: dict[str, Any], event_name: str | None) -> None:
        """Handle one chunk."""
        choices = obj.get("choices")
        if (
            type(choices) is list
            and len(choices) == 1
            and obj.get("usage") is None
            and "error" not in obj
            and "x_groq" not in obj
        ):
            # the usual chunk: one choice, nothing else to look at
            choice = choices[0]
            if type(choice) is dict and choice.get("index", 0) in (0, None):
                delta = choice.get("delta")
                if (
                    type(delta) is dict
                    and len(delta) <= 2
                    and choice.get("finish_reason") is None
                ):
                    # the most usual: {"content": "..."}, perhaps with the role
                    content = delta.get("content")
                    if type(content) is str and (len(delta) == 1 or "role" in delta):
                        asm = self._assembler
                        if asm.plain and content.isascii():  # asm.text, inline
                            if content:
                                asm.emitted_text = True
                                asm.out.append(TextPart(content))
                        else:
                            asm.text(content)
                        return
                self._choice(choice)
            return
        error = obj.get("error")
        usage = obj.get("usage")
        if not isinstance(usage, dict):
            x_groq = obj.get("x_groq")
            usage = x_groq.get("usage") if isinstance(x_groq, dict) else None
        if isinstance(usage, dict):
            self._assembler.set_usage(chat_usage(usage))
        choices = obj.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                if isinstance(choice, dict) and choice.get("index", 0) in (0, None):
                    self._choice(choice)
                    break
        if error:
            self._assembler.fail(reported_error(error, self.format))

    # -- one choice

    def _choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta")
        if delta is None:
            delta = choice.get("message")  # a few servers send the whole message at the end
        if isinstance(delta, dict):
            self._delta(delta)
        finish = choice.get("finish_reason")
        if isinstance(finish, str) and finish:
            self._end_calls()
            self._assembler.set_finish(chat_finish_reason(finish), finish)

    def _delta(self, delta: dict[str, Any]) -> None:
        asm = self._assembler
        if len(delta) <= 2:
            # the hot path: most chunks are {"content": "..."} or {"role": ..., "content": ...}
            content = delta.get("content")
            if type(content) is str and (len(delta) == 1 or "role" in delta):
                asm.text(content)
                return
        reasoning = delta.get("reasoning_content")
        if not isinstance(reasoning, str) or not reasoning:
            reasoning = delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            asm.thinking(reasoning)
        details = delta.get("reasoning_details")
        if isinstance(details, list):
            self._reasoning_details(
                details, text_too=not (isinstance(reasoning, str) and reasoning)
            )
        content = delta.get("content")
        if isinstance(content, str):
            asm.text(content)
        elif isinstance(content, list):
            self._content_items(content)
        elif content is not None:
            raise TypeError(f"delta.content is a {type(content).__name__}")
        refusal = delta.get("refusal")
        if isinstance(refusal, str):
            asm.text(refusal)
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list):
            for call in tool_calls:
                if isinstance(call, dict):
                    self._tool_call(call)
        function_call = delta.get("function_call")
        if isinstance(function_call, dict):  # the deprecated single-function form
            self._fragment("function_call", None, function_call)

    def _content_items(self, items: list[Any]) -> None:
        for item in items:
            if isinstance(item, str):
                self._assembler.text(item)
                continue
            if not isinstance(item, dict):
                continue
            kind = item.get("type")
            if kind == "text":
                self._assembler.text(item.get("text"))
            elif kind == "thinking":
                thinking = item.get("thinking")
                if isinstance(thinking, str):
                    self._assembler.thinking(thinking)
                elif isinstance(thinking, list):
                    for piece in thinking:
                        if isinstance(piece, dict) and piece.get("type", "text") == "text":
                            self._assembler.thinking(piece.get("text"))
                        elif isinstance(piece, str):
                            self._assembler.thinking(piece)
            # other item kinds (references, images) carry nothing VS Code can show as text

    def _reasoning_details(self, details: list[Any], *, text_too: bool) -> None:
        for entry in details:
            if not isinstance(entry, dict):
                continue
            kind = entry.get("type")
            if kind == "reasoning.encrypted" or (kind is None and "data" in entry):
                self._assembler.thinking("", metadata={"reasoningDetails": [entry]})
            elif text_too and kind == "reasoning.text":
                self._assembler.thinking(entry.get("text"))
            elif text_too and kind == "reasoning.summary":
                self._assembler.thinking(entry.get("summary"))

    # -- tool calls

    def _tool_call(self, call: dict[str, Any]) -> None:
        index = call.get("index")
        call_id = call.get("id") or None
        if isinstance(index, int) and not isinstance(index, bool):
            key: Hashable = ("index", index, self._index_generation.get(index, 0))
            seen = self._open.get(key)
            if call_id and seen and call_id != seen:
                # the index is reused for another call: the one it held is complete
                self._end_call(key)
                generation = self._index_generation.get(index, 0) + 1
                self._index_generation[index] = generation
                key = ("index", index, generation)
        elif call_id:
            key = ("id", call_id)
        elif self._last_key is not None:
            key = self._last_key
        else:
            key = ("index", 0, self._index_generation.get(0, 0))
        function = call.get("function")
        self._fragment(key, call_id, function if isinstance(function, dict) else {})

    def _fragment(self, key: Hashable, call_id: str | None, function: dict[str, Any]) -> None:
        name = function.get("name") or None
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # a few servers send the arguments as an object
            arguments = json.dumps(arguments)
        elif arguments is not None and not isinstance(arguments, str):
            raise TypeError(f"tool call arguments are a {type(arguments).__name__}")
        if key not in self._open or (call_id and not self._open[key]):
            self._open[key] = call_id
        self._last_key = key
        self._assembler.tool_delta(key, arguments, call_id=call_id, name=name)

    def _end_call(self, key: Hashable) -> None:
        self._open.pop(key, None)
        if self._last_key == key:
            self._last_key = None
        self._assembler.tool_end(key)

    def _end_calls(self) -> None:
        for key in list(self._open):
            self._end_call(key)


def detect(obj: Mapping[str, Any], event_name: str = "") -> bool:
    """Whether a parsed event is a Chat Completions chunk (the format's detection rule)."""
    return "choices" in obj or obj.get("object") == "chat.completion.chunk"
