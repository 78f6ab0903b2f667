from __future__ import annotations

import subprocess

import pytest

from loopctl.secrets import REDACTED, Redactor, build_env, is_secret_name, withheld_values

SOURCE = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/me",
    "LANG": "C.UTF-8",
    "TERM": "xterm",
    "EDITOR": "vim",
    "LOOPCTL_LOOP": "babysit",
    "LOOPCTL_API_TOKEN": "loopctl-token-value",
    "OPENAI_API_KEY": "sk-openai-value",
    "OPENAI_BASE_URL": "https://example.invalid",
    "ANTHROPIC_API_KEY": "sk-ant-value",
    "GITHUB_TOKEN": "ghp_github_value",
    "DB_PASSWORD": "hunter22",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/me/gcp.json",
    "HTTP_AUTHORIZATION": "Bearer abcdef",
    "my_lowercase_token": "lower-token-value",
    "SHORT_TOKEN": "12345",
    "GIT_DIR": "/elsewhere/.git",
    "GIT_INDEX_FILE": "/elsewhere/index",
}


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("OPENAI_API_KEY", True),
        ("GITHUB_TOKEN", True),
        ("client_secret", True),
        ("DB_PASSWORD", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True),
        ("HTTP_AUTHORIZATION", True),
        ("PATH", False),
        ("EDITOR", False),
        ("LOOPCTL_LOOP", False),
    ],
)
def test_is_secret_name(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


@pytest.mark.parametrize(
    ("allow", "extra", "present", "absent"),
    [
        pytest.param(
            (),
            None,
            {"PATH", "HOME", "LANG", "TERM", "LOOPCTL_LOOP"},
            {
                "EDITOR",
                "OPENAI_API_KEY",
                "OPENAI_BASE_URL",
                "GITHUB_TOKEN",
                "DB_PASSWORD",
                "HTTP_AUTHORIZATION",
                "my_lowercase_token",
                "LOOPCTL_API_TOKEN",
                "GIT_DIR",
                "GIT_INDEX_FILE",
            },
            id="base-only",
        ),
        pytest.param(
            ("ANTHROPIC_API_KEY", "EDITOR"),
            None,
            {"ANTHROPIC_API_KEY", "EDITOR", "PATH"},
            {"OPENAI_API_KEY", "GITHUB_TOKEN"},
            id="allow-by-name",
        ),
        pytest.param(
            ("OPENAI_*",),
            None,
            {"OPENAI_API_KEY", "OPENAI_BASE_URL"},
            {"ANTHROPIC_API_KEY"},
            id="allow-by-glob",
        ),
        pytest.param(
            ("LOOPCTL_API_TOKEN",),
            None,
            {"LOOPCTL_API_TOKEN", "LOOPCTL_LOOP"},
            set(),
            id="loopctl-secret-allowed-by-name",
        ),
        pytest.param(
            ("GIT_DIR",),
            None,
            {"GIT_DIR"},
            {"GIT_INDEX_FILE"},
            id="git-var-only-when-named",
        ),
        pytest.param(
            "GITHUB_TOKEN",
            None,
            {"GITHUB_TOKEN"},
            {"GIT_DIR"},
            id="bare-string-is-one-name",
        ),
        pytest.param(
            ("OPENAI_API",),
            None,
            set(),
            {"OPENAI_API_KEY"},
            id="exact-name-is-not-a-prefix",
        ),
    ],
)
def test_build_env_passes_only_what_is_allowed(
    allow: tuple[str, ...], extra: dict[str, str] | None, present: set[str], absent: set[str]
) -> None:
    env = build_env(allow=allow, extra=extra, source=SOURCE)
    assert present <= env.keys()
    assert not absent & env.keys()
    assert all(env[name] == SOURCE[name] for name in present)


def test_build_env_extra_is_laid_on_top() -> None:
    env = build_env(
        extra={"LOOPCTL_TASK": "pr-7", "PATH": "/venv/bin", "LOOPCTL_SESSION_TOKEN": "trusted"},
        source=SOURCE,
    )
    assert env["LOOPCTL_TASK"] == "pr-7"
    assert env["PATH"] == "/venv/bin"
    assert env["LOOPCTL_SESSION_TOKEN"] == "trusted"


def test_build_env_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPCTL_PROBE", "yes")
    monkeypatch.setenv("PROBE_API_KEY", "sk-probe-value")
    env = build_env()
    assert env["LOOPCTL_PROBE"] == "yes"
    assert "PROBE_API_KEY" not in env
    assert "sk-probe-value" in withheld_values()


@pytest.mark.parametrize(
    ("allow", "expected"),
    [
        (
            (),
            {
                "loopctl-token-value",
                "sk-openai-value",
                "sk-ant-value",
                "ghp_github_value",
                "hunter22",
                "aws-secret-value",
                "/home/me/gcp.json",
                "Bearer abcdef",
                "lower-token-value",
            },
        ),
        (
            ("OPENAI_*", "GITHUB_TOKEN", "LOOPCTL_API_TOKEN"),
            {
                "sk-ant-value",
                "hunter22",
                "aws-secret-value",
                "/home/me/gcp.json",
                "Bearer abcdef",
                "lower-token-value",
            },
        ),
    ],
)
def test_withheld_values(allow: tuple[str, ...], expected: set[str]) -> None:
    values = withheld_values(allow=allow, source=SOURCE)
    assert set(values) == expected
    assert "12345" not in values  # too short to redact safely
    assert len(values) == len(set(values))


def test_withheld_values_are_exactly_what_build_env_drops() -> None:
    allow = ("ANTHROPIC_*",)
    passed = set(build_env(allow=allow, source=SOURCE).values())
    withheld = set(withheld_values(allow=allow, source=SOURCE))
    assert not passed & withheld


@pytest.mark.parametrize(
    ("secrets", "text", "expected"),
    [
        (["sk-123456"], "key=sk-123456;", f"key={REDACTED};"),
        (["sk-123456"], "sk-123456 and sk-123456", f"{REDACTED} and {REDACTED}"),
        (["sk-123456"], "nothing here", "nothing here"),
        # one secret inside another: the longer one is masked whole
        (["abcdef", "xxabcdefyy"], "[xxabcdefyy] [abcdef]", f"[{REDACTED}] [{REDACTED}]"),
        # two secrets overlapping: no fragment of either survives
        (["abcdef", "defghi"], "<abcdefghi>", f"<{REDACTED}>"),
        (["defghi", "abcdef"], "<abcdefghi>", f"<{REDACTED}>"),
        # a value overlapping itself
        (["aaaaaa"], "aaaaaaaa!", f"{REDACTED}!"),
        # an overlap after an earlier, separate match: only the overlapping pair is one mask
        (
            ["abcdef", "uvwxyz", "wxyz12"],
            "1 abcdef 2 uvwxyz12 3",
            f"1 {REDACTED} 2 {REDACTED} 3",
        ),
        # a secret inside a longer one, after an earlier match: the longer is masked whole
        (
            ["zzzzzz", "LONGSECRETVALUE1", "SECRET"],
            "zzzzzz: LONGSECRETVALUE1!",
            f"{REDACTED}: {REDACTED}!",
        ),
        # adjacent secrets are two masks
        (["abcdef", "ghijkl"], "abcdefghijkl", f"{REDACTED}{REDACTED}"),
        ([], "sk-123456", "sk-123456"),
        ([""], "text", "text"),
        (["päss-wörd"], "pw: päss-wörd.", f"pw: {REDACTED}."),
    ],
)
def test_redact(secrets: list[str], text: str, expected: str) -> None:
    redactor = Redactor(secrets)
    assert redactor.redact(text) == expected
    assert redactor.redact_bytes(text.encode()) == expected.encode()


def test_the_mark_left_in_place_of_a_secret_is_the_documented_one() -> None:
    # docs/troubleshooting.md tells users to look for it, and cassettes match it as text.
    assert Redactor(["sk-123456"]).redact("key=sk-123456;") == "key=[REDACTED];"


def test_redactor_catches_each_line_of_a_multiline_secret() -> None:
    pem = (
        "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n"
        "-----END KEY-----"
    )
    redactor = Redactor([pem])
    assert "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" not in redactor.redact(
        "line: MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
    )
    assert redactor.redact(pem) == REDACTED


def test_redactor_from_environment_and_repr() -> None:
    redactor = Redactor.from_environment(allow=["ANTHROPIC_API_KEY"], source=SOURCE)
    text = "sk-openai-value sk-ant-value hunter22 12345"
    assert redactor.redact(text) == f"{REDACTED} sk-ant-value {REDACTED} 12345"
    assert "sk-" not in repr(redactor)


def test_empty_redactor_returns_the_same_object() -> None:
    text = "x" * 1000
    data = b"y" * 1000
    redactor = Redactor([])
    assert redactor.redact(text) is text
    assert redactor.redact_bytes(data) is data
    assert redactor.secrets == ()


# --- the edges: the 6-character minimum, encoded forms (issue 18) ------------------------------


def test_six_characters_is_the_shortest_value_withheld_and_redacted() -> None:
    source = {"SIX_TOKEN": "abc123", "FIVE_TOKEN": "abc12", "SEVEN_TOKEN": "abc1234"}
    assert sorted(withheld_values(source=source)) == ["abc123", "abc1234"]
    redactor = Redactor.from_environment(source=source)
    assert redactor.redact("abc123 abc12 abc1234") == f"{REDACTED} abc12 {REDACTED}"


def test_each_line_of_a_multiline_secret_is_redacted_from_six_characters() -> None:
    redactor = Redactor(["line-1\nshort\nlong line three"])
    assert redactor.redact("line-1") == REDACTED
    assert redactor.redact("long line three") == REDACTED
    assert redactor.redact("short") == "short"  # five characters: ordinary text


@pytest.mark.parametrize("prefix", [b"", b"x", b"xy", b'{"k": "', b"user:"])
def test_a_secret_inside_any_base64_text_is_redacted(prefix: bytes) -> None:
    import base64

    secret = "sk-live-0123456789abcdef"
    redactor = Redactor([secret])
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        encoded = encode(prefix + secret.encode() + b'" trailing').decode()
        shown = redactor.redact(f"Authorization: Basic {encoded}")
        assert REDACTED in shown, (prefix, encoded)
        # What is left cannot be decoded back to the secret.
        assert secret not in shown
        assert encoded not in shown


@pytest.mark.parametrize(
    "encoded",
    [
        "p%40ss%2Fw%C3%B6rd%3Dx%26y",  # quote(..., safe="")
        "p%40ss%2Fw%C3%B6rd%3Dx%26y".replace("%20", "+"),
    ],
)
def test_a_url_encoded_secret_is_redacted(encoded: str) -> None:
    redactor = Redactor(["p@ss/wörd=x&y"])
    assert redactor.redact(f"https://h/?token={encoded}&n=1") == f"https://h/?token={REDACTED}&n=1"


def test_a_secret_with_spaces_is_redacted_in_its_quote_plus_form() -> None:
    redactor = Redactor(["open sesame 42"])
    assert redactor.redact("q=open+sesame+42") == f"q={REDACTED}"
    assert redactor.redact("q=open%20sesame%2042") == f"q={REDACTED}"
    # A slash and a space: only quote(..., safe="") spells both as %-escapes.
    slashed = Redactor(["open sesame/42"])
    assert slashed.redact("q=open%20sesame%2F42") == f"q={REDACTED}"
    assert slashed.redact("q=open+sesame%2F42") == f"q={REDACTED}"


def test_base64_fragments_shorter_than_8_characters_are_not_redacted() -> None:
    from loopctl.secrets import encoded_forms

    # Six bytes fill 8 base64 characters only when they start the encoded stream; at the two
    # other alignments only 7 characters are the secret's own, too few to be distinctive.
    assert encoded_forms("abcdef") == {"YWJjZGVm"}
    assert encoded_forms("abcdefghijkl") == {
        "YWJjZGVmZ2hpamts",
        "FiY2RlZmdoaWprb",
        "hYmNkZWZnaGlqa2",
    }
    assert encoded_forms("a/b?c~d>e") >= {"a%2Fb%3Fc~d%3Ee", "YS9iP2N-ZD5l", "YS9iP2N+ZD5l"}


def test_a_bare_string_allow_is_one_name_not_its_letters() -> None:
    source = {"P": "letter", "PATH_EXTRA": "x", "MY_TOKEN": "token-value"}
    env = build_env(allow="MY_TOKEN", source=source)
    assert env == {"MY_TOKEN": "token-value"}
    assert withheld_values(allow="MY_TOKEN", source=source) == []
    assert withheld_values(allow="M", source=source) == ["token-value"]


def test_an_allowed_prefix_passes_secrets_and_git_variables_only_when_named() -> None:
    source = {"GIT_AUTHOR_NAME": "me", "GIT_DIR": "/x", "APP_TOKEN": "app-token-1", "APP_X": "1"}
    assert build_env(allow=("GIT_AUTHOR_*", "APP_*"), source=source) == {
        "GIT_AUTHOR_NAME": "me",
        "APP_TOKEN": "app-token-1",
        "APP_X": "1",
    }
    assert withheld_values(allow=("APP_*",), source=source) == []
    assert withheld_values(allow=("APP_X",), source=source) == ["app-token-1"]


def test_the_same_secret_in_two_variables_is_listed_once() -> None:
    source = {"A_TOKEN": "shared-value", "B_TOKEN": "shared-value", "C_KEY": "other-value"}
    assert withheld_values(source=source) == ["shared-value", "other-value"]


def test_overlapping_and_repeated_secrets_leave_no_fragment_in_bytes_either() -> None:
    redactor = Redactor(["abcdef", "cdefgh", "zzzzzz"])
    text = "1abcdefgh2 abcdef zzzzzzz 3"
    expected = f"1{REDACTED}2 {REDACTED} {REDACTED} 3"
    assert redactor.redact(text) == expected
    assert redactor.redact_bytes(text.encode()) == expected.encode()
    assert redactor.secrets[0] == max(redactor.secrets, key=len)  # longest first


def test_an_empty_value_among_secrets_is_skipped_not_the_end_of_the_list() -> None:
    redactor = Redactor(["", "abcdef", "", "ghijkl"])
    assert redactor.redact("abcdef ghijkl") == f"{REDACTED} {REDACTED}"


def test_an_allowed_prefix_is_exactly_what_precedes_its_star() -> None:
    source = {"APP_TOKEN": "app-token-1", "APPLE_TOKEN": "apple-token", "AP_KEY": "ap-key-12"}
    assert build_env(allow=("APP_*",), source=source) == {"APP_TOKEN": "app-token-1"}
    assert sorted(withheld_values(allow=("APP_*",), source=source)) == ["ap-key-12", "apple-token"]


def test_an_encoded_form_of_exactly_six_characters_is_redacted() -> None:
    redactor = Redactor(["ab cde"])  # six characters; its quote_plus form is six as well
    assert redactor.redact("q=ab+cde&r=1") == f"q={REDACTED}&r=1"


def test_a_child_started_with_the_scrubbed_environment_keeps_the_accounts_basics() -> None:
    """What an agent CLI needs from the account reaches the real process, each name with its
    value: where it may write temporary files, who and where it is, its shell, its language
    and time zone; a credential or an unlisted variable does not."""
    basics = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/me",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "LC_CTYPE": "C.UTF-8",
        "TERM": "xterm-256color",
        "TMPDIR": "/home/me/tmp",
        "USER": "me",
        "SHELL": "/bin/bash",
        "TZ": "Europe/Paris",
    }
    source = {**basics, "EDITOR": "vim", "SERVICE_TOKEN": "service-token-value"}

    shown = subprocess.run(
        ["/usr/bin/env", "-0"], env=build_env(source=source), capture_output=True, check=True
    ).stdout.decode()

    seen = dict(entry.split("=", 1) for entry in shown.split("\0") if entry)
    assert seen == basics
