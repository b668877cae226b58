"""Where provider entries come from; each source only produces entries (:mod:`lmbridge.entries`).

- :mod:`lmbridge.sources.settings`: the ``lmbridge.providers`` setting (the user's, and what a
  workspace may add) and ``lmbridge host --config`` files.

:mod:`lmbridge.config` loads the entries of every source into providers.
"""
