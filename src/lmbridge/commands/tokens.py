"""``lmbridge tokens FILE... [--family F] [--model ID] [--json] [--exact]``: count tokens.

A file is plain text, or a VS Code conversation in wire JSON
(``{"messages": [...], "options"?: {...}}``, see :mod:`lmbridge.parts`), counted as a whole
request (messages, tool definitions and overheads). One result per file; with ``--json``,
one JSON object per line: ``{"file", "tokens", "family", "kind", "exact"}``. ``--exact``
counts with the family's real tokenizer where one is available offline (OpenAI): the same
:class:`~lmbridge.tokens.estimator.TokenEstimator` path, its text counter swapped for the
tokenizer (:class:`~lmbridge.tokens.exact.ExactTextCounter`), so a conversation is counted
from exact text counts plus the same overheads, and the output has the same shape.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import WireError
from ..parts import messages_from_wire, options_from_wire
from ..tokens.estimator import FAMILIES, TokenEstimator, family_for
from ..tokens.exact import ExactTextCounter, ExactTokenizerUnavailable
from ._common import InputError, read_text, say_error

__all__ = ["add_parser", "run"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the ``tokens`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "tokens",
        help="estimate the tokens of text files or VS Code conversations",
        description=(
            "Estimate the tokens of each FILE: plain text, or a VS Code conversation in wire "
            'JSON ({"messages": [...], "options"?: {...}}) counted as a whole request '
            "(messages, tool definitions, overheads). One result per file; with --json one "
            'JSON object per line: {"file", "tokens", "family", "kind", "exact"}. --exact counts '
            "with the real tokenizer where one is available offline (OpenAI): text exactly, a "
            "conversation from exact text counts plus the same overheads."
        ),
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="a text file or wire JSON; - for standard input"
    )
    parser.add_argument(
        "--family",
        help=f"token family ({', '.join(FAMILIES)}) or a model family such as claude-sonnet-4",
    )
    parser.add_argument("--model", help="model id (picks e.g. cl100k for gpt-4)")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument(
        "--exact", action="store_true", help="count with the real tokenizer (OpenAI only)"
    )
    parser.set_defaults(run=run)
    return parser


class _TooDeep(Exception):
    """A JSON file nested deeper than the parser's recursion limit."""


def _conversation(text: str) -> dict[str, Any] | None:
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    except RecursionError:
        # the stdlib parser recurses once per nesting level: a hostile or broken file must
        # give a clear error, not a traceback
        raise _TooDeep from None
    return doc if isinstance(doc, dict) and "messages" in doc else None


def run(args: argparse.Namespace) -> int:
    """Print one count per file; 1 if a file could not be counted, 2 for a usage error (an
    unknown --family, --exact for a family without an offline tokenizer)."""
    family = family_for(args.model or "", args.family)
    if args.family and family == "unknown" and args.family.lower() != "unknown":
        # like an unknown --format: an error, not a quiet fallback to the rough estimate
        say_error(
            "tokens",
            f"unknown --family {args.family!r}: use one of {', '.join(FAMILIES)} or a model "
            "family such as gpt-4o or claude-sonnet-4",
        )
        return 2
    if args.files.count("-") > 1:
        say_error("tokens", "- (standard input) can be read once: name it once")
        return 2
    estimator = TokenEstimator(family, model_id=args.model)
    if args.exact:
        try:
            # the weight set names the tokenizer: o200k / cl100k for OpenAI models
            exact = ExactTextCounter(estimator.weight_set)
        except ExactTokenizerUnavailable:
            named = "no --family or --model" if family == "unknown" else f"--family {family}"
            say_error(
                "tokens",
                f"--exact needs a family whose tokenizer is available offline, OpenAI's ({named} "
                "given): add --family openai (or --model gpt-4o), or leave --exact out for an "
                "estimate",
            )
            return 2
        estimator = TokenEstimator(family, model_id=args.model, text_counter=exact)
    status = 0
    for path in args.files:
        try:
            # utf-8-sig: a byte order mark (editors on Windows write one) is not content,
            # and would hide a conversation's opening brace
            text = read_text(path, encoding="utf-8-sig")
        except InputError as exc:
            say_error("tokens", exc)
            status = 1
            continue
        kind = "text"
        try:
            doc = _conversation(text)
            if doc is not None:
                kind = "conversation"
                messages = messages_from_wire(doc["messages"])
                options = options_from_wire(doc.get("options"))
                tokens = estimator.count_request(messages, options)
            else:
                tokens = estimator.count_text(text)
        except WireError as exc:
            print(f"lmbridge tokens: {path}: not a valid conversation: {exc}", file=sys.stderr)
            status = 1
            continue
        except (_TooDeep, RecursionError):
            print(
                f"lmbridge tokens: {path}: JSON nested too deeply to read "
                f"(more than about {sys.getrecursionlimit()} levels)",
                file=sys.stderr,
            )
            status = 1
            continue
        if args.json:
            record = {
                "file": path,
                "tokens": tokens,
                "family": family,
                "kind": kind,
                "exact": args.exact,
            }
            print(json.dumps(record, ensure_ascii=False))
        else:
            print(f"{tokens}\t{path}")
    return status
