"""The curated public namespace: what ``import lmbridge`` offers, and that it all resolves."""

from __future__ import annotations

import importlib

import lmbridge

EXPECTED = {
    # the part model
    "ChatMessage", "ChatRequestOptions", "ChatRole", "ChatTool", "DataPart", "FinishReason",
    "ModelCapabilities", "ModelInfo", "TextPart", "ThinkingPart", "ToolCallPart", "ToolMode",
    "ToolResultPart", "Usage",
    # errors
    "ConfigError", "ConversionError", "LMBridgeError", "LanguageModelError", "ToolArgumentsError",
    "UpstreamError", "UpstreamHTTPError", "UpstreamProtocolError", "UpstreamReportedError",
    "WireError",
    # provider side
    "CancellationToken", "CancellationTokenSource", "LanguageModelChatProvider", "Progress",
    "chat_model", "model_info", "provider_factory",
    # consumer side
    "LanguageModelClient", "select_chat_models",
    "__version__",
}


def test_exported_names_are_exactly_the_curated_set() -> None:
    assert set(lmbridge.__all__) == EXPECTED
    for name in lmbridge.__all__:
        assert getattr(lmbridge, name) is not None


def test_every_module_declares_what_it_exports() -> None:
    for module in [
        "parts", "errors", "sse", "contract", "mime", "replay", "provider", "config",
        "upstream", "convert", "tokens", "gateway", "host", "client",
    ]:
        mod = importlib.import_module(f"lmbridge.{module}")
        names = getattr(mod, "__all__", None)
        assert names, f"lmbridge.{module} has no __all__"
        missing = [n for n in names if not hasattr(mod, n)]
        assert not missing, f"lmbridge.{module}.__all__ names missing attributes: {missing}"
