"""Response bodies read with bounds, so that no answer can fill the host's memory.

httpx inflates a compressed body a network read at a time with no limit on what one read
inflates to, and it stacks encodings (``Content-Encoding: gzip, gzip``): 64 KiB of a gzip bomb
inflates to 64 MiB in one step, and of a double one to 64 GiB. Here the raw body is inflated a
step of :data:`STEP` bytes at a time (``gzip`` and ``deflate``, the encodings
:data:`ACCEPT_ENCODING` asks for; one of them at most), and :func:`read_body` stops at a byte
cap counted after decoding. Anything else is an :class:`httpx.DecodingError` naming it, as
httpx raises for a corrupt body.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator

import httpx

__all__ = [
    "ACCEPT_ENCODING",
    "STEP",
    "BodyTooLarge",
    "decoded_chunks",
    "head_of",
    "read_body",
    "read_head",
]

STEP = 64 * 1024
"""The most bytes one step of inflating produces."""

ACCEPT_ENCODING = "gzip, deflate"
"""What the host's requests accept (httpx would add ``br`` and ``zstd`` when their packages
are installed; they are not read here)."""

_GZIP = frozenset({"gzip", "x-gzip"})


class BodyTooLarge(Exception):
    """A body passed the byte cap of :func:`read_body`."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the answer passed {limit:,} bytes")
        self.limit = limit
        """The cap, in bytes."""


class _Inflater:
    """``gzip`` (several members allowed) or ``deflate`` (zlib-wrapped or raw, as browsers
    take it), inflated :data:`STEP` bytes at a time."""

    def __init__(self, encoding: str) -> None:
        self.gzip = encoding in _GZIP
        self.started = False
        self.done = False
        self.z = self._new()

    def _new(self) -> zlib._Decompress:
        return zlib.decompressobj(47 if self.gzip else 15)  # 47: a gzip header, checked

    def feed(self, data: bytes) -> Iterator[bytes]:
        while not self.done:
            try:
                out = self.z.decompress(data, STEP)
            except zlib.error as exc:
                if not self.gzip and not self.started:
                    self.started = True
                    self.z = zlib.decompressobj(-15)  # raw deflate, no zlib header
                    continue
                raise httpx.DecodingError(f"the body is not valid {self._name}: {exc}") from None
            self.started = True
            if out:
                yield out
            if self.z.eof:
                rest = self.z.unused_data
                if self.gzip and rest.strip(b"\0"):
                    self.z = self._new()  # another gzip member
                    data = rest
                    continue
                self.done = True  # anything after the end is ignored, as httpx does
                return
            data = self.z.unconsumed_tail
            if not data and len(out) < STEP:
                return  # all taken in, nothing more to give out until more comes

    def close(self) -> bytes:
        return b"" if self.done else self.z.flush()

    @property
    def _name(self) -> str:
        return "gzip" if self.gzip else "deflate"


def _inflater(response: httpx.Response) -> _Inflater | None:
    codings = [
        value.strip().lower()
        for value in response.headers.get_list("content-encoding", split_commas=True)
        if value.strip() and value.strip().lower() != "identity"
    ]
    if not codings:
        return None
    if len(codings) > 1:
        raise httpx.DecodingError(
            f"the body is encoded several times (Content-Encoding: {', '.join(codings)}); "
            f"one of {ACCEPT_ENCODING} is read"
        )
    if codings[0] not in (*_GZIP, "deflate"):
        raise httpx.DecodingError(
            f"the body's Content-Encoding {codings[0]!r} is not read; the host asks for "
            f"{ACCEPT_ENCODING}"
        )
    return _Inflater(codings[0])


async def decoded_chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body of a streamed ``response``, content-decoded, in pieces of at most
    :data:`STEP` bytes when it was compressed (as the network brings them when not)."""
    if response.is_stream_consumed:
        # a response made with its body already in it (httpx.MockTransport, say): nothing
        # comes from the network, and httpx has decoded it
        if response.content:
            yield response.content
        return
    inflater = _inflater(response)
    if inflater is None:
        async for chunk in response.aiter_raw():
            yield chunk
        return
    async for raw in response.aiter_raw():
        for piece in inflater.feed(raw):
            yield piece
    tail = inflater.close()
    if tail:
        yield tail


async def read_body(response: httpx.Response, limit: int) -> bytes:
    """The whole decoded body; :class:`BodyTooLarge` as soon as it passes ``limit`` bytes."""
    body = bytearray()
    async for chunk in decoded_chunks(response):
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge(limit)
    return bytes(body)


async def read_head(response: httpx.Response, limit: int) -> bytes:
    """The first ``limit`` bytes of the decoded body (an error's text): the rest is not read."""
    return await head_of(decoded_chunks(response), limit)


async def head_of(chunks: AsyncIterator[bytes], limit: int, first: bytes = b"") -> bytes:
    """The first ``limit`` bytes of ``first`` followed by ``chunks`` (a body whose first chunk
    was read already); no chunk is read once ``limit`` bytes are in."""
    body = bytearray(first)
    if len(body) < limit:
        async for chunk in chunks:
            body += chunk
            if len(body) >= limit:
                break
    return bytes(body[:limit])
