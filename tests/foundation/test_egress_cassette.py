"""Cassettes read back and played (issue 31, item 5): what is compared, what is served.

The player is a real HTTP server on 127.0.0.1, asked by a real client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from loopctl.egress_cassette import (
    CassetteWriter,
    Exchange,
    dechunk,
    first_difference,
    normalised,
    read_cassette,
)
from loopctl.egress_replay import TurnPlayer
from loopctl.secrets import Redactor

THEN = "/old/worktrees/repo-1/main"
NOW = "/new/worktrees/repo-2/main"


@pytest.mark.parametrize(
    ("framed", "content"),
    [
        (b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", b"hello world"),
        (b"3;ext=1\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n", b"abc"),
        (b"not chunked at all", b"not chunked at all"),
    ],
)
def test_a_chunked_body_is_read_as_its_content(framed: bytes, content: bytes) -> None:
    assert dechunk(framed) == content


def test_what_differs_by_nature_is_normalised_and_nothing_else() -> None:
    places = {THEN: "<worktree>"}
    body = {
        "metadata": {"user_id": "session-9"},
        "messages": [
            {
                "content": f"cwd {THEN}, today 2026-12-06, id 3f2b9c1e-4a5d-4e6f-8a9b-0c1d2e3f4a5b,"
                " key loopctl-stand-in-0123abcd"
            }
        ],
        "model": "m",
    }
    text = normalised(json.dumps(body).encode(), places).decode()
    assert "metadata" not in text
    assert "cwd <worktree>, today <date>, id <uuid>, key <stand-in>" in text
    assert normalised(b'{"b": 1, "a": 2}', {}) == normalised(b'{"a": 2, "b": 1}', {})
    assert normalised(b'{"a": "x"}', {}) != normalised(b'{"a": "y"}', {})
    assert (
        first_difference(b"abcdef", b"abcXef") == 'at byte 3: recorded "abcdef", replayed "abcXef"'
    )


def recorded(tmp_path: Path, answer: bytes) -> Path:
    path = tmp_path / "maker.cassette.jsonl"
    writer = CassetteWriter(path, within=tmp_path, redactor=Redactor([]), meta={"worktree": THEN})
    for prompt in ("first", "second"):
        body = json.dumps({"messages": [{"content": f"{prompt} in {THEN}"}]}).encode()
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(answer)}".encode()
        writer.exchange(Exchange("127.0.0.1:9", "POST", "/v1/messages", (), body, head, answer))
    return path


def ask(player: TurnPlayer, prompt: str) -> tuple[int, bytes]:
    where = player.redirect
    assert where is not None
    body = json.dumps({"messages": [{"content": f"{prompt} in {NOW}"}]}).encode()
    request = urllib.request.Request(
        f"http://{where.host}:{where.port}/v1/messages", data=body, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def play(tmp_path: Path, *, strict: bool) -> tuple[TurnPlayer, Path]:
    answer = json.dumps({"tool": {"file_path": f"{THEN}/calc.py"}}).encode()
    cassette = read_cassette(recorded(tmp_path, answer), within=tmp_path)
    results = tmp_path / "results.jsonl"
    player = TurnPlayer(
        cassette,
        "main/attempt-1/maker",
        places={"worktree": NOW},
        strict=strict,
        results=results,
        redactor=Redactor([]),
    )
    return player, results


def test_the_same_requests_get_the_recorded_answers_with_this_turns_places(
    tmp_path: Path,
) -> None:
    player, results = play(tmp_path, strict=True)
    try:
        for prompt in ("first", "second"):
            status, body = ask(player, prompt)
            assert status == 200
            # Re-framed by its new length, the recorded worktree swapped for this one.
            assert json.loads(body) == {"tool": {"file_path": f"{NOW}/calc.py"}}
    finally:
        player.close()
    (line,) = [json.loads(text) for text in results.read_text().splitlines()]
    assert (line["asked"], line["divergence"]) == (2, None)


def test_a_different_request_is_the_divergence_and_strict_refuses_from_there(
    tmp_path: Path,
) -> None:
    player, results = play(tmp_path, strict=True)
    try:
        assert ask(player, "first")[0] == 200
        status, body = ask(player, "SECOND")
        assert status == 400
        assert b"diverged from the recording" in body
    finally:
        player.close()
    divergence = json.loads(results.read_text())["divergence"]
    assert (divergence["attempt"], divergence["index"]) == ("main/attempt-1/maker", 1)
    assert 'recorded "' in divergence["detail"]
    assert "second in <worktree>" in divergence["detail"]
    assert "SECOND in <worktree>" in divergence["detail"]


def test_not_strict_the_recorded_answers_keep_coming_and_an_unasked_one_is_noted(
    tmp_path: Path,
) -> None:
    player, results = play(tmp_path, strict=False)
    try:
        assert ask(player, "other")[0] == 200  # diverged, answered with the first recording
    finally:
        player.close()
    divergence = json.loads(results.read_text())["divergence"]
    assert divergence["index"] == 0

    again = tmp_path / "again"
    again.mkdir()
    player, results = play(again, strict=True)
    try:
        assert ask(player, "first")[0] == 200
    finally:
        player.close()
    divergence = json.loads(results.read_text().splitlines()[-1])["divergence"]
    assert divergence["index"] == 1
    assert "was never made" in divergence["detail"]
