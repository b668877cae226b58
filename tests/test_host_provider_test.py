"""``providers/test``: the Manage Models flow's "Test" asks the real host (a subprocess, as the
extension starts it) for one provider's models, read afresh from its upstream on 127.0.0.1, or
the upstream's error."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from lmbridge.config import origin_of
from lmbridge.host.client import HostClient
from lmbridge.host.jsonrpc import RemoteError
from support.replay_server import ReplayServer, Reply

KEY = "sk-manage-" + secrets.token_hex(12)
CATALOG = {"data": [{"id": "alpha", "object": "model"}, {"id": "beta", "object": "model"}]}


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with ReplayServer() as up:
        up.route("GET", "/ok/v1/models", Reply.json(CATALOG))
        up.route(
            "GET",
            "/denied/v1/models",
            Reply.error(401, {"error": {"message": "Incorrect API key provided"}}),
        )
        yield up


@pytest.fixture
async def host(tmp_path: Path) -> AsyncIterator[HostClient]:
    with (tmp_path / "stderr.txt").open("wb") as err:
        async with HostClient.start(["--log-level", "debug"], stderr=err) as client:
            yield client


def entry(name: str, url: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "format": "chat-completions", "baseUrl": url, **more}


async def test_lists_the_models_of_one_provider_with_its_stored_key(
    host: HostClient, upstream: ReplayServer, tmp_path: Path
) -> None:
    base = upstream.url + "/ok/v1"
    await host.initialize(
        providers=[
            entry("mine", base),
            {"name": "echo", "provider": "lmbridge.providers.echo:EchoProvider"},
        ],
        secrets={"mine": {"key": KEY, "origin": origin_of(base)}},
    )
    result = await host.request("providers/test", {"name": "mine"})
    assert result["ok"] is True and result["name"] == "mine"
    assert [m["id"] for m in result["models"]] == ["mine/alpha", "mine/beta"]
    assert {m["detail"] for m in result["models"]} == {"mine"}
    (request,) = upstream.requests_to("/ok/v1/models")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    # a second test asks the upstream again (a cached list would hide a key changed since)
    await host.request("models/list", {"silent": True})
    again = await host.request("providers/test", {"name": "mine"})
    assert again["ok"] is True
    assert len(upstream.requests_to("/ok/v1/models")) >= 2
    assert KEY not in (tmp_path / "stderr.txt").read_text(errors="replace")


async def test_the_upstreams_error_comes_back_as_the_result(
    host: HostClient, upstream: ReplayServer
) -> None:
    base = upstream.url + "/denied/v1"
    await host.initialize(
        providers=[entry("bad", base)], secrets={"bad": {"key": KEY, "origin": origin_of(base)}}
    )
    result = await host.request("providers/test", {"name": "bad"})
    assert result["ok"] is False and result["models"] == []
    assert result["code"] == "NoPermissions"
    assert "401" in result["error"] or "Incorrect API key" in result["error"]
    assert KEY not in result["error"]
    # the host is still up and answers the next request
    assert (await host.request("providers/test", {"name": "bad"}))["ok"] is False


async def test_a_key_bound_to_another_origin_is_not_a_success(
    host: HostClient, upstream: ReplayServer
) -> None:
    base = upstream.url + "/ok/v1"
    await host.initialize(
        providers=[entry("moved", base)],
        secrets={"moved": {"key": KEY, "origin": "https://api.openai.com:443"}},
    )
    result = await host.request("providers/test", {"name": "moved"})
    # the catalog needs no key here, but chats would be refused: say so, with the models
    assert result["ok"] is False and result["code"] == "NoPermissions"
    assert "Confirm API Key Origin" in result["error"]
    assert [m["id"] for m in result["models"]] == ["moved/alpha", "moved/beta"]
    (request,) = upstream.requests_to("/ok/v1/models")
    assert "authorization" not in request.headers


async def test_unknown_and_broken_providers_and_bad_params(host: HostClient) -> None:
    await host.initialize(providers=[{"name": "broken", "provider": "no_such_module_for_lmbridge:X"},
                                     {"name": "odd", "format": "grpc", "baseUrl": "http://127.0.0.1:9"}])  # fmt: skip
    unknown = await host.request("providers/test", {"name": "nope"})
    assert unknown["ok"] is False and "no provider named 'nope'" in unknown["error"]
    assert "broken" in unknown["error"]
    broken = await host.request("providers/test", {"name": "broken"})
    assert broken["ok"] is False and "no_such_module_for_lmbridge" in broken["error"]
    odd = await host.request("providers/test", {"name": "odd"})
    assert odd["ok"] is False and "grpc" in odd["error"]
    with pytest.raises(RemoteError, match="name: expected a provider name"):
        await host.request("providers/test", {"name": 3})


async def test_an_unreachable_upstream_is_named(host: HostClient) -> None:
    with ReplayServer() as gone:
        base = gone.url + "/v1"
    await host.initialize(providers=[entry("down", base)])
    result = await host.request("providers/test", {"name": "down"})
    assert result["ok"] is False and result["models"] == []
    assert result["error"]
