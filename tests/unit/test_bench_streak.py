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
