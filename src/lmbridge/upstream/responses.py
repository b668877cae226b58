"""OpenAI Responses API / OpenResponses stream events -> VS Code parts.

Written against the OpenAI Responses streaming events (openai-python 2.x types), the
OpenResponses specification, and what LM Studio, xAI and llama.cpp's server actually send:

- ``response.output_text.delta`` -> text; ``response.refusal.delta`` -> text (what the model
  said). The ``.done`` events carry the whole text: whatever of it the deltas did not bring
  (servers that skip deltas) is emitted then, so the text is complete without being doubled.
- reasoning under the spec name ``response.reasoning.delta``, the name real servers send,
  ``response.reasoning_text.delta``, and the summaries ``response.reasoning_summary_text.delta``
  / ``response.reasoning_summary.delta`` -> :class:`ThinkingPart` whose ``id`` is the reasoning
  item's id (summary parts of one item are separated by a blank line). A reasoning item's
  ``encrypted_content`` (from ``response.output_item.done``) becomes a final, empty
  ThinkingPart with ``metadata={"itemId": ..., "encryptedContent": ...}`` so that the
  converter can send it back.
- function calls: ``output_item.added`` (call id, name) + ``function_call_arguments.delta`` /
  ``.done`` + ``output_item.done`` -> one :class:`ToolCallPart`, emitted at
  ``output_item.done`` (or when the response completes).
- an item's events are correlated by ``output_index`` (scoped to the response) when present,
  else by ``item_id`` (llama.cpp's server sends no indexes), else by order (an event naming no
  item belongs to the item opened last). An index wins over an id: some gateways change the item
  id on every event. A content part without ``content_index`` is the item's first, so the
  ``.done`` events (``output_text``, ``content_part``, ``output_item``, reasoning, summary,
  arguments) add only what the deltas of the same item and part did not bring.
- a ``multi_tool_use.parallel`` wrapper call (a tool no one declared, which some OpenAI models
  call with the calls they meant inside) is split into those calls, ids ``<call id>_<n>``
  (``expand_parallel_wrapper=False`` keeps it whole).
- custom tool calls (``custom_tool_call``, free-form input such as a grammar-constrained
  string) -> a ToolCallPart whose input is ``{"input": "<the raw string>"}``, since VS Code tool
  input is always an object.
- ``response.completed`` -> usage, finish ``STOP`` (``TOOL_CALLS`` when the response called a
  tool); ``response.incomplete`` -> ``LENGTH`` / ``CONTENT_FILTER`` / ``OTHER`` from
  ``incomplete_details.reason`` (tool calls cut short are dropped); ``response.failed`` and
  ``error`` events -> :class:`UpstreamReportedError`.
- tools the upstream runs itself (web search, file search, code interpreter, image generation,
  MCP, tool search) are never tool calls: their events produce nothing, except that a generated image becomes :meth:`DataPart.image` and URL and
  file citations (``response.output_text.annotation.added``) become JSON data parts with MIME
  ``application/vnd.vscode.citation+json``.
- OpenAI's client-run built-in tools (``shell_call``, ``local_shell_call``, ``apply_patch_call``,
  ``computer_call``) are not VS Code tools either: they only appear when a configuration adds
  those tool types to the request (``extraBody``), since lmbridge sends VS Code's tools as
  functions. They produce nothing and are logged at INFO (``lmbridge.upstream``), so that a
  configuration that asks for them learns why nothing happens.
- a body holding several responses one after another (multi-step recordings) is decoded as
  one stream: a new ``response.created`` opens a new scope for output indexes.

Lifecycle and unknown events produce nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Final

from .._mypyc import mypyc_attr
from ..errors import UpstreamProtocolError
from ..parts import DataPart, FinishReason, TextPart, Usage
from ._assembler import AssemblerOptions, new_usage, token_count
from ._base import StreamDecoder
from ._binary import decode_base64
from ._citations import CITATION_MIME, citation_part
from .chat_completions import reported_error

__all__ = ["CITATION_MIME", "ResponsesDecoder", "detect", "image_mime", "responses_usage"]

_log: Final = logging.getLogger("lmbridge.upstream")

_CLIENT_RUN_ITEMS: Final = frozenset({"shell_call", "local_shell_call", "apply_patch_call", "computer_call"})


_INCOMPLETE: Final[dict[str, FinishReason]] = {
    "max_output_tokens": FinishReason.LENGTH,
    "max_tokens": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}
_PARALLEL_WRAPPERS: Final = frozenset({"parallel", "multi_tool_use.parallel"})
_IMAGE_FORMATS: Final = {
    "png": "image/png",
    "jpeg": "image/jpeg",
    "jpg": "image/jpeg",
    "webp": "image/webp",
    "gif": "image/gif",
}




def responses_usage(usage: dict[str, Any]) -> Usage:
    """Usage from a Responses ``usage`` object (fields that are missing stay ``None``)."""
    in_details = usage.get("input_tokens_details")
    out_details = usage.get("output_tokens_details")
    cached = token_count(in_details.get("cached_tokens")) if isinstance(in_details, dict) else None
    reasoning = (
        token_count(out_details.get("reasoning_tokens")) if isinstance(out_details, dict) else None
    )
    # (input, output, cache reads, cache writes, reasoning)
    return new_usage(
        token_count(usage.get("input_tokens")),
        token_count(usage.get("output_tokens")),
        cached,
        None,
        reasoning,
    )


def image_mime(data: bytes, output_format: Any = None) -> str:
    """The MIME type of image bytes: from their signature, else ``output_format``, else PNG."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if isinstance(output_format, str):
        return _IMAGE_FORMATS.get(output_format.lower(), "image/png")
    return "image/png"


