"""``lmbridge convert``: show the request body a conversation becomes, or the reverse.

Provider direction: ``lmbridge convert --to FORMAT FILE`` (any format of
:mod:`lmbridge.formats`) reads a VS Code conversation in the wire form, ``{"messages": [wire
messages], "options": wire options, "model"?: str}``, and prints the request body that would
be sent.

Consumer direction: ``lmbridge convert --from FORMAT --to vscode FILE`` (the formats with a
consumer converter) reads ``{"system"?: ..., "messages": [...], "tools"?: [...]}`` in that shape
and prints ``{"messages": [wire messages]}``, with ``"options": {"tools": [...]}`` when the input
has tools (OpenAI's or Anthropic's tool objects; Gemini's are refused, never dropped), which
``--to FORMAT`` reads back.

``FILE`` may be ``-`` for standard input. Bad input is one clear line on stderr and exit 1.
The output is valid UTF-8 JSON: text holding lone surrogates (JSON escapes of half a UTF-16
pair, such as ``"\\ud83d"``) is printed with U+FFFD in their place, as the converters send it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from .. import formats
from ..convert import valid_unicode
from ..errors import ConversionError, LMBridgeError
from ..parts import (
    ChatRequestOptions,
    ChatTool,
    message_to_wire,
    messages_from_wire,
    options_from_wire,
    options_to_wire,
)

__all__ = ["add_parser", "run"]

_TARGETS = (*formats.names(), "vscode")
_SOURCES = formats.consumer_formats()


class _InputError(Exception):
    """The input file cannot be read or has the wrong shape."""


def add_parser(sub: Any) -> None:
    """Register the subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "convert",
        help="convert a conversation to an upstream's request body, or to VS Code messages",
        description=(
            "Print the request body a VS Code conversation (wire JSON: messages, options, model) "
            "becomes for an upstream, or, with --from, turn a history in an upstream's shape "
            "into VS Code wire messages (--to vscode)."
        ),
    )
    p.add_argument("file", metavar="FILE", help="input JSON file, or - for standard input")
    p.add_argument("--to", required=True, choices=_TARGETS, help="output shape")
    p.add_argument("--from", dest="source", choices=_SOURCES, help="input shape (with --to vscode)")
    p.add_argument("--model", help='model id for the request (default: the file\'s "model")')
    p.add_argument(
        "--max-tokens",
        type=int,
        default=4096,
        help="the output budget formats that require one get when the options give none "
        "(default: 4096)",
    )
    p.add_argument(
        "--image-in-non-user",
        choices=["placeholder", "skip", "error"],
        default="placeholder",
        help="images in assistant/system messages (default: placeholder)",
    )
    p.add_argument(
        "--missing-tool-result",
        choices=["placeholder", "drop"],
        default="placeholder",
        help="unanswered tool calls (default: placeholder result)",
    )
    p.add_argument(
        "--orphan-tool-result",
        choices=["text", "error"],
        default="text",
        help="results whose call is missing (default: kept as text)",
    )
    p.add_argument(
        "--no-image-input",
        action="store_true",
        help="the model takes no images: they become placeholders",
    )
    p.add_argument(
        "--reasoning-content",
        choices=["never", "tool-calls", "always"],
        default="never",
        help="Chat Completions reasoning replay (default: never)",
    )
    p.add_argument(
        "--system-as",
        choices=["assistant", "system"],
        default="assistant",
        help="--to vscode: the system prompt as an Assistant (default) or System message",
    )
    p.add_argument(
        "--clean-terminal",
        action="store_true",
        help="strip ANSI escapes and control characters from text",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run ``lmbridge convert``. Exit 0: printed; 1: bad input or options."""
    try:
        body = _convert(args)
        # The converters already send valid Unicode; this covers anything else in the output.
        text = json.dumps(valid_unicode(body), ensure_ascii=False, indent=2)
    except (_InputError, LMBridgeError) as exc:
        print(f"lmbridge convert: {exc}", file=sys.stderr)
        return 1
    except RecursionError:
        print(f"lmbridge convert: {args.file}: JSON nested too deeply to convert", file=sys.stderr)
        return 1
    print(text)
    return 0


def _read(path: str) -> Mapping[str, Any]:
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read()
    except OSError as exc:
        raise _InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise _InputError(f"{path} is not UTF-8 text ({exc.reason})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise _InputError(f"{path} is not valid JSON ({exc})") from None
    except RecursionError:
        raise _InputError(f"{path}: JSON nested too deeply to read") from None
    if not isinstance(data, dict):
        raise _InputError(f'{path}: expected a JSON object with "messages"')
    if "messages" not in data:
        raise _InputError(f'{path}: the object has no "messages"')
    return data


def _consumer_tools(source: str, raw: Any) -> list[ChatTool]:
    """The input's ``tools`` as VS Code tools: kept, or refused, never dropped unseen."""
    if raw is None or raw == []:
        return []
    if source == "gemini":
        raise _InputError(
            '--from gemini: "tools" (functionDeclarations) are not converted; remove them, or '
            "give the tools in OpenAI's or Anthropic's shape with --from chat-completions or "
            "--from anthropic"
        )
    if not isinstance(raw, list):
        raise _InputError(f'"tools": expected a list, got {type(raw).__name__}')
    from ..client.api import tools_from

    try:
        return tools_from(raw)
    except ConversionError as exc:
        raise _InputError(f"tools: {exc}") from None


def _convert(args: argparse.Namespace) -> Any:
    if args.to == "vscode":
        if args.source is None:
            raise _InputError(f"--to vscode needs --from ({' | '.join(_SOURCES)})")
    elif args.source is not None:
        raise _InputError(f"--from {args.source} converts to VS Code messages: use --to vscode")
    data = _read(args.file)
    image_input = not args.no_image_input
    if args.to == "vscode":
        consumer = formats.get(str(args.source)).consumer_function()
        assert consumer is not None  # --from offers only formats that have one
        msgs = consumer(
            data["messages"],
            data.get("system"),
            image_input=image_input,
            system_as=args.system_as,
            clean_terminal=args.clean_terminal,
        )
        out: dict[str, Any] = {"messages": [message_to_wire(m) for m in msgs]}
        tools = _consumer_tools(str(args.source), data.get("tools"))
        if tools:
            # the shape the provider direction reads: this output converts back with --to
            out["options"] = options_to_wire(ChatRequestOptions(tools=tools))
        return out
    messages = messages_from_wire(data["messages"])
    options = options_from_wire(data.get("options"))
    model = args.model or data.get("model") or "model"
    if not isinstance(model, str):
        raise _InputError('"model" must be a string')
    target = formats.get(args.to)
    request_args = {**vars(args), "model": model}
    if "max_tokens" in target.converter_args and args.max_tokens <= 0:
        raise _InputError("--max-tokens must be a positive integer")
    return target.converter_function()(
        messages,
        options,
        **{name: request_args[name] for name in target.converter_args},
        image_in_non_user=args.image_in_non_user,
        missing_tool_result=args.missing_tool_result,
        orphan_tool_result=args.orphan_tool_result,
        image_input=image_input,
        clean_terminal=args.clean_terminal,
    )
