"""VS Code messages -> Gemini ``contents`` (and back): roles, system instruction, media, tool
results paired by name and id, thought signatures back on their parts, tool schemas."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from lmbridge.convert import from_gemini, gemini_schema, to_gemini
from lmbridge.convert.gemini import SKIP_SIGNATURE_VALIDATION
from lmbridge.errors import ConversionError
from lmbridge.parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    DataPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolMode,
    ToolResultPart,
)
from support.streams import decode_body, fixture_body

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_roles_system_instruction_media_and_generation_config() -> None:
    messages = [
        ChatMessage.system("You are terse."),
        ChatMessage.user([TextPart("Look:"), DataPart.image(PNG, "image/png"), DataPart(b"%PDF-1", "application/pdf")]),
        ChatMessage.assistant("A picture."),
        ChatMessage.user([DataPart.image(b"BM..", "image/bmp")]),
    ]
    options = ChatRequestOptions(model_options={"temperature": 0.2, "top_p": 0.9, "max_tokens": 50, "stop": "END", "seed": 7})
    body = to_gemini(messages, options)
    assert body["systemInstruction"] == {"parts": [{"text": "You are terse."}]}
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [
                {"text": "Look:"},
                {"inlineData": {"mimeType": "image/png", "data": b64(PNG)}},
                {"inlineData": {"mimeType": "application/pdf", "data": b64(b"%PDF-1")}},
            ],
        },
        {"role": "model", "parts": [{"text": "A picture."}]},
        {"role": "user", "parts": [{"text": "[image omitted: image/bmp, 4 bytes]"}]},
    ]
    assert body["generationConfig"] == {
        "temperature": 0.2,
        "topP": 0.9,
        "maxOutputTokens": 50,
        "stopSequences": ["END"],
        "seed": 7,
    }
    no_images = to_gemini(messages, options, image_input=False)
    assert no_images["contents"][0]["parts"][1] == {"text": f"[image omitted: image/png, {len(PNG)} bytes]"}


def test_tool_results_pair_by_name_and_id_results_first_errors_for_unanswered_calls() -> None:
    messages = [
        ChatMessage.user("Two cities"),
        ChatMessage.assistant(
            [ToolCallPart("c1", "weather", {"city": "Paris"}), ToolCallPart("c2", "weather", {"city": "Oslo"})]
        ),
        ChatMessage.user(
            [
                TextPart("and hurry"),
                ToolResultPart("c1", [TextPart('{"temp": 21}')]),
            ]
        ),
    ]
    contents = to_gemini(messages, missing_signature="omit")["contents"]
    assert contents[1]["parts"] == [
        {"functionCall": {"name": "weather", "args": {"city": "Paris"}, "id": "c1"}},
        {"functionCall": {"name": "weather", "args": {"city": "Oslo"}, "id": "c2"}},
    ]
    responses = contents[2]["parts"]
    assert responses[0] == {"functionResponse": {"name": "weather", "id": "c1", "response": {"output": '{"temp": 21}'}}}
    assert responses[1]["functionResponse"]["id"] == "c2"
    assert "error" in responses[1]["functionResponse"]["response"]  # the unanswered call's placeholder
    assert responses[2] == {"text": "and hurry"}
    json_result = to_gemini(
        [messages[1], ChatMessage.user([ToolResultPart("c1", [DataPart.json({"temp": 21})]), ToolResultPart("c2", [TextPart("x")])])]
    )["contents"]
    assert json_result[-1]["parts"][0]["functionResponse"]["response"] == {"output": {"temp": 21}}


def _round(rel: str) -> tuple[list[Any], dict[str, Any]]:
    parts = decode_body("gemini", [fixture_body(rel)]).parts
    first = next(
        p
        for line in fixture_body(rel).decode().split("\n\n")
        if line.startswith("data: ")
        for p in __import__("json").loads(line[6:])["candidates"][0]["content"]["parts"]
        if "thoughtSignature" in p
    )
    return parts, first


@pytest.mark.parametrize(
    "rel",
    ["google/google-tool-call.chunks.txt", "google/google-stream-tool-call-arguments.chunks.txt"],
)
def test_a_decoded_tool_call_goes_back_with_its_signature(rel: str) -> None:
    parts, signed = _round(rel)
    calls = [p for p in parts if isinstance(p, ToolCallPart)]
    results = [ToolResultPart(c.call_id, [TextPart("ok")]) for c in calls]
    body = to_gemini([ChatMessage.user("q"), ChatMessage.assistant(parts), ChatMessage.user(results)])
    model = body["contents"][1]["parts"]
    assert [p["functionCall"]["id"] for p in model] == [c.call_id for c in calls]
    assert model[0]["thoughtSignature"] == signed["thoughtSignature"]
    assert all("thoughtSignature" not in p for p in model[1:])  # only the first call had one
    # a host that puts the thinking after the calls changes nothing
    moved = [p for p in parts if isinstance(p, ToolCallPart)] + [p for p in parts if isinstance(p, ThinkingPart)]
    again = to_gemini([ChatMessage.user("q"), ChatMessage.assistant(moved), ChatMessage.user(results)])
    assert again["contents"][1]["parts"] == model


def test_a_text_signature_goes_back_on_the_text_and_thoughts_only_with_their_own() -> None:
    parts, signed = _round("google/google-text.chunks.txt")
    body = to_gemini([ChatMessage.user("q"), ChatMessage.assistant(parts), ChatMessage.user("more")])
    (model,) = [c for c in body["contents"] if c["role"] == "model"]
    # the signature was on the last (empty) part: the last text takes it, the others none
    assert model["parts"][-1]["thoughtSignature"] == signed["thoughtSignature"]
    assert all("thoughtSignature" not in p for p in model["parts"][:-1])
    text = "".join(p.value for p in parts if isinstance(p, TextPart))
    joined = [TextPart(text), *[p for p in parts if isinstance(p, ThinkingPart)]]  # as a host keeps it
    body = to_gemini([ChatMessage.user("q"), ChatMessage.assistant(joined), ChatMessage.user("more")])
    assert body["contents"][1]["parts"] == [{"text": text, "thoughtSignature": signed["thoughtSignature"]}]
    history = [
        ChatMessage.user("q"),
        ChatMessage.assistant(
            [
                ThinkingPart("unsigned summary", "r:t1"),
                ThinkingPart("signed thought", "r:t2", {"thoughtSignature": "TS"}),
                ThinkingPart("anthropic thinking", "a", {"signature": "anth"}),
                TextPart("answer"),
            ]
        ),
        ChatMessage.user("next"),
    ]
    model_parts = to_gemini(history)["contents"][1]["parts"]
    assert model_parts == [
        {"text": "signed thought", "thought": True, "thoughtSignature": "TS"},
        {"text": "answer"},
    ]


def test_function_calls_without_any_signature_get_the_documented_skip_value() -> None:
    history = [
        ChatMessage.user("q"),
        ChatMessage.assistant([ToolCallPart("a", "f", {}), ToolCallPart("b", "f", {})]),
        ChatMessage.user([ToolResultPart("a", [TextPart("1")]), ToolResultPart("b", [TextPart("2")])]),
    ]
    model = to_gemini(history)["contents"][1]["parts"]
    assert model[0]["thoughtSignature"] == SKIP_SIGNATURE_VALIDATION and "thoughtSignature" not in model[1]
    assert all("thoughtSignature" not in p for p in to_gemini(history, missing_signature="omit")["contents"][1]["parts"])
    with pytest.raises(ConversionError, match="missing_signature"):
        to_gemini(history, missing_signature="sometimes")  # type: ignore[arg-type]


def test_tools_and_tool_modes() -> None:
    tools = [ChatTool("f", "does f", {"type": "object", "properties": {"a": {"type": "integer"}}}), ChatTool("g", "no args", None)]
    body = to_gemini([ChatMessage.user("x")], ChatRequestOptions(tools=tools))
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {"name": "f", "description": "does f", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}},
                {"name": "g", "description": "no args"},
            ]
        }
    ]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
    required = to_gemini([ChatMessage.user("x")], ChatRequestOptions(tools=tools, tool_mode=ToolMode.REQUIRED))
    assert required["toolConfig"]["functionCallingConfig"]["mode"] == "ANY"
    empty = to_gemini([ChatMessage.user("x")], ChatRequestOptions(tools=[ChatTool("h", "h", {"type": "object", "properties": {}})]))
    assert empty["tools"][0]["functionDeclarations"][0] == {"name": "h", "description": "h"}


def test_schemas_are_rewritten_into_the_subset_gemini_takes() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "x",
        "type": "object",
        "additionalProperties": False,
        "$defs": {
            "Point": {"type": "object", "properties": {"x": {"type": "number", "format": "double"}}, "required": ["x"]},
            "Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}},
        },
        "properties": {
            "p": {"$ref": "#/$defs/Point", "description": "a point"},
            "n": {"$ref": "#/$defs/Node"},
            "maybe": {"type": ["string", "null"], "format": "email", "examples": ["a@b"]},
            "either": {"type": ["string", "integer"]},
            "kind": {"const": "fixed"},
            "level": {"type": "integer", "enum": [1, 2, 3], "minimum": 1},
            "choice": {"oneOf": [{"type": "string"}, {"type": "boolean"}]},
            "merged": {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                                 {"properties": {"b": {"type": "string"}}}]},
            "list": {"type": "array", "items": {"type": "string", "pattern": "^a", "not": {"const": "ab"}}, "maxItems": 3},
            "empty": {"type": "object", "properties": {}, "patternProperties": {".*": {}}},
            "when": {"type": "string", "format": "date-time", "readOnly": True},
        },
        "required": ["p", "ghost"],
        "if": {"properties": {}},
    }
    original = repr(schema)
    out = gemini_schema(schema)
    assert repr(schema) == original  # the caller's schema is not changed
    props = out["properties"]
    assert set(out) == {"type", "properties", "required"} and out["required"] == ["p"]
    assert props["p"] == {"type": "object", "properties": {"x": {"type": "number", "format": "double"}}, "required": ["x"], "description": "a point"}
    assert props["n"] == {"type": "object", "properties": {"next": {"type": "object"}}}
    assert props["maybe"] == {"type": "string", "nullable": True, "example": "a@b"}
    assert props["either"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert props["kind"] == {"enum": ["fixed"], "type": "string"}
    assert props["level"] == {"type": "integer", "minimum": 1}
    assert props["choice"] == {"anyOf": [{"type": "string"}, {"type": "boolean"}]}
    assert props["merged"] == {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"]}
    assert props["list"] == {"type": "array", "items": {"type": "string", "pattern": "^a"}, "maxItems": 3}
    assert props["empty"] == {"type": "object"}
    assert props["when"] == {"type": "string", "format": "date-time"}


def test_from_gemini_and_back_keeps_the_conversation() -> None:
    contents = [
        {"role": "user", "parts": [{"text": "Weather?"}, {"inlineData": {"mimeType": "image/png", "data": b64(PNG)}}]},
        {
            "role": "model",
            "parts": [
                {"text": "thinking about it", "thought": True, "thoughtSignature": "T1"},
                {"functionCall": {"name": "weather", "args": {"city": "Paris"}, "id": "fc1"}, "thoughtSignature": "S1"},
                {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "weather", "response": {"output": "cold"}}},
                {"functionResponse": {"name": "weather", "id": "fc1", "response": {"output": {"temp": 21}}}},
            ],
        },
        {"role": "model", "parts": [{"text": "Paris 21, Oslo cold.", "thoughtSignature": "S2"}]},
    ]
    messages = from_gemini(contents, {"parts": [{"text": "Be brief."}]})
    assert messages[0] == ChatMessage.assistant("Be brief.")
    results = messages[3].content
    assert [(r.call_id, r.content) for r in results if isinstance(r, ToolResultPart)] == [
        ("weather_2", [TextPart("cold")]),
        ("fc1", [TextPart('{"temp": 21}')]),
    ]
    body = to_gemini(messages)
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    model = body["contents"][1]["parts"]
    assert model[0] == contents[1]["parts"][0]
    assert model[1] == contents[1]["parts"][1]
    assert model[2] == {"functionCall": {"name": "weather", "args": {"city": "Oslo"}, "id": "weather_2"}}
    assert body["contents"][3]["parts"] == [{"text": "Paris 21, Oslo cold.", "thoughtSignature": "S2"}]
    assert body["contents"][0]["parts"][1] == contents[0]["parts"][1]


@pytest.mark.parametrize(
    ("contents", "message"),
    [
        ([{"role": "robot", "parts": []}], r"contents\[0\]\.role"),
        ([{"role": "user", "parts": [{"functionCall": {"name": "f"}}]}], "belongs in a model turn"),
        ([{"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}}]}], "no unanswered call"),
        ([{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png", "data": "***"}}]}], "base64"),
        ([{"role": "user", "parts": [{"mystery": 1}]}], "unknown part"),
        # a malformed MIME type is the caller's error too (it used to escape as MimeTypeError)
        (
            [{"role": "user", "parts": [{"inlineData": {"mimeType": "image\u064fng", "data": ""}}]}],
            r"contents\[0\]\.parts\[0\]\.inlineData\.mimeType: malformed MIME type",
        ),
    ],
)
def test_from_gemini_names_bad_input(contents: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ConversionError, match=message):
        from_gemini(contents)
