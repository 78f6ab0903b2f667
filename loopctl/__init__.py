"""loopctl: a local-first runtime for coding-agent loops.

The CLI is one client of this package; the names below are the public Python API.
"""

from loopctl._version import __version__

__all__ = ["__version__", "load_project"]


def __getattr__(name: str) -> object:
    # Resolved lazily so `import loopctl` stays as cheap as `loopctl --version`.
    if name == "load_project":
        from loopctl.definitions import load_project

        return load_project
    raise AttributeError(name)
