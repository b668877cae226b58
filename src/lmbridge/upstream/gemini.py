"""Google Gemini ``streamGenerateContent`` responses -> VS Code parts.

Written against the Gemini API reference (``v1beta``, ``GenerateContentResponse``) and Vertex
AI's ``streamGenerateContent`` (the same objects, plus streamed function-call arguments). The
stream comes in two shapes, both read here:

- SSE (``?alt=sse``): one ``data:`` event per response object; :class:`ByteStreamDecoder`;
- a JSON array (without ``alt``): ``[{...},{...}]`` sent piece by piece; :class:`JSONArrayStream`
  splits the bytes into objects (at any byte boundary) and :class:`GeminiArrayStreamDecoder`
  feeds them to the decoder.

What each response object's first candidate (``candidates[0]``; more candidates are ignored)
becomes, part by part (the part's field decides which small method reads it):

- ``text`` -> :class:`TextPart`; ``text`` with ``thought: true`` -> :class:`ThinkingPart`
  (one id per run of thought parts, ``"<responseId>:t<n>"``);
- ``thoughtSignature`` (on any part) is kept for the next request, which Gemini 3 requires
  for function calling: on a thought part, in that part's metadata
  (``{"thoughtSignature": ...}``); on any other part, as an empty :class:`ThinkingPart` right
  before the part it came with, whose metadata says which kind of part it belongs to
  (``{"thoughtSignature": ..., "signedPart": "text" | "functionCall"}``, id
  ``"<responseId>:s<n>"``). :mod:`lmbridge.convert.gemini` puts each back on its part;
- ``functionCall`` -> one :class:`ToolCallPart`, emitted whole: ``args`` given at once, or
  streamed (``willContinue`` and ``partialArgs`` entries with a ``jsonPath`` and a
  ``stringValue`` / ``numberValue`` / ``boolValue`` / ``nullValue``, strings arriving in pieces),
  ended by a part without ``willContinue``, by the next call, or by the end of the stream
  when the stream finished; nested paths and array indexes (``$.a.b[2]``) are built as given.
  Several calls in one object are several tool calls. The call's ``id``, when Gemini sends
  one, is the call id;
- ``executableCode`` / ``codeExecutionResult`` (code Gemini ran itself: never a tool call) ->
  JSON data parts of MIME :data:`EXECUTABLE_CODE_MIME` / :data:`CODE_EXECUTION_RESULT_MIME`;
- ``inlineData`` -> a data part of its MIME type (base64 decoded); ``fileData`` -> the file
  URL record :data:`~lmbridge.upstream.ai_sdk.FILE_URL_MIME`;
- ``groundingMetadata.groundingChunks`` (web and retrieved context) and
  ``citationMetadata.citationSources`` -> citation data parts (:mod:`lmbridge.upstream._citations`),
  each source once;
- ``finishReason`` -> the finish reason (:data:`FINISH_REASONS`; ``STOP`` after a tool call is
  ``tool-calls``). Reasons that say the model broke the protocol (``MALFORMED_FUNCTION_CALL``,
  ``UNEXPECTED_TOOL_CALL``, ``TOO_MANY_TOOL_CALLS``, ``MISSING_THOUGHT_SIGNATURE``,
  ``MALFORMED_RESPONSE``) end the stream with an :class:`UpstreamReportedError` naming the
  reason and Gemini's ``finishMessage``;
- ``promptFeedback.blockReason`` (the prompt itself was refused: no candidate follows) -> an
  :class:`UpstreamReportedError` of type ``prompt_blocked`` whose code is the reason;
- ``usageMetadata`` -> :class:`Usage`: input = ``promptTokenCount`` (+
  ``toolUsePromptTokenCount``), output = ``candidatesTokenCount`` + ``thoughtsTokenCount``,
  reasoning = ``thoughtsTokenCount``, cache reads = ``cachedContentTokenCount``; each object
  repeats the counts so far, the latest value of each wins;
- ``{"error": {"code", "message", "status"}}`` -> :class:`UpstreamReportedError`.

A stream that ends before a ``finishReason`` was cut off: an :class:`UpstreamProtocolError`
(the parts so far stay; a call still streaming is dropped).
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Mapping
from itertools import pairwise
from typing import Any, Final

from .._mypyc import mypyc_attr
from ..errors import ToolArgumentsError, UpstreamProtocolError, UpstreamReportedError
from ..mime import data_part
from ..parts import DataPart, FinishReason, ResponsePart, TextPart, Usage
from ..sse import MAX_EVENT_BYTES
from . import _base
from ._assembler import AssemblerOptions, new_usage
from ._base import ByteStreamDecoder, StreamDecoder, update_counts
from ._binary import decode_base64
from ._citations import citation_part
from .ai_sdk import FILE_URL_MIME
from .chat_completions import reported_error

__all__ = [
    "CODE_EXECUTION_RESULT_MIME",
    "EXECUTABLE_CODE_MIME",
    "FINISH_REASONS",
    "GeminiArrayStreamDecoder",
    "GeminiDecoder",
    "JSONArrayStream",
    "detect",
]

# fields of a part that are about the part, not a kind of content
_PART_META: Final = frozenset({"thought", "thoughtSignature", "partMetadata", "videoMetadata"})

EXECUTABLE_CODE_MIME = "application/vnd.google.gemini.executable-code+json"
"""Code Gemini wrote and ran itself: ``{"language", "code"}``."""
CODE_EXECUTION_RESULT_MIME = "application/vnd.google.gemini.code-execution-result+json"
"""What that code produced: ``{"outcome", "output"}``."""

_CODE_MIMES: Final = {
    "executableCode": EXECUTABLE_CODE_MIME,
    "codeExecutionResult": CODE_EXECUTION_RESULT_MIME,
}

FINISH_REASONS: Final[dict[str, FinishReason]] = {
    "STOP": FinishReason.STOP,
    "MAX_TOKENS": FinishReason.LENGTH,
    "SAFETY": FinishReason.CONTENT_FILTER,
    "RECITATION": FinishReason.CONTENT_FILTER,
    "BLOCKLIST": FinishReason.CONTENT_FILTER,
    "PROHIBITED_CONTENT": FinishReason.CONTENT_FILTER,
    "SPII": FinishReason.CONTENT_FILTER,
    "IMAGE_SAFETY": FinishReason.CONTENT_FILTER,
    "IMAGE_PROHIBITED_CONTENT": FinishReason.CONTENT_FILTER,
    "IMAGE_RECITATION": FinishReason.CONTENT_FILTER,
    "LANGUAGE": FinishReason.OTHER,
    "OTHER": FinishReason.OTHER,
    "IMAGE_OTHER": FinishReason.OTHER,
    "NO_IMAGE": FinishReason.OTHER,
    "FINISH_REASON_UNSPECIFIED": FinishReason.OTHER,
}
"""Gemini ``finishReason`` -> normalised finish reason (anything else unknown is ``OTHER``)."""

# (module constants: compiled, a load of a native static, not an attribute of the enum class)
_STOP: Final = FinishReason.STOP
_OTHER: Final = FinishReason.OTHER
_TOOL_CALLS: Final = FinishReason.TOOL_CALLS

_ERROR_REASONS: Final = frozenset(
    {
        "MALFORMED_FUNCTION_CALL",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "MISSING_THOUGHT_SIGNATURE",
        "MALFORMED_RESPONSE",
    }
)

_USAGE_KEYS: Final = (
    "promptTokenCount",
    "candidatesTokenCount",
    "thoughtsTokenCount",
    "cachedContentTokenCount",
    "toolUsePromptTokenCount",
)

# $.a.b, $['a b'], $["a"], $.list[0]
_PATH_STEP: Final = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\['((?:[^'\\]|\\.)*)'\]|\[\"((?:[^\"\\]|\\.)*)\"\]")
_PATHS: Final[dict[str, tuple[str | int, ...]]] = {}
"""jsonPath -> its steps, for the paths seen so far."""
_VALUE_KEYS: Final = ("stringValue", "numberValue", "boolValue", "nullValue")


def detect(obj: Mapping[str, Any], event_name: str = "") -> bool:
    """Whether a parsed object is a Gemini response (the format's detection rule)."""
    if "candidates" in obj or "promptFeedback" in obj:
        return True
    if "usageMetadata" in obj and "type" not in obj:
        return True
    error = obj.get("error")
    return isinstance(error, Mapping) and isinstance(error.get("status"), str)


def _path(json_path: str) -> list[str | int]:
    """``$.a[0].b`` -> ``["a", 0, "b"]``; ``ValueError`` names a path it cannot read."""
    if not isinstance(json_path, str) or not json_path.startswith("$"):
        raise ValueError(f"jsonPath {json_path!r} does not start with '$'")
    steps: list[str | int] = []
    pos = 1
    while pos < len(json_path):
        m = _PATH_STEP.match(json_path, pos)
        if m is None:
            raise ValueError(f"jsonPath {json_path!r}: cannot read it from position {pos}")
        name, index, single, double = m.groups()
        if index is not None:
            steps.append(int(index))
        else:
            quoted = single if single is not None else double
            steps.append(name if quoted is None else re.sub(r"\\(.)", r"\1", quoted))
        pos = m.end()
    if not steps:
        raise ValueError("jsonPath '$' names the whole arguments object, not a field")
    return steps


class _StreamedCall:
    __slots__ = ("args", "key", "name", "open_string")

    def __init__(self, key: Hashable, name: str, args: dict[str, Any]) -> None:
        self.key = key
        self.name = name
        self.args = args
        self.open_string: tuple[str | int, ...] | None = None  # the path of a string arriving


@mypyc_attr(allow_interpreted_subclasses=True)
class GeminiDecoder(StreamDecoder):
    """Gemini ``GenerateContentResponse`` objects -> VS Code parts (see the module docstring)."""

    format = "gemini"

    def __init__(self, options: AssemblerOptions | None = None) -> None:
        super().__init__(options)
        self.response_id: str | None = None
        """The ``responseId`` of the stream."""
        self.model_version: str | None = None
        """The ``modelVersion`` the stream named."""
        self._started = False
        self._finished = False
        self._called_tool = False
        self._call: _StreamedCall | None = None
        self._calls = 0
        self._thought_run: str | None = None  # id of the run of thought parts in progress
        self._thoughts = 0
        self._signatures = 0
        self._usage: dict[str, int] = {}  # the counts read so far
        self._reports: list[dict[str, Any]] = []  # usageMetadata objects not read yet
        self._cited: set[tuple[Any, ...]] | None = None  # (made with the first citation)

    # -- response objects

    def handle(self, obj: dict[str, Any], event_name: str | None) -> None:
        """Decode one response object."""
        if "error" in obj:
            self._error(obj["error"])
            return
        self._started = True
        if self.response_id is None:
            response_id = obj.get("responseId")
            if isinstance(response_id, str):
                self.response_id = response_id
        if self.model_version is None:
            model_version = obj.get("modelVersion")
            if isinstance(model_version, str):
                self.model_version = model_version
        candidates = obj.get("candidates")
        if candidates:
            # the first candidate (the others are ignored)
            candidate: dict[str, Any] = candidates[0]
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, dict) else None
            for part in parts or ():
                if type(part) is dict and len(part) == 1 and self._call is None:
                    text = part.get("text")
                    if type(text) is str:
                        # the usual part, {"text": "..."}: _part -> _text -> asm.text, inline
                        self._thought_run = None
                        asm = self._assembler
                        if asm.plain and text.isascii():
                            if text:
                                asm.emitted_text = True
                                asm.out.append(TextPart(text))
                        else:
                            asm.text(text)
                        continue
                self._part(part)
            if "groundingMetadata" in candidate or "citationMetadata" in candidate:
                self._citations(candidate)
            reason = candidate.get("finishReason")
            if isinstance(reason, str) and reason:
                self._finish(reason, candidate.get("finishMessage"))
        feedback = obj.get("promptFeedback")
        if isinstance(feedback, dict) and feedback.get("blockReason"):
            self._blocked(feedback)
        usage = obj.get("usageMetadata")
        if type(usage) is dict:
            # Every object repeats the counts so far, and most bring nothing new: the reports
            # are kept and read (newest first, see _fold_counts) when the usage is asked for.
            reports = self._reports
            reports.append(usage)
            if len(reports) == 1:  # the first since the usage was last read
                self._assembler.set_usage_from(self._usage_so_far)
            elif len(reports) == 64:  # (a long stream holds no more than that many)
                _fold_counts(self._usage, reports)
                reports.clear()

    def on_close(self) -> None:
        """A stream that never said why it stopped was cut off; one that did flushes its call."""
        if self._call is not None:
            if self._finished:
                self._end_call()
            else:
                call = self._call
                self._call = None
                self._assembler.fail(
                    ToolArgumentsError(
                        call.name,
                        "(no id)",
                        json.dumps(call.args),
                        "the stream ended while its arguments were still arriving",
                    )
                )
                return
        if self._started and not self._finished:
            self._assembler.fail(
                UpstreamProtocolError("gemini: the stream ended before a finishReason (cut off)")
            )

    def _part(self, part: dict[str, Any]) -> None:
        # The part's first field we know decides (compiled, each a direct call; a table of
        # methods would call each through a Python object).
        if "text" in part:
            if not part.get("thought"):
                self._thought_run = None
            self._text(part)
            return
        self._thought_run = None
        if "functionCall" in part:
            self._function_call(part)
        elif "executableCode" in part or "codeExecutionResult" in part:
            self._code(part)
        elif "inlineData" in part:
            self._inline_data(part)
        elif "fileData" in part:
            self._file_data(part)
        else:
            # a part with nothing we know (e.g. only a signature): keep the signature
            unknown = [k for k in part if k not in _PART_META]
            if unknown:
                self.unhandled.add("part:" + unknown[0])
            self._signature(part, "text")

    @property
    def finished(self) -> bool:
        """Whether the stream gave its ``finishReason``."""
        return self._finished

    def fail(self, error: UpstreamProtocolError) -> None:
        """End the stream with an error found outside the objects (e.g. a broken array)."""
        self._assembler.fail(error)

    # -- parts

    def _text(self, part: dict[str, Any]) -> None:
        text = part["text"]
        if not isinstance(text, str):
            raise TypeError(f"text is a {type(text).__name__}, not a string")
        if part.get("thought"):
            self._close_call()
            if self._thought_run is None:
                self._thoughts += 1
                self._thought_run = f"{self.response_id or 'gemini'}:t{self._thoughts}"
            signature = part.get("thoughtSignature")
            metadata = {"thoughtSignature": signature} if isinstance(signature, str) and signature else None
            self._assembler.thinking(text, id=self._thought_run, metadata=metadata)
            return
        if text and self._call is not None:
            self._close_call()
        if "thoughtSignature" in part:
            self._signature(part, "text")
        self._assembler.text(text)

    def _function_call(self, part: dict[str, Any]) -> None:
        call = part["functionCall"]
        if not isinstance(call, dict):
            raise TypeError(f"functionCall is a {type(call).__name__}, not an object")
        name = call.get("name")
        args = call.get("args")
        if args is not None and not isinstance(args, dict):
            raise TypeError(f"functionCall.args is a {type(args).__name__}, not an object")
        partial = call.get("partialArgs")
        more = bool(call.get("willContinue"))
        if name:
            self._close_call()  # a new call ends the one before it
            self._signature(part, "functionCall")
            call_id = call.get("id") if isinstance(call.get("id"), str) else None
            self._called_tool = True
            if not more and not partial:
                self._assembler.tool_call(call_id, name, dict(args or {}))
                return
            self._calls += 1
            key = ("call", self._calls)
            self._assembler.tool_start(key, call_id=call_id, name=name)
            self._call = _StreamedCall(key, name, dict(args or {}))
        elif self._call is None:
            if partial or more:
                raise ValueError("partialArgs for a function call that was never started")
            return  # an empty closing part with nothing open
        else:
            self._signature(part, "functionCall")
        for arg in partial or ():
            self._partial_arg(arg)
        if not more:
            self._end_call()

    def _partial_arg(self, arg: Mapping[str, Any]) -> None:
        assert self._call is not None
        json_path = arg["jsonPath"]
        steps = _PATHS.get(json_path) if type(json_path) is str else None
        if steps is None:
            steps = tuple(_path(json_path))
            if type(json_path) is str and len(_PATHS) < 256:
                _PATHS[json_path] = steps  # a call's paths repeat (bounded: names are few)
        value_key = next((k for k in _VALUE_KEYS if k in arg), None)
        if value_key is None:
            raise ValueError(f"partialArgs entry for {arg['jsonPath']!r} has no value")
        value: Any = None if value_key == "nullValue" else arg[value_key]
        call = self._call
        if value_key == "stringValue":
            if not isinstance(value, str):
                raise TypeError(f"stringValue at {arg['jsonPath']!r} is not a string")
            if call.open_string == steps:
                value = _get(call.args, steps) + value
            call.open_string = steps if arg.get("willContinue") else None
        else:
            call.open_string = None
        _set(call.args, steps, value)

    def _end_call(self) -> None:
        call, self._call = self._call, None
        if call is not None:
            self._assembler.tool_end(call.key, arguments=call.args)

    def _close_call(self) -> None:
        # Content of another kind after a streamed call: that call is over.
        if self._call is not None:
            self._end_call()

    def _code(self, part: dict[str, Any]) -> None:
        # code Gemini ran itself, and what it printed: shown, never run here
        kind = "executableCode" if "executableCode" in part else "codeExecutionResult"
        self._close_call()
        self._signature(part, kind)
        self._assembler.data(DataPart.json(dict(part[kind]), _CODE_MIMES[kind]))

    def _inline_data(self, part: dict[str, Any]) -> None:
        blob = part["inlineData"]
        self._close_call()
        mime = blob.get("mimeType") or "application/octet-stream"
        self._signature(part, "inlineData")
        self._assembler.data(data_part(decode_base64(blob.get("data") or ""), mime))

    def _file_data(self, part: dict[str, Any]) -> None:
        ref = part["fileData"]
        self._close_call()
        self._signature(part, "fileData")
        record = {"url": ref.get("fileUri"), "mediaType": ref.get("mimeType")}
        self._assembler.data(DataPart.json({k: v for k, v in record.items() if v}, FILE_URL_MIME))

    def _signature(self, part: Mapping[str, Any], kind: str) -> None:
        signature = part.get("thoughtSignature")
        if isinstance(signature, str) and signature:
            self._signatures += 1
            self._assembler.thinking(
                "",
                id=f"{self.response_id or 'gemini'}:s{self._signatures}",
                metadata={"thoughtSignature": signature, "signedPart": kind},
            )

    # -- candidate level

    def _citations(self, candidate: Mapping[str, Any]) -> None:
        grounding = candidate.get("groundingMetadata")
        if isinstance(grounding, dict):
            for chunk in grounding.get("groundingChunks") or ():
                if not isinstance(chunk, dict):
                    continue
                source = chunk.get("web") or chunk.get("retrievedContext") or chunk.get("maps")
                if isinstance(source, dict):
                    self._cite(source.get("uri"), source.get("title"), None)
        citations = candidate.get("citationMetadata")
        if isinstance(citations, dict):
            for source in citations.get("citationSources") or citations.get("citations") or ():
                if isinstance(source, dict):
                    self._cite(source.get("uri"), source.get("title"), source.get("license"))

    def _cite(self, uri: Any, title: Any, license: Any) -> None:
        uri = uri if isinstance(uri, str) and uri else None
        title = title if isinstance(title, str) and title else None
        if uri is None and title is None:
            return
        seen = (uri, title)
        cited = self._cited
        if cited is None:
            cited = self._cited = set()
        elif seen in cited:  # Gemini repeats grounding in later objects
            return
        cited.add(seen)
        extra = {"license": license} if isinstance(license, str) and license else None
        self._assembler.data(citation_part(url=uri, title=title, extra=extra))

    def _finish(self, reason: str, message: Any) -> None:
        self._finished = True
        if reason in _ERROR_REASONS:
            said = f": {message}" if isinstance(message, str) and message else ""
            self._assembler.fail(
                UpstreamReportedError(
                    f"gemini: the model stopped with {reason}{said}",
                    error_type="finish_reason",
                    code=reason,
                    body={"finishReason": reason, "finishMessage": message},
                )
            )
            return
        normal = FINISH_REASONS.get(reason, _OTHER)
        if normal is _STOP and self._called_tool:
            normal = _TOOL_CALLS
        self._assembler.set_finish(normal, reason)

    def _blocked(self, feedback: Mapping[str, Any]) -> None:
        reason = str(feedback["blockReason"])
        said = feedback.get("blockReasonMessage")
        extra = f": {said}" if isinstance(said, str) and said else ""
        self._assembler.fail(
            UpstreamReportedError(
                f"gemini: the prompt was blocked ({reason}){extra}; rephrase the request",
                error_type="prompt_blocked",
                code=reason,
                body=dict(feedback),
            )
        )

    def _usage_so_far(self) -> Usage | None:
        if self._reports:
            _fold_counts(self._usage, self._reports)
            self._reports = []
        u = self._usage
        if not u:
            return None  # no report had a count
        prompt = u.get("promptTokenCount")
        candidates = u.get("candidatesTokenCount")
        thoughts = u.get("thoughtsTokenCount")
        tool_prompt = u.get("toolUsePromptTokenCount")
        input_tokens = None if prompt is None else prompt + (tool_prompt or 0)
        # Gemini counts thoughts apart from the candidates; Usage's output includes them.
        output_tokens = (
            None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
        )
        # (input, output, cache reads, cache writes, reasoning)
        return new_usage(input_tokens, output_tokens, u.get("cachedContentTokenCount"), None, thoughts)

    def _error(self, error: Any) -> None:
        self._assembler.fail(reported_error(error, "gemini"))


