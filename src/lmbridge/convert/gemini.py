"""VS Code messages -> a Gemini ``generateContent`` / ``streamGenerateContent`` request body.

Written against the Gemini API (``v1beta``) and Vertex AI request shape:

- turns are ``contents`` with role ``user`` or ``model``; the system prompt goes in
  ``systemInstruction`` (its texts joined with a blank line);
- images (PNG, JPEG, WebP, HEIC, HEIF), PDFs, audio, video and plain text files are
  ``inlineData`` (base64); other binary data becomes a placeholder naming its type;
- tool calls are ``functionCall`` parts (``name``, ``args``, ``id``); each result is a
  ``functionResponse`` part in the next user turn with the call's ``name`` and ``id``, its
  ``response`` ``{"output": <text, or the JSON value of a JSON result>}`` or, for the
  placeholder of an unanswered call, ``{"error": <text>}``; images a tool returned follow the
  responses as ``inlineData`` parts;
- thought signatures go back on the parts they came with, as Gemini 3 requires for function
  calling: the decoder (:mod:`lmbridge.upstream.gemini`) reports a signature as an empty
  thinking part with ``{"thoughtSignature", "signedPart"}`` metadata before its part; here it
  is put on the next part of that kind in the turn (``functionCall`` or ``text``), or, when
  the host reordered the parts, on the first call without one (a text signature with no text
  after it goes on the turn's last text, where Gemini put it). A thought summary is sent back (``thought: true``) only with its own signature. A turn's first ``functionCall``
  without any signature (history from another model) gets
  :data:`SKIP_SIGNATURE_VALIDATION`, the value Google documents for that case
  (``missing_signature="omit"`` leaves it out). Other upstreams' reasoning is not sent;
- tools are one ``functionDeclarations`` tool; ``toolConfig.functionCallingConfig.mode`` is
  ``ANY`` for :attr:`~lmbridge.parts.ToolMode.REQUIRED`, else ``AUTO``;
- sampling options go in ``generationConfig`` (``temperature``, ``topP``,
  ``maxOutputTokens``, ``stopSequences``, ``seed``).

Tool schemas: Gemini's ``parameters`` take a subset of OpenAPI 3.0 schemas, and a request
with anything else is refused with a 400. :func:`gemini_schema` rewrites a JSON schema into
that subset:

- ``$ref`` is replaced by its ``$defs`` / ``definitions`` target (a reference back into
  itself becomes a plain ``object``); ``allOf`` object schemas are merged into one; ``oneOf``
  becomes ``anyOf``; ``const`` becomes a one-value ``enum``;
- a ``type`` list with ``"null"`` becomes the other type with ``nullable: true``; a list of
  several types becomes ``anyOf``;
- ``enum`` is kept for strings only (Gemini takes no other enums); ``format`` is kept only
  where Gemini knows it (``enum`` and ``date-time`` for strings, ``float`` / ``double`` /
  ``int32`` / ``int64`` for numbers);
- ``required`` names only properties that exist; an object without properties loses its empty
  ``properties`` (Gemini refuses an empty one), and a tool without parameters sends none;
- every other keyword is removed: ``$schema``, ``$id``, ``$defs``, ``additionalProperties``,
  ``patternProperties``, ``unevaluatedProperties``, ``not``, ``if`` / ``then`` / ``else``,
  ``dependentRequired``, ``examples`` (the first becomes ``example``), ``readOnly`` ...
  The kept ones: ``type``, ``format``, ``title``, ``description``, ``nullable``, ``enum``,
  ``properties``, ``required``, ``items``, ``anyOf``, ``minItems``, ``maxItems``,
  ``minProperties``, ``maxProperties``, ``minLength``, ``maxLength``, ``pattern``,
  ``minimum``, ``maximum``, ``default``, ``example``, ``propertyOrdering``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..errors import ConversionError
from ..parts import ChatMessage, ChatRequestOptions, ChatTool, ToolMode
from ._common import (
    Block,
    CallBlock,
    ConversionPolicy,
    MediaBlock,
    ResultBlock,
    TextBlock,
    ThinkingBlock,
    placeholder_for,
    policy_from,
    prepare,
    sampling_options,
    valid_unicode,
)

__all__ = [
    "GEMINI_IMAGE_TYPES",
    "SKIP_SIGNATURE_VALIDATION",
    "gemini_schema",
    "to_gemini",
]

GEMINI_IMAGE_TYPES = frozenset(
    {"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"}
)
"""The image types Gemini takes as ``inlineData``."""

SKIP_SIGNATURE_VALIDATION = "skip_thought_signature_validator"
"""The thought signature Google documents for function calls that never had one (history
written by another model), so that Gemini 3 does not refuse the request."""

MissingSignature = Literal["skip", "omit"]

_KEPT = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "properties",
        "required",
        "items",
        "anyOf",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "default",
        "example",
        "propertyOrdering",
    }
)
_FORMATS = {
    "string": frozenset({"enum", "date-time"}),
    "number": frozenset({"float", "double"}),
    "integer": frozenset({"int32", "int64"}),
}
_MAX_DEPTH = 32


def to_gemini(
    messages: Sequence[ChatMessage],
    options: ChatRequestOptions | None = None,
    *,
    missing_signature: MissingSignature = "skip",
    policy: ConversionPolicy | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """The request body for ``messages`` (the model goes in the URL, not here).

    ``overrides`` are :class:`~lmbridge.convert.ConversionPolicy` fields.
    """
    if missing_signature not in ("skip", "omit"):
        raise ConversionError(
            f"missing_signature must be 'skip' or 'omit', got {missing_signature!r}"
        )
    options = options or ChatRequestOptions()
    pol = policy_from(policy, overrides)
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    for turn in prepare(messages, pol):
        if turn.role == "system":
            system.extend(b.text for b in turn.blocks if isinstance(b, TextBlock) and b.text)
            continue
        if turn.role == "assistant":
            parts = _model_parts(turn.blocks, missing_signature)
        else:
            parts = _user_parts(turn.blocks, pol.image_input)
        if not parts:
            continue
        role = "model" if turn.role == "assistant" else "user"
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    body: dict[str, Any] = {"contents": contents}
    if system:
        body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
    if options.tools:
        body["tools"] = [{"functionDeclarations": [_declaration(t) for t in options.tools]}]
        mode = "ANY" if options.tool_mode == ToolMode.REQUIRED else "AUTO"
        body["toolConfig"] = {"functionCallingConfig": {"mode": mode}}
    config: dict[str, Any] = {}
    for key, name in (
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("max_tokens", "maxOutputTokens"),
        ("stop", "stopSequences"),
        ("seed", "seed"),
    ):
        value = sampling_options(options).get(key)
        if value is not None:
            config[name] = value
    if config:
        body["generationConfig"] = config
    return valid_unicode(body)


# --------------------------------------------------------------------------- turns


def _media(b: MediaBlock, image_input: bool = True) -> dict[str, Any]:
    mime = b.mime
    takes = (
        (mime in GEMINI_IMAGE_TYPES and image_input)
        or mime == "application/pdf"
        or mime.startswith(("audio/", "video/", "text/"))
    )
    if not takes:
        return {"text": placeholder_for(b.data, mime)}
    return {"inlineData": {"mimeType": mime, "data": base64.b64encode(b.data).decode("ascii")}}


def _user_parts(blocks: list[Block], image_input: bool) -> list[dict[str, Any]]:
    responses: list[dict[str, Any]] = []
    rest: list[dict[str, Any]] = []
    for b in blocks:
        if isinstance(b, ResultBlock):
            responses.append(_function_response(b))
            rest.extend(_media(c, image_input) for c in b.content if isinstance(c, MediaBlock))
        elif isinstance(b, TextBlock):
            if b.text:
                rest.append({"text": b.text})
        elif isinstance(b, MediaBlock):
            rest.append(_media(b, image_input))
    # Gemini wants a turn's function responses together, before anything else.
    return responses + rest


def _function_response(b: ResultBlock) -> dict[str, Any]:
    texts = [c for c in b.content if isinstance(c, TextBlock)]
    value: Any = texts[0].json if len(texts) == 1 and texts[0].is_json else b.text
    response = {"error": value} if b.synthetic else {"output": value}
    # The name is required; a result whose call lies outside the history has none left.
    return {"functionResponse": {"name": b.name or "unknown", "id": b.call_id, "response": response}}


def _model_parts(blocks: list[Block], missing_signature: MissingSignature) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    text_signature: str | None = None
    call_signatures: list[str] = []
    for b in blocks:
        if isinstance(b, ThinkingBlock):
            signature = b.metadata.get("thoughtSignature")
            if not isinstance(signature, str) or not signature:
                continue  # unsigned summaries and other upstreams' reasoning
            signed = b.metadata.get("signedPart")
            if signed == "functionCall":
                call_signatures.append(signature)
            elif signed is not None:
                text_signature = signature
            elif b.text:
                parts.append({"text": b.text, "thought": True, "thoughtSignature": signature})
        elif isinstance(b, TextBlock):
            if not b.text:
                continue
            part: dict[str, Any] = {"text": b.text}
            if text_signature is not None:
                part["thoughtSignature"], text_signature = text_signature, None
            parts.append(part)
        elif isinstance(b, CallBlock):
            call: dict[str, Any] = {
                "functionCall": {"name": b.name, "args": b.input, "id": b.call_id}
            }
            if call_signatures:
                call["thoughtSignature"] = call_signatures.pop(0)
            parts.append(call)
        elif isinstance(b, MediaBlock):
            parts.append(_media(b))
    # Signatures with no part of their kind after them: Gemini puts a text signature on the
    # turn's last part (an empty text part, which requests may not hold: the last text takes
    # it); a call's signature is there when the host moved the thinking after the calls.
    for signature in call_signatures:
        target = next((p for p in parts if "functionCall" in p and "thoughtSignature" not in p), None)
        if target is not None:
            target["thoughtSignature"] = signature
    if text_signature is not None:
        texts = [p for p in parts if "text" in p and not p.get("thought")]
        if texts and "thoughtSignature" not in texts[-1]:
            texts[-1]["thoughtSignature"] = text_signature
    if missing_signature == "skip":
        calls = [p for p in parts if "functionCall" in p]
        if calls and not any("thoughtSignature" in p for p in calls):
            calls[0]["thoughtSignature"] = SKIP_SIGNATURE_VALIDATION
    return parts


# --------------------------------------------------------------------------- tools


def _declaration(tool: ChatTool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name, "description": tool.description}
    if tool.input_schema:
        schema = gemini_schema(tool.input_schema)
        if schema.get("properties") or schema.get("type") != "object":
            out["parameters"] = schema
    return out


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` rewritten into the subset Gemini's ``parameters`` take (see the module docstring)."""
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        found = schema.get(key)
        if isinstance(found, Mapping):
            defs.update({f"#/{key}/{name}": value for name, value in found.items()})
    return _schema(schema, defs, (), 0)


