"""bench/candidates.py --streak: each endpoint answers that many requests in
a row before the other takes its turn, and each still answers --repeat."""

from __future__ import annotations

import json
import pathlib

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def candidates(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import candidates as module

    return module


class _Endpoint:
    def __init__(self, name, asked):
        self.name, self.asked, self.headers = name, asked, {}

    def resolve(self, query):
        return query

    def raw(self, method, path):
        self.asked.append(self.name)
        return 200, json.dumps({"resource_providers": [1, 2]}).encode()


@pytest.mark.parametrize(
    ("repeat", "streak", "expected"),
    [
        (3, 1, "ABBAAB"),
        (4, 2, "AABBBBAA"),
        (5, 2, "AABBBBAAAB"),
        (3, 5, "AAABBB"),
    ],
)
def test_each_endpoint_answers_streak_requests_a_turn(candidates, capsys, repeat, streak, expected):
    asked: list[str] = []
    clients = [_Endpoint("A", asked), _Endpoint("B", asked)]
    candidates.measure(clients, "q", "1.39", "/resource_providers", repeat, streak)
    assert "".join(asked) == expected
    assert "ratio" in capsys.readouterr().out


def test_a_streak_below_one_is_refused(candidates):
    with pytest.raises(SystemExit) as stopped:
        candidates.main(["--compare", "http://127.0.0.1:1", "--streak", "0"])
    assert stopped.value.code == 2


class _Failing(_Endpoint):
    """An endpoint whose worker is killed at its timeout: a 500, or the
    connection dropped."""

    def __init__(self, name, asked, answer):
        super().__init__(name, asked)
        self.answer = answer

    def raw(self, method, path):
        self.asked.append(self.name)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer, b"<html>Internal Server Error</html>"


@pytest.mark.parametrize("answer", [500, ConnectionResetError("reset by peer")])
def test_an_endpoint_compared_against_that_gives_no_answer_makes_the_ratio_a_bound(
    candidates, capsys, monkeypatch, answer
):
    monkeypatch.setattr(candidates, "RATIOS", [])
    monkeypatch.setattr(candidates, "BOUNDS", [])
    asked: list[str] = []
    clients = [_Endpoint("A", asked), _Failing("B", asked, answer)]
    candidates.measure(clients, "wide", "1.36", "/resource_providers", 4, 1)
    # Asked once, then no more: A still answers all four.
    assert "".join(asked) == "ABAAA"
    out = capsys.readouterr().out
    assert "no answer (" in out and "ratio <=" in out
    assert candidates.BOUNDS == ["wide"] and len(candidates.RATIOS) == 1


def test_the_measured_endpoint_failing_stops_the_run(candidates):
    clients = [_Failing("A", [], 500), _Endpoint("B", [])]
    with pytest.raises(RuntimeError):
        candidates.measure(clients, "q", "1.36", "/resource_providers", 2, 1)


def test_a_4xx_from_the_endpoint_compared_against_stops_the_run(candidates):
    # A refusal is a wrong query, not a slow one: no bound is made of it.
    clients = [_Endpoint("A", []), _Failing("B", [], 400)]
    with pytest.raises(RuntimeError):
        candidates.measure(clients, "q", "1.36", "/resource_providers", 2, 1)
