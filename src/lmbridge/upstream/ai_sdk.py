"""Vercel AI SDK stream parts -> VS Code parts: three shapes of one family, every version.

Each part is recognised on its own (``type`` plus whichever field names it carries), so one
decoder reads all of these, as JSON lines or as SSE ``data:`` events:

(a) ``streamText`` full-stream parts: v4 (``text-delta.textDelta``, ``reasoning.textDelta``,
    ``reasoning-signature``, ``redacted-reasoning``, ``tool-call-streaming-start``,
    ``tool-call-delta.argsTextDelta``, ``tool-call.args``, ``step-finish``, ``finish.usage`` with
    ``promptTokens`` / ``completionTokens``) and v5-v7 (``text-delta.text``,
    ``reasoning-delta.text``, ``tool-input-start/-delta/-end``, ``tool-call.input``,
    ``file.file``, ``source``, ``finish-step.usage``, ``finish.totalUsage`` with
    ``inputTokenDetails`` / ``outputTokenDetails``, ``abort``, ``error.error``);
(b) provider-level parts (``LanguageModelV1..V4`` ``doStream``, the AI Gateway's native stream):
    ``text-delta.delta``, ``tool-call.input`` as a JSON string, ``finish.usage`` with
    ``inputTokens {total, noCache, cacheRead, cacheWrite}`` / ``outputTokens {total, text,
    reasoning}``, ``finish.finishReason {unified, raw}``;
(c) the UI message stream (SSE, ``[DONE]`` at the end): ``text-delta.delta``,
    ``tool-input-start`` / ``tool-input-delta.inputTextDelta`` / ``tool-input-available.input``,
    ``error.errorText``, ``source-url``, ``source-document``, ``file`` by URL, ``data-*``,
    ``message-metadata``, ``start`` / ``finish`` / ``abort``.

What becomes what:

- text -> :class:`TextPart`; reasoning -> :class:`ThinkingPart` with the part's ``id``; replay
  data in ``providerMetadata`` (``signature``, ``redactedData``, ``itemId``,
  ``reasoningEncryptedContent``) becomes the thinking metadata keys :mod:`lmbridge.convert`
  reads (``signature``, ``redactedData``, ``itemId``, ``encryptedContent``);
- tool calls -> one atomic :class:`ToolCallPart`. ``streamText`` and the UI stream may run a
  tool on the server and then report its result in the same step: such a call was already
  executed and is not VS Code's to run. So a call whose input arrived parsed (``tool-call``
  with an object, ``tool-input-available``) is held until its step ends (``finish-step``,
  ``step-finish``, ``finish``, end of stream) and dropped if a ``tool-result`` /
  ``tool-error`` / ``tool-output-*`` for it came first. Provider-level calls (input as a JSON
  string) are emitted at once. Calls marked ``providerExecuted``, and calls the SDK marked
  ``invalid`` / ``tool-input-error`` (it answers those itself), are never emitted;
- sources and citations -> citation data parts (:mod:`lmbridge.upstream._citations`);
- ``data-<name>`` -> ``DataPart.json(data, "application/vnd.vercel.<name>+json")`` (characters a
  MIME subtype cannot hold become ``-``);
- files -> :func:`lmbridge.mime.data_part` (image / JSON / text / raw by MIME) from base64
  (forgiving, as the SDK's ``atob``: whitespace ignored, URL-safe alphabet accepted), byte
  arrays, or a ``data:`` URL. A file given by an ``http(s)`` URL cannot be fetched here (the
  decoder does no I/O) and is never turned into a markdown link: it becomes
  ``DataPart.json({"url", "mediaType"}, "application/vnd.lmbridge.file-url+json")``;
- ``reasoning-file``, ``raw``, ``custom``, tool results / errors / approvals, lifecycle parts and
  unknown parts produce nothing;
- usage: step usages add up while the stream runs; the final ``finish`` total replaces them.
  Finish reasons are normalised (``stop``, ``length``, ``content-filter``, ``tool-calls``,
  ``error``, ``other``; ``unknown`` -> ``other``); a ``finish`` without one is ``stop``, or
  ``tool-calls`` when tool calls were emitted;
- ``error`` -> :class:`UpstreamReportedError` (the error's ``name`` as ``error_type``);
  ``abort`` -> finish reason ``cancelled``, the stream ends without error and pending tool
  calls are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping
from typing import Any
from urllib.parse import unquote_to_bytes

from .._mypyc import mypyc_attr
from ..errors import UpstreamReportedError
from ..mime import data_part
from ..parts import DataPart, FinishReason, TextPart, Usage
from ._assembler import AssemblerOptions, token_count
from ._base import StreamDecoder
from ._binary import decode_base64
from ._citations import citation_part

__all__ = [
    "FILE_URL_MIME",
    "FINISH_REASONS",
    "AISDKDecoder",
    "decode_base64",
    "decode_data_url",
    "detect",
]

FINISH_REASONS: dict[str, FinishReason] = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "content-filter": FinishReason.CONTENT_FILTER,
    "tool-calls": FinishReason.TOOL_CALLS,
    "error": FinishReason.ERROR,
    "other": FinishReason.OTHER,
    "unknown": FinishReason.OTHER,
}
"""AI SDK finish reasons -> normalised finish reasons (anything else is ``OTHER``)."""

FILE_URL_MIME = "application/vnd.lmbridge.file-url+json"
"""The MIME type of the record that stands for a file given by a URL that is not ``data:``."""

_REASONING_META = (
    ("signature", "signature"),
    ("redactedData", "redactedData"),
    ("itemId", "itemId"),
    ("reasoningEncryptedContent", "encryptedContent"),
)
_MIME_UNSAFE = re.compile(r"[^A-Za-z0-9!#$&\-^_.+]")
_NO_USAGE = Usage()




def _first_count(*values: Any) -> int | None:
    for value in values:
        n = token_count(value)
        if n is not None:
            return n
    return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _usage(u: Any) -> Usage | None:
    """Usage from any version's shape, or ``None`` when it holds no number."""
    if not isinstance(u, dict):
        return None
    inp = u.get("inputTokens")
    out = u.get("outputTokens")
    if isinstance(inp, dict):  # provider-level V3+: {total, noCache, cacheRead, cacheWrite}
        cache_read = token_count(inp.get("cacheRead"))
        cache_write = token_count(inp.get("cacheWrite"))
        input_tokens = token_count(inp.get("total"))
        if input_tokens is None:
            known = [
                n for n in (token_count(inp.get("noCache")), cache_read, cache_write) if n is not None
            ]
            input_tokens = sum(known) if known else None
    else:  # v5+: numbers and details; v4: promptTokens
        details = _dict(u.get("inputTokenDetails"))
        input_tokens = _first_count(inp, u.get("promptTokens"))
        cache_read = _first_count(details.get("cacheReadTokens"), u.get("cachedInputTokens"))
        cache_write = token_count(details.get("cacheWriteTokens"))
    if isinstance(out, dict):  # provider-level V3+: {total, text, reasoning}
        reasoning = token_count(out.get("reasoning"))
        output_tokens = token_count(out.get("total"))
        if output_tokens is None:
            known = [n for n in (token_count(out.get("text")), reasoning) if n is not None]
            output_tokens = sum(known) if known else None
    else:
        details = _dict(u.get("outputTokenDetails"))
        output_tokens = _first_count(out, u.get("completionTokens"))
        reasoning = _first_count(details.get("reasoningTokens"), u.get("reasoningTokens"))
    usage = Usage(input_tokens, output_tokens, cache_read, cache_write, reasoning)
    return None if usage == _NO_USAGE else usage


