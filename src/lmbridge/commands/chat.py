"""``lmbridge chat``: talk to any provider from a terminal, through the host VS Code uses.

The provider side: the real host runs as a subprocess (``lmbridge host``, with ``--config
FILE`` when given: strict, and provider modules are also found in the current folder) and is
spoken to over stdio exactly as the VS Code extension does (``initialize``, ``models/list``,
``chat/response``). With ``--vscode``, or a model that names VS Code's models
(``vscodelm/...``), the consumer side instead: VS Code's own models (Copilot and every
provider installed there) through the loopback endpoint of the running VS Code
(:class:`~lmbridge.client.HttpTransport`, the endpoint file found as in :mod:`lmbridge.client.discovery`).

A prompt (the arguments, or standard input when it is not a terminal) gets one answer: its
text on stdout, everything else (thinking, tool calls, the usage line, errors) on stderr,
each marked. Without a prompt on a terminal: an interactive chat that keeps the conversation
(``/reset`` forgets it, ``/exit`` or Ctrl-D ends it, Ctrl-C stops an answer), with line
editing and the lines' history of this session (readline).

Tools: ``--tools FILE`` offers tools to the model, as JSON: a list of tool objects in VS
Code's (``{"name", "description", "inputSchema"}``), OpenAI's or Anthropic's shape, each with
an optional ``"result"``. A tool call is shown, never run: when its tool has a ``result``, that
text is sent back as the call's result and the model goes on (at most ``--max-rounds``
rounds); otherwise the answer ends at the call.

Exit status: 0 answered; 1 the request failed; 2 bad usage or a configuration that cannot load;
130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TextIO

from ..parts import (
    ChatMessage,
    ChatRequestOptions,
    ChatTool,
    DataPart,
    ResponsePart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from ._common import InputError, read_text, say_error, start_host_args

__all__ = ["add_parser", "run"]

_VSCODE_PREFIX = "vscodelm/"


def add_parser(sub: Any) -> None:
    """Register the subcommand."""
    p: argparse.ArgumentParser = sub.add_parser(
        "chat",
        help="chat with a provider from the terminal (the host VS Code uses), or with VS Code's models",
        description=(
            "Chat with a model through the lmbridge host, as VS Code does (no configuration: "
            "the built-in echo model). With a PROMPT (or standard input that is not a "
            "terminal): one answer, its text on stdout, thinking, tool calls and the usage "
            "line on stderr. Without one on a terminal: an interactive chat (/reset, /exit). "
            "--vscode talks to VS Code's own models through the running loopback endpoint."
        ),
    )
    p.add_argument("prompt", nargs="*", metavar="PROMPT", help="the prompt (default: stdin)")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="providers as JSON or TOML, or - for standard input (then give the PROMPT as "
        "arguments); provider modules are also found in the current folder",
    )
    p.add_argument(
        "--model",
        metavar="ID",
        help="the model: an id from `lmbridge check` (echo/echo), or a provider's own id "
        "(echo); with --vscode a VS Code selector (vscodelm/auto, copilot/gpt-4o); "
        "vscodelm/... implies --vscode (default: the first model)",
    )
    p.add_argument(
        "--vscode",
        action="store_true",
        help="talk to VS Code's models through the loopback endpoint of the running VS Code",
    )
    p.add_argument(
        "--endpoint-file",
        metavar="FILE",
        help="with --vscode: the endpoint file to read (default: found as `lmbridge agent-env` "
        "says)",
    )
    p.add_argument(
        "--tools",
        metavar="FILE",
        help='tools to offer, JSON: [{"name", "description", "inputSchema", "result"?}] '
        "(or OpenAI/Anthropic tool objects); a call to a tool with a \"result\" gets that "
        "result, other calls are shown and end the answer",
    )
    p.add_argument(
        "--max-rounds",
        type=int,
        default=8,
        metavar="N",
        help="tool rounds answered from --tools before stopping (default: 8)",
    )
    p.add_argument(
        "--no-thinking", action="store_true", help="do not show the model's thinking"
    )
    p.set_defaults(run=run)


# --------------------------------------------------------------------------- tools


def _read_tools(path: str) -> tuple[list[ChatTool], dict[str, str]]:
    from ..client.api import tools_from
    from ..errors import ConversionError

    text = read_text(path)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"--tools {path}: not valid JSON ({exc})") from None
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    if not isinstance(data, list):
        raise InputError(f'--tools {path}: expected a list of tools, [{{"name": ...}}]')
    results: dict[str, str] = {}
    specs = []
    for item in data:
        if isinstance(item, dict) and "result" in item:
            item = dict(item)
            result = item.pop("result")
            spec_name = (item.get("function") or item).get("name")
            if isinstance(spec_name, str):
                results[spec_name] = (
                    result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
                )
        specs.append(item)
    try:
        return tools_from(specs), results
    except ConversionError as exc:
        raise InputError(f"--tools {path}: {exc}") from None


# --------------------------------------------------------------------------- output


class _Printer:
    """Shows a stream of parts: text on stdout, the rest on stderr, each kind marked."""

    def __init__(self, out: TextIO, err: TextIO, *, thinking: bool) -> None:
        self.out, self.err = out, err
        self.thinking = thinking
        self._kind = ""
        self._open: TextIO | None = None  # the stream whose line is not finished
        self._dim = err.isatty() and not os.environ.get("NO_COLOR")
        self.text_ended_newline = True

    def _start(self, kind: str, stream: TextIO) -> None:
        if self._open is not None and (kind != self._kind or stream is not self._open):
            if self._open is self.err or self._open.isatty():
                self._open.write("\n")
                self._open.flush()
            self._open = None
        self._kind = kind

    def part(self, part: ResponsePart) -> None:
        if isinstance(part, TextPart):
            if not part.value:
                return
            self._start("text", self.out)
            self.out.write(part.value)
            self.out.flush()
            self._open = self.out
            self.text_ended_newline = part.value.endswith("\n")
        elif isinstance(part, ThinkingPart):
            if not self.thinking or not part.text:
                return
            new = self._kind != "thinking"
            self._start("thinking", self.err)
            if new:
                self.err.write(self._style("[thinking] "))
            self.err.write(self._style(part.text))
            self.err.flush()
            self._open = self.err
        elif isinstance(part, ToolCallPart):
            self.note(f"[tool call] {part.name} {json.dumps(part.input, ensure_ascii=False)} (id {part.call_id})")
        elif isinstance(part, DataPart):
            self.note(f"[data] {part.mime_type}, {len(part.data)} bytes")

    def note(self, line: str) -> None:
        """One marked line on stderr, on a line of its own."""
        self._start("note", self.err)
        self.err.write(line + "\n")
        self.err.flush()
        self._kind = "note"

    def end(self) -> None:
        """Finish the answer's last line."""
        if self._open is self.out and not self.text_ended_newline:
            self.out.write("\n")
            self.out.flush()
        elif self._open is self.err:
            self.err.write("\n")
            self.err.flush()
        self._open = None
        self._kind = ""

    def _style(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self._dim else text


# --------------------------------------------------------------------------- backends


class _Failed(Exception):
    """The request failed: the message says why (exit ``status``)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


class _Cancelled(Exception):
    """The user stopped the answer (Ctrl-C)."""


class _Backend(Protocol):
    model: str

    async def send(
        self,
        messages: list[ChatMessage],
        options: ChatRequestOptions,
        show: Callable[[ResponsePart], None],
        cancel: asyncio.Event,
    ) -> tuple[list[ResponsePart], dict[str, Any]]: ...

    async def aclose(self) -> None: ...


async def _wait_or_cancel(fut: Any, cancel: asyncio.Event) -> bool:
    """Wait for ``fut``; True when ``cancel`` was set first."""
    stop = asyncio.ensure_future(cancel.wait())
    try:
        done, _ = await asyncio.wait({fut, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
    return fut not in done


class _HostBackend:
    """The provider side: the real host as a subprocess, spoken to as VS Code does."""

    def __init__(self) -> None:
        self._stack = contextlib.AsyncExitStack()
        self.host: Any = None
        self.model = ""

    async def open(self, host_args: list[str], wanted: str | None) -> None:
        from ..host.client import HostClient

        self.host = await self._stack.enter_async_context(
            # its own session: Ctrl-C stops the answer (a cancel), not the host
            HostClient.start([*host_args, "--log-level", "warning"], own_session=True)
        )
        try:
            init = await self.host.initialize(providers=[], secrets={})
        except ConnectionError:
            code = await self.host.process.wait()
            # the strict host said why on stderr (it is ours)
            raise _Failed(f"the host stopped (exit {code}): see the lines above", 2) from None
        for p in init["providers"]:
            if not p["ok"]:
                say_error("chat", f"warning: provider {p['name']!r} is not available: {p['error']}")
        models = (await self.host.request("models/list", {"silent": False}))["models"]
        ids = [m["id"] for m in models]
        if not ids:
            raise _Failed("no model is available: `lmbridge check` says why")
        self.model = _pick(wanted, ids)

    async def send(
        self,
        messages: list[ChatMessage],
        options: ChatRequestOptions,
        show: Callable[[ResponsePart], None],
        cancel: asyncio.Event,
    ) -> tuple[list[ResponsePart], dict[str, Any]]:
        from ..host.jsonrpc import RemoteError

        def on_parts(parts: list[ResponsePart]) -> None:
            for part in parts:
                show(part)

        call = self.host.start_chat(self.model, messages, options, on_parts=on_parts)
        if await _wait_or_cancel(call.future, cancel):
            self.host.cancel(call)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(call.future, 10)
            raise _Cancelled
        try:
            result = call.future.result()
        except RemoteError as exc:
            raise _Failed(exc.message) from None
        except ConnectionError:
            raise _Failed("the host stopped while answering") from None
        return call.parts, dict(result.get("stats") or {})

    async def aclose(self) -> None:
        await self._stack.aclose()


class _VSCodeBackend:
    """The consumer side: VS Code's models through the running loopback endpoint."""

    def __init__(self) -> None:
        self.client: Any = None
        self.transport: Any = None
        self.model = ""

    async def open(self, endpoint_file: str | None, wanted: str | None) -> None:
        from ..client import ChatRequestError, ErrorKind, HttpTransport, LanguageModelClient
        from ..client.discovery import EndpointNotFoundError

        try:
            self.transport = HttpTransport.discover(Path(endpoint_file) if endpoint_file else None)
        except EndpointNotFoundError as exc:
            raise _Failed(str(exc)) from None
        selector = wanted or "vscodelm/auto"
        self.client = LanguageModelClient(self.transport, selector=selector, fallback=False)
        try:
            model = await self.client.model()
        except ChatRequestError as exc:
            # "no model matches" names the models there are; other kinds say it for users
            found = exc.kind is ErrorKind.MODEL_NOT_FOUND
            raise _Failed(str(exc) if found else exc.user_message or str(exc)) from None
        self.model = f"{model.vendor}/{model.id}"

    async def send(
        self,
        messages: list[ChatMessage],
        options: ChatRequestOptions,
        show: Callable[[ResponsePart], None],
        cancel: asyncio.Event,
    ) -> tuple[list[ResponsePart], dict[str, Any]]:
        from ..client import ChatRequestError, ErrorKind
        from ..errors import ConversionError

        started = time.perf_counter()
        first: float | None = None
        try:
            response = await self.client.send_request(messages, options, cancel=cancel)
            async for part in response:
                if first is None:
                    first = time.perf_counter()
                show(part)
        except ChatRequestError as exc:
            if exc.kind is ErrorKind.CANCELLED and cancel.is_set():
                raise _Cancelled from None
            raise _Failed(exc.user_message or str(exc)) from None
        except ConversionError as exc:
            raise _Failed(str(exc)) from None
        if cancel.is_set():
            raise _Cancelled
        usage = response.usage
        stats = {
            "model": self.model,
            "inputTokens": usage.input_tokens,
            "outputTokens": usage.output_tokens,
            "durationMs": round((time.perf_counter() - started) * 1000),
            "firstTokenMs": None if first is None else round((first - started) * 1000),
            "finishReason": "tool-calls" if response.tool_calls else "stop",
            "estimated": True,
        }
        return response.parts, stats

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()
        if self.transport is not None:
            await self.transport.aclose()


def _pick(wanted: str | None, ids: list[str]) -> str:
    if not wanted:
        return ids[0]
    if wanted in ids:
        return wanted
    # a provider's own id ("echo"), or a provider name ("echo/") when it is unambiguous
    matches = [i for i in ids if i.split("/", 1)[1] == wanted or i.split("/", 1)[0] == wanted]
    if len(matches) == 1:
        return matches[0]
    shown = ", ".join(ids[:20]) + (" ..." if len(ids) > 20 else "")
    what = "matches several models" if matches else "is not a model of this configuration"
    raise _Failed(f"--model {wanted} {what}; the models: {shown}")


# --------------------------------------------------------------------------- the chat


class _Session:
    def __init__(self, backend: _Backend, args: argparse.Namespace, printer: _Printer) -> None:
        self.backend = backend
        self.printer = printer
        self.tools: list[ChatTool] = []
        self.results: dict[str, str] = {}
        self.max_rounds = args.max_rounds
        self.history: list[ChatMessage] = []

    async def turn(self, prompt: str, cancel: asyncio.Event) -> None:
        """Ask ``prompt`` with the history; answer tool calls from --tools; print it all."""
        from ..host.server import usage_line

        messages = [*self.history, ChatMessage.user(prompt)]
        options = ChatRequestOptions(tools=list(self.tools))
        rounds = 0
        while True:
            try:
                parts, stats = await self.backend.send(messages, options, self.printer.part, cancel)
            finally:
                self.printer.end()
            reply = [p for p in parts if isinstance(p, (TextPart, ToolCallPart))]
            if reply:
                messages.append(ChatMessage.assistant(reply))
            line = usage_line(stats) if stats else f"answer from {self.backend.model}"
            if stats.get("estimated"):
                line += " (tokens estimated)"
            self.printer.note(f"[usage] {line}")
            calls = [p for p in parts if isinstance(p, ToolCallPart)]
            unanswered = [c.name for c in calls if c.name not in self.results]
            if not calls or unanswered:
                if unanswered:
                    self.printer.note(
                        f"[tool call not answered: {', '.join(unanswered)}; give a \"result\" "
                        "for it in --tools FILE to answer it]"
                    )
                break
            rounds += 1
            if rounds > self.max_rounds:
                self.printer.note(f"[stopped after {self.max_rounds} tool rounds (--max-rounds)]")
                break
            answers = [
                ToolResultPart(c.call_id, [TextPart(self.results[c.name])]) for c in calls
            ]
            for c in calls:
                self.printer.note(f"[tool result] {c.name}: {self.results[c.name]}")
            messages.append(ChatMessage.user(answers))
        self.history = messages


def run(args: argparse.Namespace) -> int:
    """Run ``lmbridge chat``."""
    if args.max_rounds < 0:
        say_error("chat", "--max-rounds takes a number of rounds, 0 or more, e.g. --max-rounds 8")
        return 2
    vscode = args.vscode or (args.model or "").startswith(_VSCODE_PREFIX)
    if vscode and args.config:
        say_error("chat", "--config configures lmbridge's own providers; --vscode talks to VS Code's models: give one of them")
        return 2
    if args.endpoint_file and not vscode:
        say_error("chat", "--endpoint-file goes with --vscode")
        return 2
    prompt: str | None = " ".join(args.prompt) if args.prompt else None
    temp: Path | None = None
    try:
        tools: tuple[list[ChatTool], dict[str, str]] = ([], {})
        if args.tools:
            tools = _read_tools(args.tools)
        if prompt is None and not sys.stdin.isatty():
            if args.config == "-" or args.tools == "-":
                say_error("chat", "standard input holds the configuration: give the PROMPT as arguments")
                return 2
            prompt = read_text("-")
            if not prompt.strip():
                say_error("chat", 'no prompt: give one as arguments (lmbridge chat "Hello") or on standard input')
                return 2
        host_args, temp = ([], None) if vscode else start_host_args(args.config)
    except InputError as exc:
        say_error("chat", exc)
        return 2
    try:
        return _main(args, vscode, host_args, prompt, tools)
    finally:
        if temp is not None:
            temp.unlink(missing_ok=True)


def _main(
    args: argparse.Namespace,
    vscode: bool,
    host_args: list[str],
    prompt: str | None,
    tools: tuple[list[ChatTool], dict[str, str]],
) -> int:
    loop = asyncio.new_event_loop()
    backend: _HostBackend | _VSCodeBackend = _VSCodeBackend() if vscode else _HostBackend()
    try:
        try:
            if isinstance(backend, _VSCodeBackend):
                loop.run_until_complete(backend.open(args.endpoint_file, args.model))
            else:
                loop.run_until_complete(backend.open(host_args, args.model))
        except _Failed as exc:
            say_error("chat", exc)
            return exc.status
        printer = _Printer(sys.stdout, sys.stderr, thinking=not args.no_thinking)
        session = _Session(backend, args, printer)
        session.tools, session.results = tools
        if prompt is not None:
            return _one_turn(loop, session, prompt)
        return _interactive(loop, session)
    except KeyboardInterrupt:
        return 130
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(backend.aclose())
            loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def _one_turn(loop: asyncio.AbstractEventLoop, session: _Session, prompt: str) -> int:
    try:
        _run_turn(loop, session, prompt)
    except _Failed as exc:
        say_error("chat", exc)
        return 1
    except _Cancelled:
        session.printer.note("[stopped]")
        return 130
    return 0


def _run_turn(loop: asyncio.AbstractEventLoop, session: _Session, prompt: str) -> None:
    """One turn; Ctrl-C sets the cancel event (the request is cancelled, not the program)."""
    cancel = asyncio.Event()
    handled = False
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # Windows
        loop.add_signal_handler(signal.SIGINT, cancel.set)
        handled = True
    try:
        task = loop.create_task(session.turn(prompt, cancel))
        try:
            loop.run_until_complete(task)
        except KeyboardInterrupt:  # where signal handlers cannot be set
            cancel.set()
            loop.run_until_complete(task)
    finally:
        if handled:
            loop.remove_signal_handler(signal.SIGINT)


_HELP = "/reset forgets the conversation, /exit (or Ctrl-D) ends, Ctrl-C stops an answer"


def _interactive(loop: asyncio.AbstractEventLoop, session: _Session) -> int:
    with contextlib.suppress(ImportError):  # line editing and history where Python has it
        import readline  # noqa: F401
    print(f"lmbridge chat with {session.backend.model}; {_HELP}", file=sys.stderr)
    # the prompt goes where the user looks: stdout may be a file collecting the answers
    prompt = "> " if sys.stdout.isatty() else ""
    while True:
        try:
            if not prompt:
                sys.stderr.write("> ")
                sys.stderr.flush()
            line = input(prompt)
        except EOFError:
            print(file=sys.stderr)
            return 0
        except KeyboardInterrupt:
            print(file=sys.stderr)
            continue
        text = line.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            return 0
        if text == "/reset":
            session.history = []
            print("[conversation forgotten]", file=sys.stderr)
            continue
        if text in ("/help", "/?"):
            print(_HELP, file=sys.stderr)
            continue
        try:
            _run_turn(loop, session, line)
        except _Failed as exc:
            say_error("chat", exc)
        except _Cancelled:
            session.printer.note("[stopped]")
