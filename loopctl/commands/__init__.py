"""One use case per CLI command, returning a result the CLI renders (as in pre-commit, pipx)."""