def _fold_counts(counts: dict[str, int], reports: list[dict[str, Any]]) -> None:
    """The token counts of ``reports`` (oldest first) into ``counts``, as
    :func:`~lmbridge.upstream._base.update_counts` on each in turn would: each field's latest
    valid value wins. The newest report's plain counts win without a look at the others (each
    report repeats the counts so far): only the fields it lacks are looked for in the older."""
    newest = reports[-1]
    rest: list[str] = []
    odd = False  # a field of the newest that is there but not a plain count
    for key in _USAGE_KEYS:
        value = newest.get(key)
        if type(value) is int and value >= 0:
            counts[key] = value
        else:
            rest.append(key)
            odd = odd or value is not None
    if rest and (odd or len(reports) > 1):
        keys = tuple(rest)
        for i in range(len(reports) - 1):
            update_counts(counts, reports[i], keys)
        if odd:
            update_counts(counts, newest, keys)


def _get(root: Any, steps: tuple[str | int, ...]) -> Any:
    node = root
    for step in steps:
        node = node[step]
    return node


def _set(root: dict[str, Any], steps: tuple[str | int, ...], value: Any) -> None:
    node: Any = root
    for step, following in pairwise(steps):
        empty: Any = [] if isinstance(following, int) else {}
        node = _child(node, step, empty)
    last = steps[-1]
    if isinstance(last, int):
        if not isinstance(node, list):
            raise TypeError(f"index [{last}] into a {type(node).__name__}")
        node.extend([None] * (last + 1 - len(node)))
        node[last] = value
    else:
        if not isinstance(node, dict):
            raise TypeError(f"field {last!r} of a {type(node).__name__}")
        node[last] = value


