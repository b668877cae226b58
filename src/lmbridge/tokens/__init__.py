"""Token counting that learns: estimation, calibration and a persistent per-message cache.

- :class:`TokenEstimator` counts texts, messages and whole requests for one model.
- :class:`TokenStore` keeps message counts and calibration in SQLite (hashes and numbers only).
- :func:`family_for` maps a model id / VS Code family string to a token family.
- :func:`exact_counter` gives exact o200k_base / cl100k_base counts offline (optional extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from .calibration import Calibration
    from .estimator import (
        FAMILIES,
        FamilyCosts,
        RequestEstimate,
        TextCounter,
        TokenEstimator,
        family_costs,
        family_for,
        message_key,
        weight_set_for,
    )
    from .exact import (
        ExactTextCounter,
        ExactTokenizerUnavailable,
        exact_counter,
        exact_encoding_name,
    )
    from .images import image_size, image_tokens, image_tokens_for_size
    from .store import TokenStore, TokenStoreWarning, shared_store
    from .text import TextEstimator

# Loaded on first use (see lmbridge._lazy): importing the package costs nothing more.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    globals(),
    {
        ".calibration": ("Calibration",),
        ".estimator": (
            "FAMILIES", "FamilyCosts", "RequestEstimate", "TextCounter", "TokenEstimator",
            "family_costs", "family_for", "message_key", "weight_set_for",
        ),
        ".exact": (
            "ExactTextCounter", "ExactTokenizerUnavailable", "exact_counter", "exact_encoding_name",
        ),
        ".images": ("image_size", "image_tokens", "image_tokens_for_size"),
        ".store": ("TokenStore", "TokenStoreWarning", "shared_store"),
        ".text": ("TextEstimator",),
    },
)

__all__ = [
    "FAMILIES",
    "Calibration",
    "ExactTextCounter",
    "ExactTokenizerUnavailable",
    "FamilyCosts",
    "RequestEstimate",
    "TextCounter",
    "TextEstimator",
    "TokenEstimator",
    "TokenStore",
    "TokenStoreWarning",
    "exact_counter",
    "exact_encoding_name",
    "family_costs",
    "family_for",
    "image_size",
    "image_tokens",
    "image_tokens_for_size",
    "message_key",
    "shared_store",
    "weight_set_for",
]
