"""Package attributes loaded on first use (PEP 562 ``__getattr__`` and ``__dir__``).

A package whose ``__init__`` re-exports what its modules define would import them all with
it. The host imports a few names of a package (the JSON-RPC layer, one transport class) and
must not pay for the rest before a request needs it: the loopback endpoint, the HTTP
gateway and its converters, the token estimator's weights. Such a package names, for each
public attribute, the module that defines it; the module is imported the first time the
attribute is read, and the value then kept in the package's namespace. Type checkers see the
same names through imports under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, namespace: dict[str, Any], sources: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose ``namespace`` is its
    ``globals()``; ``sources`` maps a module (relative to the package, e.g. ``".api"``) to the
    names it provides."""
    where = {name: module for module, names in sources.items() for name in names}
    # A name its own module is named after (lmbridge.convert.from_gemini is both): importing
    # that module sets the package's attribute to the module, after which this __getattr__ is
    # never asked and `from lmbridge.convert import from_gemini` would give the module. The
    # package keeps the module's attribute of that name instead (what an eager import did).
    shadowed = {
        name
        for name, module in where.items()
        if module.startswith(".") and module.lstrip(".") == name
    }
    if shadowed:
        _keep_attributes_over_modules(sys.modules[package], shadowed)

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        # the names not loaded yet too, so that dir() and help() show them before first use
        return sorted(set(namespace) | set(where))

    return __getattr__, __dir__


def _keep_attributes_over_modules(package: types.ModuleType, names: set[str]) -> None:
    """Make ``package`` keep, for each of ``names``, the attribute of that name of the
    submodule of that name when the import system sets the submodule itself."""

    class _Package(types.ModuleType):
        def __setattr__(self, name: str, value: Any) -> None:
            if (
                name in names
                and isinstance(value, types.ModuleType)
                and value.__name__ == f"{self.__name__}.{name}"
                and hasattr(value, name)
            ):
                value = getattr(value, name)
            super().__setattr__(name, value)

    package.__class__ = _Package