def _child(node: Any, step: str | int, empty: Any) -> Any:
    if isinstance(step, int):
        if not isinstance(node, list):
            raise TypeError(f"index [{step}] into a {type(node).__name__}")
        node.extend([None] * (step + 1 - len(node)))
        if node[step] is None:
            node[step] = empty
        return node[step]
    if not isinstance(node, dict):
        raise TypeError(f"field {step!r} of a {type(node).__name__}")
    return node.setdefault(step, empty)


# --------------------------------------------------------------------------- the JSON-array form

_SPECIAL: Final = re.compile(rb'["\\{}\[\]]')
_WS: Final = b" \t\r\n"


class JSONArrayStream:
    """The bytes of a JSON array of objects -> each object's text, as soon as it is complete.

    Sans-IO and incremental: :meth:`feed` takes any piece of the body (a cut may fall anywhere,
    inside a string or a multi-byte character) and returns the elements completed by it, as
    bytes for the caller's JSON parser. A problem stops the reading: :attr:`error` is then the
    :class:`UpstreamProtocolError` naming it (the elements before it were returned), and
    :meth:`close` raises it, or the error of an array that did not end properly.
    """

    def __init__(self, max_element_bytes: int = MAX_EVENT_BYTES) -> None:
        self.max_element_bytes = max_element_bytes
        """The most bytes one element may hold before it is complete (``0``: no bound), as
        an SSE event (:data:`~lmbridge.sse.MAX_EVENT_BYTES`)."""
        self._state = "start"  # start | element | between | end
        self._buf = bytearray()  # the element so far
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._offset = 0  # bytes consumed, for messages
        self.error: UpstreamProtocolError | None = None
        """What broke the array, once something did."""

    def feed(self, data: bytes) -> list[bytes]:
        """The elements completed by ``data`` (until a problem, see :attr:`error`)."""
        out: list[bytes] = []
        if self.error is not None:
            return out
        try:
            self._feed(data, out)
        except UpstreamProtocolError as exc:
            self.error = exc
        return out

    def _feed(self, data: bytes, out: list[bytes]) -> None:
        pos, n = 0, len(data)
        while pos < n:
            state = self._state
            if state == "element":
                pos = self._scan(data, pos, out)
                continue
            byte = data[pos]
            if byte in _WS:
                pos += 1
                continue
            char = chr(byte)
            if state == "start":
                if char != "[":
                    self._bad(f"expected '[' to open the array, got {char!r}", pos)
                self._state = "between_first"
            elif state in ("between_first", "between", "after"):
                if char == "]" and state != "between":
                    self._state = "end"
                elif char == "," and state == "after":
                    self._state = "between"
                elif char == "{" and state in ("between_first", "between"):
                    self._state = "element"
                    continue  # the element scanner takes the brace
                else:
                    expected = {"between_first": "an object or ']'", "between": "an object",
                                "after": "',' or ']'"}[state]
                    self._bad(f"expected {expected}, got {char!r}", pos)
            else:  # end
                self._bad(f"data after the closing ']': {char!r}", pos)
            pos += 1
        self._offset += n

    def _scan(self, data: bytes, pos: int, out: list[bytes]) -> int:
        # Only quotes, backslashes and brackets matter: jump from one to the next.
        start = pos
        n = len(data)
        while pos < n:
            if self._escape:
                self._escape = False
                pos += 1
                continue
            m = _SPECIAL.search(data, pos)
            if m is None:
                pos = n
                break
            pos = m.start()
            char = data[pos]
            if self._in_string:
                if char == 0x5C:  # backslash
                    self._escape = True
                elif char == 0x22:
                    self._in_string = False
            elif char == 0x22:
                self._in_string = True
            elif char in (0x7B, 0x5B):
                self._depth += 1
            elif char in (0x7D, 0x5D):
                self._depth -= 1
                if self._depth == 0:
                    self._buf += data[start : pos + 1]
                    out.append(bytes(self._buf))
                    self._buf.clear()
                    self._state = "after"
                    return pos + 1
            pos += 1
        self._buf += data[start:pos]
        if len(self._buf) > self.max_element_bytes > 0:
            size = len(self._buf)
            self._buf = bytearray()
            raise UpstreamProtocolError(
                f"gemini: an element of the JSON-array stream grew past "
                f"{self.max_element_bytes:,} bytes without ending ({size:,} bytes of it received)"
            )
        return pos

    def _bad(self, what: str, pos: int) -> None:
        raise UpstreamProtocolError(
            f"gemini: the JSON-array stream is malformed at byte {self._offset + pos}: {what}"
        )

    @property
    def inside_element(self) -> bool:
        """Whether the body so far ends inside an element."""
        return self._state == "element"

    def close(self) -> None:
        """End of body: an error unless the array was closed."""
        if self.error is not None:
            raise self.error
        if self._state == "end":
            return
        if self._state == "element":
            raise UpstreamProtocolError(
                f"gemini: the JSON-array stream was cut inside an element "
                f"({len(self._buf)} bytes of it received)"
            )
        if self._state == "start":
            raise UpstreamProtocolError("gemini: the JSON-array stream is empty")
        raise UpstreamProtocolError("gemini: the JSON-array stream ended before its closing ']'")


