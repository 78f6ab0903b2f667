"""A stand-in for the `gh` CLI: records its argv and answers `gh pr list/create/edit/merge`.

State lives in $GH_FAKE_STATE (JSON), every call is appended to $GH_FAKE_LOG (one JSON argv per
line); $GH_FAKE_FAIL="pr create" makes that subcommand fail like gh does (exit 1, stderr).
Task sources read fixtures from the same state: "issues" answers `gh issue list`, "pulls"
answers `gh pr list` without --head, "api" maps an API path (query string dropped) to its JSON;
$GH_FAKE_AUTH="none" makes `gh auth status` fail as a logged-out gh does.
"""

import json
import os
import sys
from pathlib import Path


def options(args: list[str]) -> tuple[list[str], dict[str, str]]:
    positional, named = [], {}
    for arg in args:
        if arg.startswith("--"):
            key, _, value = arg[2:].partition("=")
            named[key] = value
        else:
            positional.append(arg)
    return positional, named


def main() -> int:
    args = sys.argv[1:]
    with open(os.environ["GH_FAKE_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(args) + "\n")
    if os.environ.get("GH_FAKE_FAIL") and " ".join(args).startswith(os.environ["GH_FAKE_FAIL"]):
        print("GraphQL: something went wrong (createPullRequest)", file=sys.stderr)
        return 1
    state_file = Path(os.environ["GH_FAKE_STATE"])
    state = json.loads(state_file.read_text()) if state_file.exists() else {"prs": []}
    prs = state["prs"]
    positional, named = options(args[2:])
    command = " ".join(args[:2])
    if command == "auth status":
        if os.environ.get("GH_FAKE_AUTH") == "none":
            print("You are not logged into any GitHub hosts. To log in, run: gh auth login")
            return 1
        print("github.com\n  ✓ Logged in to github.com account octo (keyring)")
        return 0
    if command == "issue list":
        print(json.dumps(state.get("issues", [])))
        return 0
    if command == "pr list" and "head" not in named:
        print(json.dumps(state.get("pulls", [])))
        return 0
    if args[:1] == ["api"]:
        path = args[1].partition("?")[0]
        print(json.dumps(state.get("api", {}).get(path, [])))
        return 0
    if command == "pr list":
        wanted = named.get("state", "open").upper()
        found = [
            {k: pr[k] for k in ("number", "url", "headRefOid", "state")}
            for pr in prs
            if pr["head"] == named.get("head") and wanted in (pr["state"], "ALL")
        ]
        print(json.dumps(found))
    elif command == "pr create":
        number = len(prs) + 1
        url = f"https://github.com/octo/repo/pull/{number}"
        prs.append(
            {
                "number": number,
                "url": url,
                "head": named["head"],
                "base": named.get("base"),
                "title": named.get("title"),
                "body": sys.stdin.read(),
                "headRefOid": None,
                "state": "OPEN",
            }
        )
        print(url)
    elif command == "pr edit":
        pr = prs[int(positional[0]) - 1]
        pr["title"] = named.get("title", pr["title"])
        pr["body"] = sys.stdin.read()
        print(pr["url"])
    elif command == "pr merge":
        pr = prs[int(positional[0]) - 1]
        pr["state"] = "MERGED"
        pr["merged_at_head"] = named.get("match-head-commit")
    else:
        print(f"unknown command {command!r}", file=sys.stderr)
        return 1
    state_file.write_text(json.dumps(state))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