def _add(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


def _sum_usage(a: Usage | None, b: Usage) -> Usage:
    if a is None:
        return b
    return Usage(
        _add(a.input_tokens, b.input_tokens),
        _add(a.output_tokens, b.output_tokens),
        _add(a.cache_read_tokens, b.cache_read_tokens),
        _add(a.cache_write_tokens, b.cache_write_tokens),
        _add(a.reasoning_tokens, b.reasoning_tokens),
    )


def _reasoning_metadata(provider_metadata: Any) -> dict[str, Any] | None:
    if not isinstance(provider_metadata, dict):
        return None
    out: dict[str, Any] = {}
    for entry in provider_metadata.values():
        if isinstance(entry, dict):
            for src, dst in _REASONING_META:
                value = entry.get(src)
                if isinstance(value, str) and value:
                    out[dst] = value
    return out or None


def decode_data_url(url: str) -> tuple[bytes, str]:
    """The bytes and MIME type of a ``data:`` URL (RFC 2397; default ``text/plain``)."""
    head, sep, body = url[5:].partition(",")
    if not sep:
        raise ValueError(f"data: URL without a comma: {url[:60]!r}")
    params = [p.strip() for p in head.split(";")]
    is_base64 = len(params) > 1 and params[-1].lower() == "base64"
    if is_base64:
        params.pop()
    mime = params[0] if params and params[0] else "text/plain"
    data = unquote_to_bytes(body)
    return (decode_base64(data) if is_base64 else data), mime


def _file_bytes(payload: Any, *, what: str) -> bytes:
    """Bytes from base64 text, a JSON byte array, or an index-keyed object (a JSON'd Uint8Array)."""
    if isinstance(payload, str):
        return decode_base64(payload)
    if isinstance(payload, list):
        return bytes(payload)
    if isinstance(payload, dict):
        return bytes(payload[str(i)] for i in range(len(payload)))
    raise TypeError(f"{what} is a {type(payload).__name__}, not base64 text or bytes")


@mypyc_attr(allow_interpreted_subclasses=True)
class AISDKDecoder(StreamDecoder):
    """Vercel AI SDK stream parts of every shape and version -> VS Code parts."""

    format = "ai-sdk"

    def __init__(self, options: AssemblerOptions | None = None) -> None:
        super().__init__(options)
        self._held: dict[str, Any] = {}  # call id -> parsed input, until its step ends
        self._keys: set[Hashable] = set()  # every tool-call key given to the assembler
        self._server_run: set[str] = set()  # providerExecuted call ids
        self._step_usage: Usage | None = None
        self._calls_emitted = False

    # -- dispatch

    type_from_event_name = False  # a part names itself; SSE event names play no part
    ignored_events = frozenset(
        (
            "start",
            "start-step",
            "stream-start",
            "response-metadata",
            "text-start",
            "text-end",
            "tool-input-end",
        )
    )

    def on_other(self, obj: dict[str, Any], kind: Any) -> None:
        """A part type the table does not name: ``data-*``, else nothing; no type is an error."""
        if not isinstance(kind, str):
            raise ValueError(f"an AI SDK stream part needs a string 'type', got {kind!r}")
        if kind.startswith("data-"):
            self._data(kind[5:], obj)

    def on_close(self) -> None:
        """End of stream: calls held for their step are complete and nobody ran them."""
        self._release_held()

    # -- text and reasoning

    def _text(self, obj: dict[str, Any]) -> None:
        value = obj.get("delta")
        if value is None:
            value = obj.get("text")
            if value is None:
                value = obj.get("textDelta")
                if value is None:
                    raise ValueError(f"{obj['type']!r} part has no 'delta', 'text' or 'textDelta'")
        if not isinstance(value, str):
            raise TypeError(f"{obj['type']!r} text is a {type(value).__name__}, not a string")
        asm = self._assembler
        if asm.plain and value.isascii():  # asm.text, inline: the usual event
            if value:
                asm.emitted_text = True
                asm.out.append(TextPart(value))
        else:
            asm.text(value)

    def _reasoning(self, obj: dict[str, Any]) -> None:
        value = obj.get("delta")
        if value is None:
            value = obj.get("text")
            if value is None:
                value = obj.get("textDelta")
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{obj['type']!r} text is a {type(value).__name__}, not a string")
        provider_metadata = obj.get("providerMetadata")
        meta = None if provider_metadata is None else _reasoning_metadata(provider_metadata)
        self._assembler.thinking(value, id=obj.get("id"), metadata=meta)

    def _reasoning_marker(self, obj: dict[str, Any]) -> None:
        meta = _reasoning_metadata(obj.get("providerMetadata"))
        if meta:
            self._assembler.thinking("", id=obj.get("id"), metadata=meta)

    def _reasoning_signature(self, obj: dict[str, Any]) -> None:
        signature = obj.get("signature")
        if isinstance(signature, str) and signature:
            self._assembler.thinking("", metadata={"signature": signature})

    def _redacted_reasoning(self, obj: dict[str, Any]) -> None:
        data = obj.get("data")
        if isinstance(data, str) and data:
            self._assembler.thinking("", metadata={"redactedData": data})

    # -- tool calls

    @staticmethod
    def _call_id(obj: dict[str, Any]) -> str:
        call_id = obj.get("toolCallId")
        if call_id is None:
            call_id = obj.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise ValueError(f"{obj['type']!r} part has no 'toolCallId' / 'id'")
        return call_id

    def _tool_start(self, obj: dict[str, Any]) -> None:
        key = self._call_id(obj)
        if obj.get("providerExecuted"):
            self._server_run.add(key)
            return
        self._keys.add(key)
        self._assembler.tool_start(key, call_id=key, name=obj.get("toolName"))

    def _tool_delta(self, obj: dict[str, Any]) -> None:
        key = self._call_id(obj)
        if key in self._server_run:
            return
        fragment = obj.get("delta")
        if fragment is None:
            fragment = obj.get("inputTextDelta")
            if fragment is None:
                fragment = obj.get("argsTextDelta")
        if fragment is not None and not isinstance(fragment, str):
            raise TypeError(f"{obj['type']!r} fragment is a {type(fragment).__name__}")
        self._keys.add(key)
        self._assembler.tool_delta(key, fragment, call_id=key, name=obj.get("toolName"))

    def _tool_call(self, obj: dict[str, Any]) -> None:
        key = self._call_id(obj)
        if obj.get("providerExecuted") or key in self._server_run or obj.get("invalid"):
            # run by the provider, or rejected by the SDK, which answers the model itself
            self._server_run.add(key)
            self._assembler.discard_tool(key)
            return
        name = obj.get("toolName")
        arguments = obj["input"] if "input" in obj else obj.get("args")
        self._keys.add(key)
        if isinstance(arguments, str):
            # provider level: the model's own JSON text, and no SDK runs tools at this level
            self._calls_emitted = True
            self._assembler.tool_end(key, arguments=arguments, call_id=key, name=name)
        else:
            # parsed by streamText / the UI stream: the SDK may still run it in this step
            self._assembler.tool_start(key, call_id=key, name=name)
            self._held[key] = {} if arguments is None else arguments

    def _tool_resolved(self, obj: dict[str, Any]) -> None:
        key = obj.get("toolCallId")
        if isinstance(key, str):
            self._held.pop(key, None)
            self._assembler.discard_tool(key)

    def _release_held(self) -> None:
        held, self._held = self._held, {}
        for key, arguments in held.items():
            self._calls_emitted = True
            self._assembler.tool_end(key, arguments=arguments)

    # -- sources, files, data

    def _source(self, obj: dict[str, Any]) -> None:
        src = obj["source"] if isinstance(obj.get("source"), dict) else obj  # v4 nests it
        cited = None
        for entry in _dict(src.get("providerMetadata")).values():
            if isinstance(entry, dict) and isinstance(entry.get("citedText"), str):
                cited = entry["citedText"]
        source_id = src.get("sourceId", src.get("id"))
        source_type = src.get("sourceType") or (
            "document" if obj["type"] == "source-document" else "url"
        )
        self._assembler.data(
            citation_part(
                url=src.get("url"),
                title=src.get("title"),
                cited_text=cited,
                source_id=source_id if isinstance(source_id, str) else None,
                media_type=src.get("mediaType"),
                filename=src.get("filename"),
                extra={"sourceType": source_type},
            )
        )

    def _file(self, obj: dict[str, Any]) -> None:
        src = obj["file"] if isinstance(obj.get("file"), dict) else obj  # v5+ nests it
        mime = src.get("mediaType") or src.get("mimeType")
        if not isinstance(mime, str) or not mime:
            raise ValueError("file part has no 'mediaType' / 'mimeType'")
        for field in ("base64", "base64Data", "uint8Array", "uint8ArrayData", "data"):
            payload = src.get(field)
            if payload is None:
                continue
            if isinstance(payload, dict) and payload.get("type") == "url":
                self._file_url(str(payload.get("url")), mime)  # provider V4 {type: url}
            elif isinstance(payload, dict) and payload.get("type") == "data":
                self._assembler.data(data_part(_file_bytes(payload.get("data"), what=field), mime))
            else:
                self._assembler.data(data_part(_file_bytes(payload, what=field), mime))
            return
        url = src.get("url")
        if isinstance(url, str):
            self._file_url(url, mime)
            return
        raise ValueError("file part has no data ('base64', 'uint8Array', 'data' or 'url')")

    def _file_url(self, url: str, mime: str) -> None:
        if url[:5].lower() == "data:":
            data, url_mime = decode_data_url(url)
            self._assembler.data(data_part(data, mime or url_mime))
        else:
            self._assembler.data(DataPart.json({"url": url, "mediaType": mime}, FILE_URL_MIME))

    def _data(self, name: str, obj: dict[str, Any]) -> None:
        subtype = _MIME_UNSAFE.sub("-", name) or "data"
        if not subtype[0].isalnum():
            subtype = "x" + subtype
        self._assembler.data(DataPart.json(obj.get("data"), f"application/vnd.vercel.{subtype}+json"))

    # -- steps, finish, errors

    def _set_finish(self, value: Any, raw: Any = None) -> None:
        if self._assembler.error is not None:
            return  # an error already decided how the stream ended
        if isinstance(value, dict):  # provider-level V3+: {unified, raw}
            raw = value.get("raw") if raw is None else raw
            value = value.get("unified")
        if not isinstance(value, str):
            return
        shown = raw if isinstance(raw, str) else value
        self._assembler.set_finish(FINISH_REASONS.get(value, FinishReason.OTHER), shown)

    def _step_finish(self, obj: dict[str, Any]) -> None:
        self._release_held()
        usage = _usage(obj.get("usage"))
        if usage is not None:
            self._step_usage = _sum_usage(self._step_usage, usage)
            self._assembler.set_usage(self._step_usage)
        self._set_finish(obj.get("finishReason"), obj.get("rawFinishReason"))

    def _finish(self, obj: dict[str, Any]) -> None:
        self._release_held()
        usage = _usage(obj.get("totalUsage")) or _usage(obj.get("usage"))
        if usage is not None:
            self._assembler.set_usage(usage)
        reason = obj.get("finishReason")
        if reason is None:
            reason = "tool-calls" if self._calls_emitted else "stop"
        self._set_finish(reason, obj.get("rawFinishReason"))

    def _error(self, obj: dict[str, Any]) -> None:
        error = obj.get("errorText", obj.get("error"))
        etype: str | None = None
        code: str | None = None
        if isinstance(error, dict):
            name = error.get("name") or error.get("type")
            etype = name if isinstance(name, str) else None
            raw_code = error.get("code", error.get("statusCode"))
            code = str(raw_code) if raw_code is not None else None
            message = error.get("message") or error.get("errorText")
            text = message if isinstance(message, str) and message else repr(error)
        elif isinstance(error, str) and error:
            text = error
        else:
            text = "the stream reported an error without a message"
        prefix = f"{etype}: " if etype else ""
        self._assembler.fail(
            UpstreamReportedError(
                f"ai-sdk: {prefix}{text}", error_type=etype, code=code, body=error
            )
        )

    def _abort(self, obj: dict[str, Any]) -> None:
        # The run was cancelled: what it had not finished is not emitted, not even a call
        # whose input was complete (nobody will be waiting for its result).
        self._held.clear()
        for key in self._keys:
            self._assembler.discard_tool(key)
        self._assembler.close()
        reason = obj.get("reason")
        self._assembler.set_finish(FinishReason.CANCELLED, reason if isinstance(reason, str) else "abort")


_Handler = Callable[[AISDKDecoder, dict[str, Any]], None]
_HANDLERS: dict[str, _Handler] = {
    "text-delta": AISDKDecoder._text,
    "text": AISDKDecoder._text,
    "reasoning-delta": AISDKDecoder._reasoning,
    "reasoning": AISDKDecoder._reasoning,
    "reasoning-start": AISDKDecoder._reasoning_marker,
    "reasoning-end": AISDKDecoder._reasoning_marker,
    "reasoning-signature": AISDKDecoder._reasoning_signature,
    "redacted-reasoning": AISDKDecoder._redacted_reasoning,
    "tool-input-start": AISDKDecoder._tool_start,
    "tool-call-streaming-start": AISDKDecoder._tool_start,
    "tool-input-delta": AISDKDecoder._tool_delta,
    "tool-call-delta": AISDKDecoder._tool_delta,
    "tool-call": AISDKDecoder._tool_call,
    "tool-input-available": AISDKDecoder._tool_call,
    "tool-input-error": AISDKDecoder._tool_resolved,
    "tool-result": AISDKDecoder._tool_resolved,
    "tool-error": AISDKDecoder._tool_resolved,
    "tool-output-available": AISDKDecoder._tool_resolved,
    "tool-output-error": AISDKDecoder._tool_resolved,
    "tool-output-denied": AISDKDecoder._tool_resolved,
    "source": AISDKDecoder._source,
    "source-url": AISDKDecoder._source,
    "source-document": AISDKDecoder._source,
    "file": AISDKDecoder._file,
    "finish-step": AISDKDecoder._step_finish,
    "step-finish": AISDKDecoder._step_finish,
    "finish": AISDKDecoder._finish,
    "error": AISDKDecoder._error,
    "abort": AISDKDecoder._abort,
}
"""Part type -> handler; every other type produces nothing (``data-*`` aside)."""
AISDKDecoder.handlers = _HANDLERS


_PART_TYPES = frozenset(
    {
        "start",
        "finish",
        "start-step",
        "finish-step",
        "step-finish",
        "stream-start",
        "response-metadata",
        "text-start",
        "text-delta",
        "text-end",
        "reasoning",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-end",
        "tool-input-available",
        "tool-call",
        "tool-call-streaming-start",
        "tool-call-delta",
        "tool-result",
        "source",
        "source-url",
        "source-document",
        "file",
        "abort",
    }
)


def detect(obj: Mapping[str, Any], event_name: str = "") -> bool:
    """Whether a parsed event is an AI SDK stream part (the format's detection rule)."""
    kind = obj.get("type")
    return isinstance(kind, str) and (kind in _PART_TYPES or kind.startswith("data-"))
