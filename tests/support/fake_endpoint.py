"""A loopback endpoint in front of a fake VS Code (:class:`lmbridge.client.testing.FakeBridge`),
for the command-line tests: ``python fake_endpoint.py ENDPOINT_FILE``.

Writes the endpoint file as the host VS Code starts does, prints ``ready URL`` and serves until
its standard input closes. The fake VS Code offers ``copilot/gpt-4o``, which echoes the last
message's text.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from lmbridge.client.endpoint import EndpointServer
from lmbridge.client.testing import FakeBridge, fake_model


async def main(path: Path) -> None:
    bridge = FakeBridge([fake_model("gpt-4o", vendor="copilot")])
    server = EndpointServer(bridge, endpoint_file=path)
    info = await server.start()
    print(f"ready {info.url}", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    await server.aclose()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
