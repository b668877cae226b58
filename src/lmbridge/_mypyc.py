"""What the compiled build (the byte pipeline's modules compiled with mypyc) reads from the
source, without a dependency at run time.

:func:`mypyc_attr` is ``mypy_extensions.mypyc_attr`` for the type checker and for mypyc, and a
decorator that does nothing when the modules run as Python source. The public classes that
users may subclass in their own (interpreted) code carry
``@mypyc_attr(allow_interpreted_subclasses=True)``: without it a compiled class refuses such a
subclass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["mypyc_attr"]

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr as mypyc_attr
else:

    def mypyc_attr(*attrs, **kwattrs):
        """mypy_extensions.mypyc_attr, which only the compiler reads."""
        return lambda cls: cls
