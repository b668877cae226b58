"""The echo model, run in-process: the built-in default provider, no network, no key.

The provider itself lives in the package (:mod:`lmbridge.providers.echo`) so that the default
configuration works from an installed lmbridge; this file shows how to drive any provider
from Python without VS Code or the host::

    python examples/echo_provider.py "call get_weather for Paris"

In a configuration it is ``{"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider"}``
(options: ``delay``, ``thinking``, ``script``; see the module).
"""

from __future__ import annotations

import asyncio
import sys

from lmbridge.parts import ChatMessage, ChatRequestOptions, ChatTool
from lmbridge.provider import respond
from lmbridge.providers.echo import EchoProvider

__all__ = ["EchoProvider", "main"]


async def main(text: str) -> None:
    """Ask the echo model ``text`` with one tool offered, printing each part as it comes."""
    provider = EchoProvider(delay=0.0)
    model = provider.models[0]
    weather = ChatTool(
        "get_weather",
        "Current weather for a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
    result = await respond(
        provider,
        model,
        [ChatMessage.user(text)],
        ChatRequestOptions(tools=[weather]),
        on_part=print,
    )
    print(result)


if __name__ == "__main__":
    asyncio.run(main(" ".join(sys.argv[1:]) or "Hello, echo!"))
