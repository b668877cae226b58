"""MIME types and the DataPart factory choice (``lmbridge.mime``), directly and through the
decoders that turn an upstream's files into data parts."""

from __future__ import annotations

import base64
import json

import pytest

from lmbridge.mime import MimeTypeError, data_part, factory_for, is_json, is_text, parse_mime
from lmbridge.parts import DataPart
from support.streams import data_parts, decode_body, sse_body

PRETTY = b'{\n  "rows": [1, 2],\n  "name": "caf\xc3\xa9"\n}\n'


@pytest.mark.parametrize(
    ("mime", "factory"),
    [
        ("image/png", "image"),
        ("IMAGE/JPEG; q=1", "image"),
        ("application/json", "json"),
        ("application/ld+json", "json"),
        ("text/x-json", "json"),
        ("text/json", "json"),
        ("text/plain; charset=utf-8", "text"),
        ("text/markdown", "text"),
        ("application/pdf", "raw"),
        ("application/octet-stream", "raw"),
    ],
)
def test_each_mime_type_takes_its_factory(mime: str, factory: str) -> None:
    assert factory_for(mime) == factory


@pytest.mark.parametrize("bad", ["image", "image/", "a b/c", "/png", ""])
def test_malformed_mime_types_are_refused_with_the_value(bad: str) -> None:
    with pytest.raises(MimeTypeError, match="malformed MIME type"):
        parse_mime(bad)


def test_json_text_types_count_as_json_not_text() -> None:
    assert is_json("text/x-json") and not is_text("text/x-json")
    assert parse_mime(" Application/JSON ; charset=utf-8").essence == "application/json"


def test_a_json_file_becomes_a_compact_json_data_part() -> None:
    part = data_part(PRETTY, "application/json")
    assert part.mime_type == "application/json"
    assert part.data == json.dumps(
        {"rows": [1, 2], "name": "café"}, ensure_ascii=False, separators=(",", ":")
    ).encode("utf-8")
    assert part.decode_json() == {"rows": [1, 2], "name": "café"}


def test_json_that_does_not_parse_is_kept_byte_for_byte() -> None:
    assert data_part(b'{"cut": ', "application/json") == DataPart(b'{"cut": ', "application/json")
    assert data_part(b"\xff\xfe", "application/vnd.x+json").data == b"\xff\xfe"


def test_text_image_and_raw_data_keep_their_bytes() -> None:
    assert data_part("héllo", "text/plain") == DataPart("héllo".encode(), "text/plain")
    assert data_part(b"\x89PNG", " image/png ") == DataPart(b"\x89PNG", "image/png")
    assert data_part(b"\xff", "text/plain") == DataPart(b"\xff", "text/plain")  # not UTF-8
    assert data_part(b"%PDF", "application/pdf") == DataPart(b"%PDF", "application/pdf")


def test_an_ai_sdk_json_file_arrives_as_a_json_data_part() -> None:
    """An upstream's JSON file (base64 in an AI SDK ``file`` part) is one JSON data part."""
    line = json.dumps(
        {"type": "file", "mediaType": "application/json", "base64": base64.b64encode(PRETTY).decode()}
    )
    result = decode_body("ai-sdk", [sse_body([line, '{"type":"finish"}'])])
    (part,) = data_parts(result.parts)
    assert part.mime_type == "application/json"
    assert part.decode_json() == {"rows": [1, 2], "name": "café"}
    assert b"\n" not in part.data  # re-serialised, not the file's bytes


def test_a_gemini_inline_json_file_arrives_as_a_json_data_part() -> None:
    chunk = {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {
                            "inlineData": {
                                "mimeType": "application/json",
                                "data": base64.b64encode(PRETTY).decode(),
                            }
                        }
                    ],
                },
                "finishReason": "STOP",
            }
        ]
    }
    result = decode_body("gemini", [sse_body([json.dumps(chunk)])])
    (part,) = data_parts(result.parts)
    assert (part.mime_type, part.decode_json()) == (
        "application/json",
        {"rows": [1, 2], "name": "café"},
    )