def _unwrap_parallel(raw: Any) -> list[tuple[str, Any]] | None:
    """The calls inside a ``multi_tool_use.parallel`` wrapper, or ``None`` if ``raw`` is not one.

    Some OpenAI models call a tool nobody declared, ``parallel``, with
    ``{"tool_uses": [{"recipient_name": "functions.<tool>", "parameters": {...}}]}``: the calls
    they meant are inside.
    """
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    uses = raw.get("tool_uses") if isinstance(raw, dict) else None
    if not isinstance(uses, list) or not uses:
        return None
    calls: list[tuple[str, Any]] = []
    for use in uses:
        if not isinstance(use, dict):
            return None
        recipient = use.get("recipient_name")
        if not isinstance(recipient, str) or not recipient.startswith("functions."):
            return None
        calls.append((recipient[len("functions.") :], use.get("parameters")))
    return calls


def _delta_text(value: Any) -> str | None:
    """A delta's text: a string, or (the spec's loosely typed reasoning deltas) ``{"text": ...}``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return str(value["text"])
    if value is None:
        return None
    raise TypeError(f"delta is a {type(value).__name__}")



def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@mypyc_attr(allow_interpreted_subclasses=True)
class ResponsesDecoder(StreamDecoder):
    """Decodes Responses API / OpenResponses events (see the module docstring)."""

    format = "responses"

    def __init__(
        self, options: AssemblerOptions | None = None, *, expand_parallel_wrapper: bool = True
    ) -> None:
        super().__init__(options)
        self.expand_parallel_wrapper = expand_parallel_wrapper
        """Split a ``multi_tool_use.parallel`` wrapper call into the calls it wraps."""
        self._names: dict[Hashable, str] = {}  # tool name from output_item.added
        self._response = 0  # scope of output indexes; bumps at each further response.created
        self._seen_response = False
        self._item_ids: dict[Hashable, str] = {}  # key -> item id from output_item.added
        self._calls: dict[Hashable, str] = {}  # open tool calls: key -> "function" | "custom"
        self._custom: dict[Hashable, list[str]] = {}  # custom tool input so far
        self._final_arguments: dict[Hashable, str] = {}  # from function_call_arguments.done
        self._called_tool = False  # this response emitted a tool call
        self._emitted: dict[Hashable, list[str]] = {}  # (key, channel, index) -> text emitted
        self._summary_index: dict[Hashable, int] = {}  # key -> last summary part seen
        self._id_keys: dict[str, Hashable] = {}  # item id -> key, for events without an index
        self._current: Hashable | None = None  # the item opened last, for events naming none
        self._opened = 0  # items opened in this response

    # -- keys

    def _key(self, obj: dict[str, Any], *, opens: bool = False) -> Hashable:
        """The item an event belongs to: by output index, else item id, else order.

        ``opens`` (``output_item.added``) makes an item that names neither a new one.
        """
        index = obj.get("output_index")
        if type(index) is int and index >= 0 and not opens and self._current is not None:
            return (self._response, index)  # the usual event: an index, an item already open
        index = token_count(index)
        item = obj.get("item")
        item_id = obj.get("item_id") or (item.get("id") if isinstance(item, dict) else None)
        item_id = item_id if isinstance(item_id, str) and item_id else None
        if index is not None:
            key: Hashable = (self._response, index)
            if opens and item_id is not None:
                self._id_keys[item_id] = key
        elif item_id is not None:
            key = self._id_keys.setdefault(item_id, (self._response, "item", item_id))
        elif opens or self._current is None:
            key = (self._response, "order", self._opened)
        else:
            return self._current
        if opens or self._current is None:
            self._opened += 1
            self._current = key
        return key

    def _item_id(self, key: Hashable, obj: dict[str, Any]) -> str | None:
        item_id = self._item_ids.get(key) or obj.get("item_id")
        return item_id if isinstance(item_id, str) else None

    # -- events

    # -- events (see _HANDLERS at the end of the module)

    def _on_text_delta(self, obj: dict[str, Any]) -> None:
        index = obj.get("output_index")
        part = obj.get("content_index")
        delta = obj.get("delta")
        if (
            type(delta) is str
            and type(index) is int
            and type(part) is int
            and index >= 0
            and part >= 0
            and self._current is not None
        ):
            # the usual event: _stream(_key(obj), "text", ...) and asm.text, inline
            if delta:
                slot = ((self._response, index), "text", part)
                pieces = self._emitted.get(slot)
                if pieces is None:
                    self._emitted[slot] = [delta]
                else:
                    pieces.append(delta)
                asm = self._assembler
                if asm.plain and delta.isascii():
                    asm.emitted_text = True
                    asm.out.append(TextPart(delta))
                else:
                    asm.text(delta)
            return
        self._stream(self._key(obj), "text", part, delta, self._assembler.text)

    def _on_refusal_delta(self, obj: dict[str, Any]) -> None:
        self._stream(
            self._key(obj), "refusal", obj.get("content_index"), obj.get("delta"), self._assembler.text
        )

    def _on_reasoning_delta(self, obj: dict[str, Any]) -> None:
        self._reasoning(obj, "reasoning", obj.get("content_index"), obj.get("delta"))

    def _on_summary_delta(self, obj: dict[str, Any]) -> None:
        self._summary(obj, obj.get("delta"))

    def _on_text_done(self, obj: dict[str, Any]) -> None:
        self._catch_up(
            self._key(obj), "text", obj.get("content_index"), obj.get("text"), self._assembler.text
        )

    def _on_refusal_done(self, obj: dict[str, Any]) -> None:
        self._catch_up(
            self._key(obj), "refusal", obj.get("content_index"), obj.get("refusal"), self._assembler.text
        )

    def _on_content_part_done(self, obj: dict[str, Any]) -> None:
        self._part_done(self._key(obj), obj.get("content_index"), obj.get("part"))

    def _on_reasoning_done(self, obj: dict[str, Any]) -> None:
        self._reasoning(obj, "reasoning", obj.get("content_index"), obj.get("text"), done=True)

    def _on_summary_done(self, obj: dict[str, Any]) -> None:
        self._summary(obj, obj.get("text"), done=True)

    def _on_arguments_delta(self, obj: dict[str, Any]) -> None:
        key = self._key(obj)
        self._calls.setdefault(key, "function")
        self._assembler.tool_delta(key, _delta_text(obj.get("delta")))

    def _on_arguments_done(self, obj: dict[str, Any]) -> None:
        arguments = obj.get("arguments")
        if isinstance(arguments, str):
            self._final_arguments[self._key(obj)] = arguments

    def _on_custom_input_delta(self, obj: dict[str, Any]) -> None:
        key = self._key(obj)
        self._calls.setdefault(key, "custom")
        self._assembler.tool_start(key)
        piece = _delta_text(obj.get("delta"))
        if piece:
            self._custom.setdefault(key, []).append(piece)

    def _on_custom_input_done(self, obj: dict[str, Any]) -> None:
        final = obj.get("input")
        if isinstance(final, str):
            self._custom[self._key(obj)] = [final]

    def _on_annotation(self, obj: dict[str, Any]) -> None:
        self._annotation(obj.get("annotation"))

    def _on_created(self, obj: dict[str, Any]) -> None:
        if self._seen_response:
            self._end_response(complete=True)
            self._response += 1
        self._seen_response = True
        self._id_keys.clear()
        self._current, self._opened = None, 0
        self._called_tool = False

    def _on_completed(self, obj: dict[str, Any]) -> None:
        self._finish(
            obj, FinishReason.TOOL_CALLS if self._called_tool else FinishReason.STOP, "completed"
        )

    def _on_incomplete(self, obj: dict[str, Any]) -> None:
        response = obj.get("response") or {}
        details = response.get("incomplete_details") or {}
        reason = details.get("reason") if isinstance(details, dict) else None
        raw = reason if isinstance(reason, str) else "incomplete"
        self._finish(obj, _INCOMPLETE.get(raw, FinishReason.OTHER), raw, complete=False)

    def _on_failed(self, obj: dict[str, Any]) -> None:
        response = obj.get("response") or {}
        self._set_usage(response)
        error = response.get("error") or {
            "message": f"the response failed (status {response.get('status')!r})"
        }
        self._assembler.fail(reported_error(error, self.format))

    def _on_error(self, obj: dict[str, Any]) -> None:
        error = obj.get("error")
        if not error:  # the spec's shape: code, message and param at the top level
            error = {k: v for k, v in obj.items() if k not in ("type", "sequence_number")}
        self._assembler.fail(reported_error(error, self.format))

    # -- text and reasoning

    def _stream(
        self,
        key: Hashable,
        channel: str,
        index: Any,
        delta: Any,
        emit: Callable[[str], None],
    ) -> None:
        text = delta if type(delta) is str else _delta_text(delta)
        if text:
            slot = (key, channel, index if type(index) is int and index >= 0 else token_count(index) or 0)
            pieces = self._emitted.get(slot)
            if pieces is None:
                self._emitted[slot] = [text]
            else:
                pieces.append(text)  # joined only if a .done event needs to compare
            emit(text)

    def _catch_up(
        self,
        key: Hashable,
        channel: str,
        index: Any,
        full: Any,
        emit: Callable[[str], None],
    ) -> None:
        """A ``.done`` event's full text: emit what the deltas did not bring."""
        if not isinstance(full, str):
            return
        slot = (key, channel, token_count(index) or 0)
        so_far = "".join(self._emitted.get(slot, ()))
        if len(full) > len(so_far) and full.startswith(so_far):
            self._emitted[slot] = [full]
            emit(full[len(so_far) :])
        # a full text that contradicts the deltas cannot be taken back: the deltas stand

    def _reasoning(
        self, obj: dict[str, Any], channel: str, index: Any, text: Any, *, done: bool = False
    ) -> None:
        key = self._key(obj)
        item_id = self._item_id(key, obj)

        def emit(piece: str) -> None:
            self._assembler.thinking(piece, id=item_id)

        if done:
            self._catch_up(key, channel, index, text, emit)
        else:
            self._stream(key, channel, index, text, emit)

    def _summary(self, obj: dict[str, Any], text: Any, *, done: bool = False) -> None:
        key = self._key(obj)
        index = token_count(obj.get("summary_index")) or 0
        last = self._summary_index.get(key)
        if last is not None and index != last and (_delta_text(text) or ""):
            # a new summary part of the same reasoning item: keep the parts apart
            self._reasoning(obj, "summary-separator", index, "\n\n")
        if _delta_text(text):
            self._summary_index[key] = index
        self._reasoning(obj, "summary", index, text, done=done)

    # -- output items

    def _item_added(self, obj: dict[str, Any]) -> None:
        item = obj["item"]
        key = self._key(obj, opens=True)
        item_id = item.get("id")
        if isinstance(item_id, str) and item_id:
            self._item_ids[key] = item_id
        kind = item.get("type")
        if isinstance(item.get("name"), str):
            self._names[key] = item["name"]
        if kind == "function_call":
            self._calls[key] = "function"
            self._assembler.tool_start(key, call_id=item.get("call_id"), name=item.get("name"))
        elif kind == "custom_tool_call":
            self._calls[key] = "custom"
            self._assembler.tool_start(key, call_id=item.get("call_id"), name=item.get("name"))

    def _item_done(self, obj: dict[str, Any]) -> None:
        item = obj["item"]
        key = self._key(obj)
        kind = item.get("type")
        if kind == "function_call":
            arguments = item.get("arguments")
            if not (
                isinstance(arguments, dict) or (isinstance(arguments, str) and arguments.strip())
            ):
                arguments = self._final_arguments.get(key)
            self._end_call(key, arguments, item.get("call_id"), item.get("name"))
        elif kind == "custom_tool_call":
            raw = item.get("input")
            if not isinstance(raw, str):
                raw = "".join(self._custom.get(key, []))
            self._end_call(key, {"input": raw}, item.get("call_id"), item.get("name"))
        elif kind == "message":
            for index, content in enumerate(item.get("content") or []):
                self._part_done(key, index, content)
        elif kind == "reasoning":
            self._reasoning_done(key, item)
        elif kind == "image_generation_call":
            self._image(item)
        elif kind in _CLIENT_RUN_ITEMS:
            _log.info(
                "responses: ignored a %s item: VS Code has no such tool (send tools as functions)",
                kind,
            )
        # hosted tools (web/file search, code interpreter, MCP, tool search) are run by the
        # upstream: nothing to emit

    def _part_done(self, key: Hashable, index: Any, content: Any) -> None:
        """A finished content part: emit the text (or reasoning) its deltas did not bring."""
        if not isinstance(content, dict):
            return
        if content.get("type") == "reasoning_text":
            self._reasoning_part_done(key, index, content.get("text"), self._item_ids.get(key))
            return
        channel = "refusal" if content.get("type") == "refusal" else "text"
        full = content.get("refusal") if channel == "refusal" else content.get("text")
        self._catch_up(key, channel, index, full, self._assembler.text)

    def _reasoning_part_done(self, key: Hashable, index: Any, text: Any, item_id: Any) -> None:
        """A finished reasoning part's full text: emit what its deltas did not bring."""
        self._catch_up(key, "reasoning", index, text, lambda t: self._assembler.thinking(t, id=item_id))

    def _reasoning_done(self, key: Hashable, item: dict[str, Any]) -> None:
        item_id = item.get("id") if isinstance(item.get("id"), str) else self._item_ids.get(key)
        for index, content in enumerate(item.get("content") or []):
            if isinstance(content, dict) and content.get("type") in ("reasoning_text", "text"):
                self._reasoning_part_done(key, index, content.get("text"), item_id)
        encrypted = item.get("encrypted_content")
        if isinstance(encrypted, str) and encrypted:
            self._assembler.thinking(
                "", id=item_id, metadata={"itemId": item_id, "encryptedContent": encrypted}
            )

    def _image(self, item: dict[str, Any]) -> None:
        result = item.get("result")
        if not isinstance(result, str) or not result:
            return
        data = decode_base64(result, forgiving=True)
        if data:
            self._assembler.data(DataPart.image(data, image_mime(data, item.get("output_format"))))

    def _annotation(self, annotation: Any) -> None:
        if not isinstance(annotation, dict):
            return
        kind = annotation.get("type")
        extra = {
            dst: annotation[src]
            for src, dst in (("start_index", "startIndex"), ("end_index", "endIndex"))
            if token_count(annotation.get(src)) is not None
        }
        if kind == "url_citation" and isinstance(annotation.get("url"), str):
            part = citation_part(url=annotation["url"], title=_str_or_none(annotation.get("title")), extra=extra)
        elif kind in ("file_citation", "container_file_citation") and annotation.get("file_id"):
            part = citation_part(
                filename=_str_or_none(annotation.get("filename")),
                extra={"fileId": annotation["file_id"], **extra},
            )
        else:
            return
        self._assembler.data(part)

    # -- tool calls and the end of a response

    def _end_call(self, key: Hashable, arguments: Any, call_id: Any, name: Any) -> None:
        self._calls.pop(key, None)
        self._custom.pop(key, None)
        self._final_arguments.pop(key, None)
        self._called_tool = True
        name = name if isinstance(name, str) and name else self._names.pop(key, None)
        call_id = call_id if isinstance(call_id, str) else None
        if self.expand_parallel_wrapper and name in _PARALLEL_WRAPPERS:
            raw = self._assembler.tool_arguments_so_far(key) if arguments is None else arguments
            calls = _unwrap_parallel(raw)
            if calls is not None:
                self._assembler.discard_tool(key)
                for i, (inner_name, inner_input) in enumerate(calls):
                    self._assembler.tool_call(
                        f"{call_id}_{i}" if call_id else None, inner_name, inner_input
                    )
                return
        self._assembler.tool_end(key, arguments=arguments, call_id=call_id, name=name)

    def _end_response(self, *, complete: bool) -> None:
        """The response ended: emit its open calls (complete) or drop them (cut short)."""
        for key, kind in list(self._calls.items()):
            if not complete:
                self._calls.pop(key)
                self._custom.pop(key, None)
                self._assembler.discard_tool(key)
            elif kind == "custom":
                self._end_call(key, {"input": "".join(self._custom.get(key, []))}, None, None)
            else:
                self._end_call(key, self._final_arguments.get(key), None, None)

    def _set_usage(self, response: Any) -> None:
        if isinstance(response, dict) and isinstance(response.get("usage"), dict):
            self._assembler.set_usage(responses_usage(response["usage"]))

    def _finish(
        self, obj: dict[str, Any], reason: FinishReason, raw: str, *, complete: bool = True
    ) -> None:
        self._end_response(complete=complete)
        self._set_usage(obj.get("response"))
        if reason is FinishReason.STOP and self._called_tool:
            reason = FinishReason.TOOL_CALLS
        self._assembler.set_finish(reason, raw)

    def on_close(self) -> None:
        """End of input: a custom tool call with no end is incomplete (its input has no syntax
        that would tell), so the stream fails; function calls are flushed by the assembler."""
        for key, kind in list(self._calls.items()):
            if kind == "custom":
                self._assembler.fail(
                    UpstreamProtocolError(
                        f"{self.format}: the stream ended inside a custom tool call; input so far: "
                        f"{''.join(self._custom.get(key, []))[:200]!r}"
                    )
                )
                return


