"""Check that the token text estimator gives bit-identical estimates to another git revision's.

For work that only makes the counting faster: the estimates of ``src/lmbridge/tokens/text.py``
as checked out are compared with those of the same file at ``--rev`` (default ``main``), both
with the weights of the checkout, on every chunk of ``benchmarks/token_corpus.py`` (the
fitting corpus and its held-out fifth) and on prefixes of each chunk cut around the lengths
where the code changes path (the blob and content-type heads, the pieces of the level sum),
for every weight set, counting every byte and sampled. ``regime_of`` and ``features`` are
compared too. Prints the number of texts compared and the first differences; exits 1 on any.

    .venv/bin/python tools/check_token_identity.py [--rev main] [--max-train 2500]
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import token_corpus  # noqa: E402

from lmbridge.tokens import text as new  # noqa: E402
from lmbridge.tokens.weights import WEIGHTS  # noqa: E402

# prefix lengths (characters): around the blob / head limits, the content-type head, the
# level sum's pieces, odd and even
CUTS = (1, 2, 3, 7, 8, 9, 63, 64, 65, 255, 256, 257, 399, 400, 401, 999, 1000, 1001, 1039,
        1040, 1500, 2077, 2078, 2079)  # fmt: skip


def load_rev(rev: str) -> ModuleType:
    """``lmbridge.tokens.text`` as it is at ``rev`` (its relative imports resolved in the
    checkout's package, so both use the checkout's weights)."""
    source = subprocess.run(
        ["git", "show", f"{rev}:src/lmbridge/tokens/text.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    spec = importlib.util.spec_from_loader("lmbridge.tokens._text_rev", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "lmbridge.tokens"
    sys.modules[spec.name] = module
    # the revision's own source, from this repository's history: the comparison needs it loaded
    exec(compile(source, f"{rev}:text.py", "exec"), module.__dict__)  # noqa: S102
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="main")
    parser.add_argument("--max-train", type=int, default=2500)
    parser.add_argument("--max-test", type=int, default=300)
    args = parser.parse_args()
    old = load_rev(args.rev)
    chunks = token_corpus.build_corpus(max_train=args.max_train, max_test=args.max_test)
    texts: list[str] = []
    for c in chunks:
        texts.append(c.text)
        texts.extend(c.text[:k] for k in CUTS if k < len(c.text))
    texts.extend(["", " ", "\n", "a", "é", "\U0001f600", "\ud800", "```", "#!/bin/sh\necho hi\n"])
    print(f"{len(chunks)} chunks, {len(texts)} texts (chunks and prefixes)", flush=True)
    bad: list[str] = []
    for name in WEIGHTS:
        for sample in (None, 512):
            a = old.TextEstimator(name, sample_bytes=sample)
            b = new.TextEstimator(name, sample_bytes=sample)
            for t in texts:
                x, y = a.estimate(t), b.estimate(t)
                if x.hex() != y.hex():
                    bad.append(f"{name}/{sample}: {x!r} != {y!r} for {t[:60]!r} ({len(t)} chars)")
    for t in texts:
        if old.regime_of(t) != new.regime_of(t):
            bad.append(f"regime_of: {old.regime_of(t)} != {new.regime_of(t)} for {t[:60]!r}")
    for t in texts[::7]:
        if old.features(t) != new.features(t) or old.features(t, 512) != new.features(t, 512):
            bad.append(f"features differ for {t[:60]!r}")
    comparisons = len(texts) * len(WEIGHTS) * 2
    print(f"{comparisons} estimates compared ({len(WEIGHTS)} weight sets, full and sampled)")
    for line in bad[:20]:
        print("DIFF", line)
    print("identical" if not bad else f"{len(bad)} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