def _schema(node: Any, defs: Mapping[str, Any], seen: tuple[str, ...], depth: int) -> dict[str, Any]:
    if not isinstance(node, Mapping) or depth > _MAX_DEPTH:
        return {}
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref)
        if target is None or ref in seen:
            # unknown or recursive: Gemini schemas cannot say more than "an object"
            out: dict[str, Any] = {"type": "object"}
            if isinstance(node.get("description"), str):
                out["description"] = node["description"]
            return out
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _schema(merged, defs, (*seen, ref), depth + 1)
    node = dict(node)
    all_of = node.pop("allOf", None)
    if isinstance(all_of, list):
        for sub in all_of:
            resolved = _schema(sub, defs, seen, depth + 1)
            for key, value in resolved.items():
                if key == "properties":
                    node["properties"] = {**(node.get("properties") or {}), **value}
                elif key == "required":
                    node["required"] = [*node.get("required", []), *value]
                else:
                    node.setdefault(key, value)
    if "oneOf" in node and "anyOf" not in node:
        node["anyOf"] = node.pop("oneOf")
    if "const" in node and "enum" not in node:
        node["enum"] = [node["const"]]
    examples = node.get("examples")
    if "example" not in node and isinstance(examples, list) and examples:
        node["example"] = examples[0]
    out = {}
    kind = node.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if isinstance(k, str)]
        if "null" in kinds:
            out["nullable"] = True
            kinds = [k for k in kinds if k != "null"]
        if len(kinds) == 1:
            kind = kinds[0]
        else:
            kind = None
            if kinds:
                out["anyOf"] = [
                    _schema({**node, "type": k}, defs, seen, depth + 1) for k in kinds
                ]
    if isinstance(kind, str):
        out["type"] = kind
    for key, value in node.items():
        if key not in _KEPT or (key in ("type", "anyOf") and key in out):
            continue
        if key == "properties":
            if isinstance(value, Mapping):
                props = {
                    str(name): _schema(sub, defs, seen, depth + 1) for name, sub in value.items()
                }
                if props:
                    out["properties"] = props
        elif key == "items":
            out["items"] = _schema(value, defs, seen, depth + 1)
        elif key == "anyOf":
            if isinstance(value, list):
                subs = [_schema(sub, defs, seen, depth + 1) for sub in value]
                out["anyOf"] = [s for s in subs if s]
        elif key == "enum":
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                out["enum"] = list(value)
        elif key == "format":
            if isinstance(kind, str) and value in _FORMATS.get(kind, ()):
                out["format"] = value
        elif key != "type":
            out[key] = value
    if "required" in out:
        names = set(out.get("properties", {}))
        required = [r for r in out["required"] if isinstance(r, str) and r in names]
        if required:
            out["required"] = list(dict.fromkeys(required))
        else:
            del out["required"]
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    return out
