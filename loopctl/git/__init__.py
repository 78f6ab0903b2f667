"""The only package that runs git (invariants 7 and 8): hardened `git` calls and the few
queries loopctl needs. Callers use `from loopctl import git` and `git.<name>`; each module has one
job:

- `runner`: how one git process runs (the hardening, the pinned environment);
- `neutralise`: the repository's own config read, and the programs it names blanked;
- `command`: `git`, one hardened command with the guards its subcommand needs;
- `refs`: refs and commits (what a name points at, ancestry, moving a branch);
- `worktrees`: linked worktrees, recycled ones, and fast-forwarding a checked-out branch;
- `diff`: status, changed files, diffs and patches;
- `snapshot`: what a task commits (its files as a tree, committed under a lease: invariant 12);
- `objects`: blobs, trees and commits without a working tree (data branches);
- `patches`: proposals' patches between trees and onto a tree, a worktree's paths put back;
- `remotes`: network commands to a URL read before any agent ran.
"""

from __future__ import annotations

from loopctl.git.command import git
from loopctl.git.diff import (
    changed_paths,
    diff_stat,
    diff_stat_between,
    diff_text,
    ignored_files,
    is_dirty,
    is_ignored,
    patch_between,
    status_outside,
    tracked_content_changes,
    tree_changes,
)
from loopctl.git.objects import (
    commit_tree,
    paths_in_commit,
    read_blob,
    tracked_under,
    tree_of,
    tree_of_commit,
    write_blob,
    write_tree,
)
from loopctl.git.patches import apply_to_tree, restore_paths, tree_files, tree_patch
from loopctl.git.refs import (
    branch_exists,
    branch_head,
    commits_between,
    common_dir,
    current_branch,
    delete_branch,
    git_dir,
    has_commits,
    head_sha,
    hold_object,
    is_ancestor,
    is_git_repo,
    merge_base,
    point_branch,
    ref_values,
    release_object,
    rename_branch,
    require_work_tree,
    resolve_commit,
    switch_branch,
    toplevel,
    valid_branch_name,
)
from loopctl.git.remotes import (
    display_url,
    fetch_branch,
    fetch_refs,
    push_commit,
    remote_branch_sha,
    remote_url,
    remote_urls,
)
from loopctl.git.runner import (
    GitResult,
)
from loopctl.git.snapshot import (
    commit_all,
    commit_snapshot,
    reset_index,
    seed_snapshot_index,
    snapshot_tree,
)
from loopctl.git.worktrees import (
    WorktreeEntry,
    clean_worktree,
    fast_forward,
    new_worktree_git_dir,
    recycle_checkout,
    worktree_add,
    worktree_add_detached,
    worktree_list,
    worktree_prune,
    worktree_remove,
    worktree_unlock,
)

__all__ = [
    "GitResult",
    "WorktreeEntry",
    "apply_to_tree",
    "branch_exists",
    "branch_head",
    "changed_paths",
    "clean_worktree",
    "commit_all",
    "commit_snapshot",
    "commit_tree",
    "commits_between",
    "common_dir",
    "current_branch",
    "delete_branch",
    "diff_stat",
    "diff_stat_between",
    "diff_text",
    "display_url",
    "fast_forward",
    "fetch_branch",
    "fetch_refs",
    "git",
    "git_dir",
    "has_commits",
    "head_sha",
    "hold_object",
    "ignored_files",
    "is_ancestor",
    "is_dirty",
    "is_git_repo",
    "is_ignored",
    "merge_base",
    "new_worktree_git_dir",
    "patch_between",
    "paths_in_commit",
    "point_branch",
    "push_commit",
    "read_blob",
    "recycle_checkout",
    "ref_values",
    "release_object",
    "remote_branch_sha",
    "remote_url",
    "remote_urls",
    "rename_branch",
    "require_work_tree",
    "reset_index",
    "resolve_commit",
    "restore_paths",
    "seed_snapshot_index",
    "snapshot_tree",
    "status_outside",
    "switch_branch",
    "toplevel",
    "tracked_content_changes",
    "tracked_under",
    "tree_changes",
    "tree_files",
    "tree_of",
    "tree_of_commit",
    "tree_patch",
    "valid_branch_name",
    "worktree_add",
    "worktree_add_detached",
    "worktree_list",
    "worktree_prune",
    "worktree_remove",
    "worktree_unlock",
    "write_blob",
    "write_tree",
]
