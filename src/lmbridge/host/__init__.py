"""The host: the process the VS Code extension starts (``lmbridge host``).

JSON-RPC 2.0 over stdio with LSP ``Content-Length`` framing; the methods are in
``docs/protocol.md``. Layers, one module each (as pygls arranges them):

- :mod:`.framing`: sans-IO frames (bytes in -> messages out; messages -> bytes);
- :mod:`.jsonrpc`: a symmetric JSON-RPC peer (requests as tasks, ``$/cancelRequest``,
  requests to the other side awaited as futures);
- :mod:`.server`: the bridge methods, the loaded providers, ``chat/parts`` batching;
- :mod:`.stdio`: the process's stdin/stdout, with stdout guarded against stray output;
- :mod:`.logs`: the log level from ``--log-level``, ``$LMBRIDGE_LOG_LEVEL`` and the setting;
- :mod:`.paths`: a ``sys.path`` without the working, storage or app folders;
- :mod:`.client`: the extension's side in Python (the demo, the tests and the benchmarks).

Why an own layer rather than pygls's ``JsonRPCServer`` (pygls 2.1, evaluated): pygls brings
``lsprotocol``, ``cattrs`` and ``attrs`` as runtime dependencies for a protocol that is not LSP,
and its (de)serialisation runs every message through cattrs converters made for LSP types; it
has no notion of batching notifications, which the 20,000 parts/s goal needs; and its stdio
transport writes to ``sys.stdout``, where we want the protocol on a duplicated descriptor with
fd 1 sent to stderr. What we need from it (framing, dispatch, cancellation as tasks, requests
in both directions) is about 500 lines here, sans-IO at the bottom so it is fuzzable, and with
no dependency beyond the standard library (``orjson`` when installed).
"""

from __future__ import annotations

from .framing import FrameDecoder, FrameError, Message, encode_message
from .jsonrpc import IncomingRequest, JsonRpcConnection, RemoteError, RpcError
from .server import HostConnection, HostServer, PartBatcher
from .stdio import serve_stdio

__all__ = [
    "FrameDecoder",
    "FrameError",
    "HostConnection",
    "HostServer",
    "IncomingRequest",
    "JsonRpcConnection",
    "Message",
    "PartBatcher",
    "RemoteError",
    "RpcError",
    "encode_message",
    "serve_stdio",
]