_Handler = Callable[[ResponsesDecoder, dict[str, Any]], None]
_HANDLERS: dict[str, _Handler] = {
    "response.output_text.delta": ResponsesDecoder._on_text_delta,
    "response.refusal.delta": ResponsesDecoder._on_refusal_delta,
    "response.reasoning_text.delta": ResponsesDecoder._on_reasoning_delta,
    "response.reasoning.delta": ResponsesDecoder._on_reasoning_delta,
    "response.reasoning_summary_text.delta": ResponsesDecoder._on_summary_delta,
    "response.reasoning_summary.delta": ResponsesDecoder._on_summary_delta,
    "response.output_text.done": ResponsesDecoder._on_text_done,
    "response.refusal.done": ResponsesDecoder._on_refusal_done,
    "response.content_part.done": ResponsesDecoder._on_content_part_done,
    "response.reasoning_text.done": ResponsesDecoder._on_reasoning_done,
    "response.reasoning.done": ResponsesDecoder._on_reasoning_done,
    "response.reasoning_summary_text.done": ResponsesDecoder._on_summary_done,
    "response.reasoning_summary.done": ResponsesDecoder._on_summary_done,
    "response.output_item.added": ResponsesDecoder._item_added,
    "response.output_item.done": ResponsesDecoder._item_done,
    "response.function_call_arguments.delta": ResponsesDecoder._on_arguments_delta,
    "response.function_call_arguments.done": ResponsesDecoder._on_arguments_done,
    "response.custom_tool_call_input.delta": ResponsesDecoder._on_custom_input_delta,
    "response.custom_tool_call_input.done": ResponsesDecoder._on_custom_input_done,
    "response.output_text.annotation.added": ResponsesDecoder._on_annotation,
    "response.created": ResponsesDecoder._on_created,
    "response.completed": ResponsesDecoder._on_completed,
    "response.incomplete": ResponsesDecoder._on_incomplete,
    "response.failed": ResponsesDecoder._on_failed,
    "error": ResponsesDecoder._on_error,
}
"""Event type -> its handler; every other event (lifecycle, hosted-tool progress, partial
images ...) produces nothing."""
ResponsesDecoder.handlers = _HANDLERS


def detect(obj: Mapping[str, Any], event_name: str = "") -> bool:
    """Whether a parsed event is a Responses API event (the format's detection rule)."""
    kind = obj.get("type")
    return (isinstance(kind, str) and kind.startswith("response.")) or event_name.startswith(
        "response."
    )
