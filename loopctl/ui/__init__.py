"""`loopctl ui`: a local dashboard in the browser (loops, inbox, runs), served on loopback.

Imported only by `loopctl ui` (the `[ui]` extra: starlette and uvicorn); it may use `commands/`
and everything below it, never `cli/`. Every inbox button calls the function the CLI calls.
"""
