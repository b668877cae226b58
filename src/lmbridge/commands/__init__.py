"""Subcommands of the ``lmbridge`` command line, one module each.

Each module defines ``add_parser(subparsers)``, which registers the subcommand and sets
``run=<function(args) -> int>`` as the parser default.
"""
