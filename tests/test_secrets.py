from __future__ import annotations

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