@mypyc_attr(allow_interpreted_subclasses=True)
class GeminiArrayStreamDecoder(ByteStreamDecoder):
    """Bytes of the JSON-array form (``streamGenerateContent`` without ``alt=sse``) -> parts.

    :class:`~lmbridge.upstream.ByteStreamDecoder` for that form instead of SSE: a broken array
    ends the stream with the :class:`UpstreamProtocolError` that names the problem, the parts
    before it kept.
    """

    def __init__(self, decoder: GeminiDecoder | None = None) -> None:
        self.gemini = decoder or GeminiDecoder()
        """The Gemini decoder (also :attr:`decoder`)."""
        super().__init__(self.gemini)
        self.array = JSONArrayStream()

    def feed(self, chunk: bytes) -> list[ResponsePart]:
        """Decode a chunk of the body."""
        if self.decoder.closed:
            return []
        out: list[ResponsePart] = []
        for element in self.array.feed(chunk):
            out += self._element(element)
        if self.array.error is not None:
            self.gemini.fail(self.array.error)
        return out

    def _element(self, element: bytes) -> list[ResponsePart]:
        try:
            obj = _base.json_loads(element)  # the parser set now (set_json_loads)
        except (ValueError, RecursionError) as exc:
            shown = element[:200]
            self.gemini.fail(
                UpstreamProtocolError(f"gemini: an array element is not valid JSON ({exc}): {shown!r}")
            )
            return []
        return self.decoder.feed_json(obj)

    def close(self) -> list[ResponsePart]:
        """End of body."""
        out: list[ResponsePart] = []
        if not self.decoder.closed:
            try:
                self.array.close()
            except UpstreamProtocolError as exc:
                # A missing ']' after the stream said it finished loses nothing: only a cut
                # that left the answer unfinished is an error.
                if exc is self.array.error or not (
                    self.gemini.finished and not self.array.inside_element
                ):
                    self.gemini.fail(exc)
        out += self.decoder.close()
        return out
