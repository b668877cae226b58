"""The curated public namespace: what ``import lmbridge`` offers, and that it all resolves."""

from __future__ import annotations

import importlib
import subprocess
import sys

import lmbridge

EXPECTED = {
    # the part model
    "ChatMessage", "ChatRequestOptions", "ChatRole", "ChatTool", "DataPart", "FinishReason",
    "ModelCapabilities", "ModelInfo", "TextPart", "ThinkingPart", "ToolCallPart", "ToolMode",
    "ToolResultPart", "Usage",
    # errors
    "ConfigError", "ConversionError", "LMBridgeError", "LanguageModelError", "ToolArgumentsError",
    "UpstreamError", "UpstreamHTTPError", "UpstreamProtocolError", "UpstreamReportedError",
    "WireError", "ChatRequestError", "ErrorKind", "PromptTooLongError", "SelectorError",
    "EndpointNotFoundError",
    # provider side
    "CancellationToken", "CancellationTokenSource", "LanguageModelChatProvider", "Progress",
    "chat_model", "model_info", "provider_factory",
    # consumer side
    "LanguageModelClient", "SyncLanguageModelClient", "select_chat_models", "RetryPolicy",
    "ChatModel", "ChatResponse", "SyncChatResponse", "Completion",
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


def test_dir_and_help_list_the_lazily_loaded_names() -> None:
    # in a fresh interpreter, so that no earlier test has loaded them already
    import subprocess
    import sys

    script = (
        "import lmbridge, pydoc, sys\n"
        "names = dir(lmbridge)\n"
        "assert 'lmbridge.client' not in sys.modules, 'import lmbridge loaded the client'\n"
        "print(sorted(set(lmbridge.__all__) - set(names)))\n"
        "print(pydoc.render_doc(lmbridge, renderer=pydoc.plaintext))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    missing, _, doc = out.partition("\n")
    assert missing == "[]"
    for name in ["SyncLanguageModelClient", "LanguageModelClient", "RetryPolicy",
                 "ChatRequestError", "Completion", "chat_model", "provider_factory"]:
        assert f" {name}" in doc or f".{name}" in doc, name


def test_a_function_named_like_its_module_stays_the_function_once_the_module_is_imported() -> None:
    # lmbridge.convert.from_gemini is a module and the package's function of that name;
    # importing the module (a test, an application) used to make the package attribute the
    # module, and `from lmbridge.convert import from_gemini` then gave a module to call
    code = (
        "import lmbridge.convert.from_gemini, lmbridge.convert.from_anthropic\n"
        "import lmbridge.convert.from_chat_completions\n"
        "from lmbridge.convert import from_anthropic, from_chat_completions, from_gemini\n"
        "import lmbridge.convert as c\n"
        "print([callable(f) and not isinstance(f, type(c)) for f in\n"
        "       (from_anthropic, from_chat_completions, from_gemini, c.from_gemini)])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[True, True, True, True]", out


def test_the_error_tree_is_rooted_at_lmbridge_error() -> None:
    for name in ["ChatRequestError", "PromptTooLongError", "SelectorError",
                 "EndpointNotFoundError", "ConfigError", "UpstreamHTTPError"]:
        assert issubclass(getattr(lmbridge, name), lmbridge.LMBridgeError), name
    assert issubclass(lmbridge.ChatRequestError, lmbridge.LanguageModelError)
