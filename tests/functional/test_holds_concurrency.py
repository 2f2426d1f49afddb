"""Holds (1.51) under concurrency: two application instances over one database.

Two application instances with their own engines over one database (as two API
hosts would be), on every backend:

- ``test_holds_taken_confirmed_and_lapsing_concurrently``: 16 client threads for
  ~7 s on 3 providers of VCPU 8. Each takes holds (PUT /allocations/{new
  consumer} with ``"hold": {"ttl": 1..3}``, VCPU 1 or 2 on a random provider,
  through either instance); about half are to be confirmed (POST .../confirm)
  within their ttl, some of those too late when the thread is busy, the rest
  lapse; half the confirmed consumers are deleted again after a lifetime of
  their own (which recycles the room) unless the run ends first. A refused
  claim (409, capacity) is tried again a moment later. A sampler reads the
  providers' usages all along. Then, once every hold not confirmed has expired
  (latest expiry + 1 s): every answer was one the spec allows (no 5xx, no
  transport error; a PUT 204 or 409 capacity, a confirm 204 or 409
  placement.hold.expired, a DELETE of a confirmed consumer 204: a 404 there is
  a confirm that succeeded and lost the allocation); no usage sampled was ever
  above capacity; each provider's usage is exactly the sum of the allocations
  of the confirmed consumers still there; each of those shows its allocation
  with ``"hold": null``, every other consumer ``{"allocations": {}}``; GET
  /allocations?resource_provider_uuid=in:... lists exactly the confirmed ones,
  ``held=true`` none. A confirm sent after the latest its hold can have expired
  must not be a 204; one answered before the earliest must not be a 409.
- ``test_lapsed_room_is_claimable_within_a_second``: a provider of VCPU 4 filled
  by four holds of VCPU 1 (ttl 1, 1, 2, 2); six threads try claims without a
  hold until four have succeeded: the k-th claim succeeds no earlier than the
  k-th expires_at (else an overcommit) and within 1 s after it (so within ttl +
  1 s of the hold's creation); never a fifth; usage ends at exactly 4.
- ``test_confirm_racing_the_expiry``: 48 holds of ttl 1 filling 6 providers of
  VCPU 8 (two rounds of 3); each is confirmed at its expires_at give or take a
  few ms (calibrated on the time a confirm takes here), while six threads claim
  the providers' room and three more claim on a provider with room to spare
  (each of those commits a sweep of the expired holds). For each: a confirm 204
  and the allocation stays (hold null), or a 409 placement.hold.expired and it
  is gone; each provider ends holding exactly its confirmed holds plus the
  claims that succeeded, which is its capacity (every lapsed room was claimed),
  never more at any sample.
- ``test_confirm_committed_after_the_expiry``: the same race made certain: a
  confirm decided 0.3 s before the expiry whose COMMIT is held back until 0.5 s
  after it (an SQLAlchemy commit listener: any delay between the confirm's last
  look at the clock and its commit does the same), and a claim 0.2 s after the
  expiry on the hold's provider (room for one) or on another. Exactly one of
  the confirm and the expiry wins: never a 204 with the allocation gone, never
  the confirm and the claim of its room both.

The figures (answers, latencies, timings) are printed (pytest -s).
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import dataclasses
import datetime
import json
import random
import threading
import time
import uuid

import httpx
import pytest
import sqlalchemy as sa

from placement_svc.db import holds
from tests.support import fixtures

HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement 1.51"}
PROJECT = "8d1f6a3c-2b4e-4c5d-9e7f-0a1b2c3d4e51"
USER = "c4b3a291-8f7e-4d6c-b5a4-93827160f5e2"
CAPACITY_409 = "exceed the capacity"
HOLD_EXPIRED = "placement.hold.expired"
# The database's clock and this process's are one machine's clock; this much
# allows for the rounding of the database's (SQLite's 'now' is in ms) and for
# what happens between taking time.time() and sending the request.
CLOCK_SLACK = 0.05


# --------------------------------------------------------------------------
# Helpers (tests/galera/test_holds.py uses them too)


def provider(client: httpx.Client, name: str, vcpu: int) -> str:
    rp_uuid = str(uuid.uuid4())
    created = client.post("/resource_providers", json={"name": name, "uuid": rp_uuid})
    assert created.status_code == 200, created.text
    put = client.put(
        f"/resource_providers/{rp_uuid}/inventories",
        json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": vcpu}}},
    )
    assert put.status_code == 200, put.text
    return rp_uuid


def claim_body(rp: str, vcpu: int, ttl: int | None) -> dict:
    body = {
        "allocations": {rp: {"resources": {"VCPU": vcpu}}},
        "project_id": PROJECT,
        "user_id": USER,
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    if ttl is not None:
        body["hold"] = {"ttl": ttl}
    return body


def epoch(rfc3339: str) -> float:
    """ "2026-11-26T19:04:05.123456Z" as seconds since the epoch."""
    return (
        datetime.datetime.strptime(rfc3339, "%Y-%m-%dT%H:%M:%S.%fZ")
        .replace(tzinfo=datetime.timezone.utc)
        .timestamp()
    )


def error_code(response: httpx.Response) -> str:
    try:
        return response.json()["errors"][0].get("code", "")
    except (ValueError, KeyError, IndexError, TypeError):
        return ""


def kind(response: httpx.Response) -> str:
    """What an answer is, as the assertions count it."""
    if response.status_code != 409:
        return str(response.status_code)
    code = error_code(response)
    if code == HOLD_EXPIRED:
        return "409 hold.expired"
    if code == "placement.undefined_code" and CAPACITY_409 in response.text:
        return "409 capacity"
    return f"409 {code}"


@dataclasses.dataclass
class Call:
    """One request and its answer, timed by this process's clock (time.time())."""

    what: str  # "hold", "claim", "confirm", "delete", "get", "usages"
    sent: float
    answered: float
    status: int  # 0: no answer (transport error)
    kind: str
    text: str


class Recorder:
    """Every answer the clients got, and the ones the spec does not allow."""

    ALLOWED = {
        "hold": {"204", "409 capacity"},
        "claim": {"204", "409 capacity"},
        "confirm": {"204", "409 hold.expired"},
        "delete": {"204"},
        "get": {"200"},
        "usages": {"200"},
    }

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: collections.Counter = collections.Counter()
        self.wrong: list[str] = []
        self.took: dict[str, list[float]] = collections.defaultdict(list)

    def call(self, what: str, send, path: str, **kwargs) -> tuple[Call, httpx.Response | None]:
        """``send(path, **kwargs)`` (a client's get, put, post or delete), timed and
        its answer counted."""
        sent = time.time()
        try:
            response = send(path, **kwargs)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            call = Call(what, sent, time.time(), 0, "transport error", repr(exc))
            with self.lock:
                self.counts[(what, call.kind)] += 1
                self.wrong.append(f"{what} {path}: {exc!r}")
            return call, None
        answered = time.time()
        call = Call(what, sent, answered, response.status_code, kind(response), response.text)
        with self.lock:
            self.counts[(what, call.kind)] += 1
            self.took[what].append(answered - sent)
            if call.kind not in self.ALLOWED[what]:
                self.wrong.append(f"{what} {path}: {response.status_code} {response.text[:400]}")
        return call, response

    def figures(self) -> dict[str, int]:
        return {f"{what} {k}": n for (what, k), n in sorted(self.counts.items())}

    def latencies(self) -> dict[str, str]:
        """Per kind of request: the median and the slowest answer, in ms."""
        return {
            what: f"median {sorted(t)[len(t) // 2] * 1000:.0f}, max {max(t) * 1000:.0f}"
            for what, t in sorted(self.took.items())
        }


class Sampler:
    """A thread reading the providers' usages all along: the most each had."""

    def __init__(self, clients, recorder: Recorder, capacities: dict[str, int], pause=0.02):
        self.clients = clients
        self.recorder = recorder
        self.capacities = capacities
        self.pause = pause
        self.highest: dict[str, int] = dict.fromkeys(capacities, 0)
        self.over: list[tuple[str, int, float]] = []
        self.samples = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        turn = 0
        while not self.stop.is_set():
            for rp, capacity in self.capacities.items():
                client = self.clients[turn % len(self.clients)]
                turn += 1
                path = f"/resource_providers/{rp}/usages"
                _call, response = self.recorder.call("usages", client.get, path)
                if response is None or response.status_code != 200:
                    continue
                used = response.json()["usages"].get("VCPU", 0)
                self.samples += 1
                self.highest[rp] = max(self.highest[rp], used)
                if used > capacity:
                    self.over.append((rp, used, time.time()))
            self.stop.wait(self.pause)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=60)


def run_threads(count: int, target, timeout: float = 120) -> None:
    threads = [threading.Thread(target=target, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not any(thread.is_alive() for thread in threads), "a client thread did not end"


def holdings(client: httpx.Client, consumer: str) -> dict:
    """GET /allocations/{consumer} at 1.51, asserted 200."""
    shown = client.get(f"/allocations/{consumer}")
    assert shown.status_code == 200, shown.text
    return shown.json()


def allocation_of(body: dict) -> dict[str, dict[str, int]]:
    return {rp: a["resources"] for rp, a in body["allocations"].items()}


# --------------------------------------------------------------------------
# The churn: holds taken, confirmed, lapsing and deleted by many threads


@dataclasses.dataclass
class Held:
    """A consumer given a hold (PUT 204), and what became of it."""

    uuid: str
    rp: str
    vcpu: int
    ttl: int
    put: Call
    confirms: list[Call] = dataclasses.field(default_factory=list)
    deleted: Call | None = None

    @property
    def confirmed(self) -> bool:
        return any(c.status == 204 for c in self.confirms)

    @property
    def kept(self) -> bool:
        """Confirmed, and not deleted since: it must hold its allocation."""
        return self.confirmed and (self.deleted is None or self.deleted.status != 204)

    # The hold's expires_at is between these (by the database's clock, which
    # is this machine's): it was set by the PUT, sent and answered then.
    @property
    def earliest_expiry(self) -> float:
        return self.put.sent + self.ttl

    @property
    def latest_expiry(self) -> float:
        return self.put.answered + self.ttl


@dataclasses.dataclass
class Churn:
    """What a churn run did: every consumer held, the answers, the samples."""

    providers: dict[str, int]
    held: list[Held]
    recorder: Recorder
    sampler: Sampler
    refused: list[str]
    seconds: float

    def expected_usages(self) -> dict[str, int]:
        used = dict.fromkeys(self.providers, 0)
        for h in self.held:
            if h.kept:
                used[h.rp] += h.vcpu
        return used

    def figures(self) -> dict:
        confirms = [c for h in self.held for c in h.confirms]
        return {
            "seconds": round(self.seconds, 2),
            "answers": self.recorder.figures(),
            "latency_ms": self.recorder.latencies(),
            "holds": len(self.held),
            "confirmed": sum(h.confirmed for h in self.held),
            "confirm_409_expired": sum(c.kind == "409 hold.expired" for c in confirms),
            "kept_at_end": sum(h.kept for h in self.held),
            "lapsed": sum(not h.confirmed for h in self.held),
            "usage_samples": self.sampler.samples,
            "highest_usage": list(self.sampler.highest.values()),
        }


def churn(
    clients: list[httpx.Client],
    *,
    threads: int = 16,
    seconds: float = 7.0,
    providers: int = 3,
    vcpu: int = 8,
    max_ttl: int = 3,
    seed: int = 51,
) -> Churn:
    """Run the churn, then wait until every hold not confirmed has expired
    (its latest expiry + 1 s): the world is then what the confirms left."""
    rps = {provider(clients[n % len(clients)], f"hold-{n}-{uuid.uuid4().hex[:8]}", vcpu): vcpu
           for n in range(providers)}  # fmt: skip
    rp_list = list(rps)
    recorder = Recorder()
    held: list[Held] = []
    refused: list[str] = []
    lock = threading.Lock()
    end = [0.0]
    barrier = threading.Barrier(
        threads, action=lambda: end.__setitem__(0, time.monotonic() + seconds)
    )
    began = time.monotonic()

    def client_thread(n: int) -> None:
        rng = random.Random(seed * 1000 + n)
        # (due, sequence, action, Held): confirms and deletes to do later.
        todo: list[tuple[float, int, str, Held]] = []
        sequence = 0
        barrier.wait()
        while time.monotonic() < end[0]:
            client = rng.choice(clients)
            if todo and todo[0][0] <= time.monotonic():
                _due, _seq, action, h = todo.pop(0)
                path = f"/allocations/{h.uuid}"
                if action == "confirm":
                    call, _r = recorder.call("confirm", client.post, f"{path}/confirm")
                    h.confirms.append(call)
                    if call.status == 204 and rng.random() < 0.5:
                        # A lifetime, then it goes (the run may end first: kept).
                        sequence += 1
                        due = time.monotonic() + rng.uniform(0.3, 2.0)
                        bisect.insort(todo, (due, sequence, "delete", h))
                else:
                    call, _r = recorder.call("delete", client.delete, path)
                    h.deleted = call
                continue
            consumer = str(uuid.uuid4())
            rp = rng.choice(rp_list)
            amount = rng.randint(1, 2)
            ttl = rng.randint(1, max_ttl)
            path = f"/allocations/{consumer}"
            call, _r = recorder.call("hold", client.put, path, json=claim_body(rp, amount, ttl))
            if call.status == 204:
                h = Held(consumer, rp, amount, ttl, call)
                with lock:
                    held.append(h)
                if rng.random() < 0.5:
                    # Within the ttl as the thread plans it; the thread may be busy
                    # in a request then (the slowest take seconds under this load):
                    # some come late, near or past the expiry.
                    sequence += 1
                    due = time.monotonic() + ttl * rng.uniform(0.0, 1.0)
                    bisect.insort(todo, (due, sequence, "confirm", h))
            else:
                with lock:
                    refused.append(consumer)
                time.sleep(rng.uniform(0.005, 0.03))

    with Sampler(clients, recorder, rps) as sampler:
        run_threads(threads, client_thread)
        ran = time.monotonic() - began
        # Every hold not confirmed has expired by now, with a second to spare.
        latest = max((h.latest_expiry for h in held if not h.confirmed), default=time.time())
        time.sleep(max(0.0, latest + 1.0 - time.time()))
    return Churn(rps, held, recorder, sampler, refused, ran)


def check_churn(churn_run: Churn, clients: list[httpx.Client]) -> None:
    """The assertions of the churn, through every client."""
    run = churn_run
    assert run.held, "no hold was ever taken"
    assert not run.recorder.wrong, (len(run.recorder.wrong), run.recorder.wrong[:10])
    assert not run.sampler.over, ("usage above capacity", run.sampler.over[:10])
    assert run.sampler.samples > 0

    # A confirm is decided by the database's clock: sent after the latest the
    # hold could expire, it cannot succeed; answered before the earliest, it
    # cannot find the hold expired.
    too_late, too_early = [], []
    for h in run.held:
        for c in h.confirms:
            if c.status == 204 and c.sent > h.latest_expiry + CLOCK_SLACK:
                too_late.append((h.uuid, round(c.sent - h.latest_expiry, 3)))
            if c.kind == "409 hold.expired" and c.answered < h.earliest_expiry - CLOCK_SLACK:
                too_early.append((h.uuid, round(h.earliest_expiry - c.answered, 3)))
    assert not too_late, ("confirmed after the hold expired", too_late[:10])
    assert not too_early, ("told expired before the hold expired", too_early[:10])

    expected = run.expected_usages()
    kept = {h.uuid: h for h in run.held if h.kept}
    for client in clients:
        for rp in run.providers:
            usages = client.get(f"/resource_providers/{rp}/usages")
            assert usages.status_code == 200, usages.text
            assert usages.json()["usages"].get("VCPU", 0) == expected[rp], (rp, expected)
        every = client.get(
            "/allocations", params={"resource_provider_uuid": "in:" + ",".join(run.providers)}
        )
        assert every.status_code == 200, every.text
        assert set(every.json()["allocations"]) == set(kept), "the listed consumers"
        held_now = client.get(
            "/allocations",
            params={"resource_provider_uuid": "in:" + ",".join(run.providers), "held": "true"},
        )
        assert held_now.status_code == 200, held_now.text
        assert held_now.json()["allocations"] == {}, "a hold still listed as held"

    wrong = []
    for n, h in enumerate(run.held):
        body = holdings(clients[n % len(clients)], h.uuid)
        if h.kept:
            if allocation_of(body) != {h.rp: {"VCPU": h.vcpu}} or body.get("hold", "?") is not None:
                wrong.append(("confirmed", h.uuid, body))
        elif body != {"allocations": {}}:
            wrong.append(("lapsed" if not h.confirmed else "deleted", h.uuid, body))
    assert not wrong, (len(wrong), wrong[:10])
    for n, consumer in enumerate(run.refused[:50]):
        assert holdings(clients[n % len(clients)], consumer) == {"allocations": {}}, consumer


@pytest.fixture
def clients(test_db):
    with fixtures.servers_over(test_db.url, headers=HEADERS) as made:
        yield made


def test_holds_taken_confirmed_and_lapsing_concurrently(clients, backend):
    run = churn(clients, threads=16, seconds=7.0)
    print(f"\n{backend} hold churn:\n" + json.dumps(run.figures(), indent=2, sort_keys=True))
    check_churn(run, clients)
    # The run exercised what it is about: holds refused for want of room (the
    # providers were full), confirmed, lapsed, and confirms that came too late.
    counts = run.recorder.counts
    assert counts[("hold", "409 capacity")] > 0, run.figures()
    assert counts[("confirm", "204")] > 0 and counts[("delete", "204")] > 0, run.figures()
    assert any(not h.confirmed for h in run.held), run.figures()


# --------------------------------------------------------------------------
# A lapsed hold's room is claimable within ttl + 1 s


def test_lapsed_room_is_claimable_within_a_second(clients, backend):
    rp = provider(clients[0], f"lapse-{uuid.uuid4().hex[:8]}", 4)
    recorder = Recorder()
    holds = []  # (consumer, ttl, created (PUT answered), expires_at)
    for n, ttl in enumerate(random.Random(7).sample([1, 1, 2, 2], 4)):
        consumer = str(uuid.uuid4())
        path = f"/allocations/{consumer}"
        call, _r = recorder.call("hold", clients[n % 2].put, path, json=claim_body(rp, 1, ttl))
        assert call.status == 204, call.text
        body = holdings(clients[(n + 1) % 2], consumer)
        assert body["hold"] is not None, body
        holds.append((consumer, ttl, call.answered, epoch(body["hold"]["expires_at"])))
    full = clients[0].put(f"/allocations/{uuid.uuid4()}", json=claim_body(rp, 1, None))
    assert kind(full) == "409 capacity", full.text

    expiries = sorted(h[3] for h in holds)
    deadline = expiries[-1] + 1.5
    claims: list[tuple[str, Call]] = []
    lock = threading.Lock()

    def claimer(n: int) -> None:
        rng = random.Random(100 + n)
        while time.time() < deadline:
            consumer = str(uuid.uuid4())
            path = f"/allocations/{consumer}"
            client = clients[n % 2]
            call, _r = recorder.call("claim", client.put, path, json=claim_body(rp, 1, None))
            if call.status == 204:
                with lock:
                    claims.append((consumer, call))
                return  # this thread's claim is made; the others go on
            time.sleep(rng.uniform(0.005, 0.02))

    with Sampler(clients, recorder, {rp: 4}, pause=0.01) as sampler:
        run_threads(6, claimer)

    answered = sorted(call.answered for _c, call in claims)
    figures = {
        "answers": recorder.figures(),
        "claimed_after_expiry": [round(t - e, 3) for t, e in zip(answered, expiries)],
        "usage_samples": sampler.samples,
    }
    print(f"\n{backend} lapsed room:\n" + json.dumps(figures, indent=2, sort_keys=True))
    assert not recorder.wrong, recorder.wrong[:10]
    assert not sampler.over, ("usage above capacity", sampler.over[:10])
    assert len(claims) == 4, figures  # every room, and never a fifth
    for k, (at, expiry) in enumerate(zip(answered, expiries)):
        # The k-th claim needed the k-th room: not before that hold expired
        # (an overcommit), and within a second of it.
        assert at >= expiry - CLOCK_SLACK, (k, "claimed before the hold expired", figures)
        assert at <= expiry + 1.0, (k, "room not claimable within a second", figures)
    # The same, from the holds' creation: within ttl + 1 s.
    created_plus = sorted(created + ttl + 1.0 for _c, ttl, created, _e in holds)
    assert all(at <= bound for at, bound in zip(answered, created_plus)), figures
    for client in clients:
        usages = client.get(f"/resource_providers/{rp}/usages")
        assert usages.json()["usages"]["VCPU"] == 4, usages.text
    for consumer, _ttl, _created, _expiry in holds:
        assert holdings(clients[1], consumer) == {"allocations": {}}, consumer
    for consumer, _call in claims:
        body = holdings(clients[0], consumer)
        assert allocation_of(body) == {rp: {"VCPU": 1}} and body["hold"] is None, body


# --------------------------------------------------------------------------
# A confirm racing the expiry


def confirm_latency(clients: list[httpx.Client]) -> float:
    """The median time a confirm takes here, alone: the racing confirms are
    sent that much (and a little more or less) before the expiry, so that
    they reach the database's decision around it."""
    rp = provider(clients[0], f"calibration-{uuid.uuid4().hex[:8]}", 100)
    took = []
    for n in range(5):
        consumer = str(uuid.uuid4())
        put = clients[n % 2].put(f"/allocations/{consumer}", json=claim_body(rp, 1, 60))
        assert put.status_code == 204, put.text
        began = time.time()
        confirmed = clients[(n + 1) % 2].post(f"/allocations/{consumer}/confirm")
        took.append(time.time() - began)
        assert confirmed.status_code == 204, confirmed.text
    return sorted(took)[len(took) // 2]


@dataclasses.dataclass
class Race:
    """What the rounds of test_confirm_racing_the_expiry did."""

    clients: list[httpx.Client]
    recorder: Recorder
    capacity: int
    window: tuple[float, float]  # when a confirm is sent, against the expiry
    # (consumer, provider, the hold's expiry: earliest and latest, the confirm)
    results: list[tuple[str, str, float, float, Call]] = dataclasses.field(default_factory=list)
    claims: list[tuple[str, str, Call]] = dataclasses.field(default_factory=list)
    attempts: list[tuple[str, Call]] = dataclasses.field(default_factory=list)  # every claim
    failed: list[str] = dataclasses.field(default_factory=list)
    providers: list[str] = dataclasses.field(default_factory=list)
    roomies: list[str] = dataclasses.field(default_factory=list)  # room to spare, a round each
    swept_by: list[str] = dataclasses.field(default_factory=list)  # the claims made there
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)

    def round(self, round_: int) -> None:
        """3 providers filled by 3 * capacity holds of ttl 1, taken 20 ms apart
        (their expiries spread too), each confirmed around its expiry; 6 threads
        claiming the providers' room meanwhile, until 1.2 s after the last
        expiry; 3 more claiming on a provider with room to spare, as fast as they
        go: each commits a sweep of the holds that have expired (on other
        providers than its own) while the confirms race the expiry."""
        clients, recorder, lock = self.clients, self.recorder, self.lock
        rps = [
            provider(clients[n % 2], f"race-{round_}-{n}-{uuid.uuid4().hex[:8]}", self.capacity)
            for n in range(3)
        ]
        self.providers += rps
        roomy = provider(clients[round_ % 2], f"roomy-{round_}-{uuid.uuid4().hex[:8]}", 100000)
        self.roomies.append(roomy)
        wanted = [(str(uuid.uuid4()), rps[n % len(rps)]) for n in range(self.capacity * 3)]
        expiries: list[float] = []
        taken, done = threading.Event(), threading.Event()
        began = time.time()

        def holder(n: int) -> None:
            consumer, rp = wanted[n]
            rng = random.Random(1000 * round_ + n)
            path = f"/allocations/{consumer}"
            client = clients[n % 2]
            time.sleep(max(0.0, began + 0.02 * n - time.time()))
            put, _r = recorder.call("hold", client.put, path, json=claim_body(rp, 1, 1))
            if put.status != 204:
                self.failed.append(f"hold {path}: {put.status} {put.text[:300]}")
                taken.set()  # the test fails: no one to wait for
                return
            get, shown = recorder.call("get", clients[(n + 1) % 2].get, path)
            earliest, latest = put.sent + 1, put.answered + 1
            if get.status == 200 and shown.json().get("hold"):
                earliest = latest = epoch(shown.json()["hold"]["expires_at"])
            elif get.status != 200 or get.answered < earliest - CLOCK_SLACK:
                self.failed.append(
                    f"GET {path} answered {get.answered - put.sent:.3f}s after the hold's "
                    f"PUT (ttl 1) was sent: {get.status} {get.text[:300]}"
                )
                taken.set()
                return
            else:  # the PUT took so long the hold expired before it could be read
                latest = min(latest, get.answered)
            with lock:
                expiries.append(latest)
                if len(expiries) == len(wanted):
                    taken.set()
            time.sleep(max(0.0, earliest + rng.uniform(*self.window) - time.time()))
            call, _r = recorder.call("confirm", client.post, f"{path}/confirm")
            with lock:
                self.results.append((consumer, rp, earliest, latest, call))

        def holders() -> None:
            try:
                run_threads(len(wanted), holder)
            finally:
                done.set()

        def filled() -> bool:
            """Every provider of the round was found full by a claim sent
            after its last hold lapsed: no room a hold left is still free,
            and no more can come free (what the test checks at the end)."""
            with lock:
                lapsed: dict[str, float] = {}
                for _c, rp, _e, latest, _call in self.results:
                    if rp in rps:
                        lapsed[rp] = max(lapsed.get(rp, 0.0), latest)
                full = {
                    rp
                    for rp, call in self.attempts
                    if call.kind == "409 capacity" and call.sent > lapsed.get(rp, 0.0) + CLOCK_SLACK
                }
            return len(lapsed) == len(rps) and full >= set(rps)

        def claiming() -> bool:
            """Until the holds are all confirmed or lapsed and 1.2 s more have
            passed; then (a loaded machine's claimers may have come late)
            until the rooms they left are all taken, 20 s at the most."""
            if not done.is_set():
                return True
            past = time.time() - max(expiries, default=0)
            return past < 1.2 or (past < 20 and not filled())

        def claimer(n: int) -> None:
            rng = random.Random(5000 * round_ + n)
            taken.wait(timeout=30)
            while claiming():
                consumer, rp = str(uuid.uuid4()), rng.choice(rps)
                path = f"/allocations/{consumer}"
                client = clients[n % 2]
                call, _r = recorder.call("claim", client.put, path, json=claim_body(rp, 1, None))
                with lock:
                    self.attempts.append((rp, call))
                    if call.status == 204:
                        self.claims.append((consumer, rp, call))
                if call.status != 204:
                    time.sleep(rng.uniform(0.002, 0.01))

        def sweeper(n: int) -> None:
            taken.wait(timeout=30)
            while not done.is_set():
                consumer = str(uuid.uuid4())
                path = f"/allocations/{consumer}"
                client = clients[n % 2]
                call, _r = recorder.call("claim", client.put, path, json=claim_body(roomy, 1, None))
                if call.status == 204:
                    with lock:
                        self.swept_by.append(consumer)

        with Sampler(clients, recorder, dict.fromkeys(rps, self.capacity), pause=0.01) as sampler:
            confirming = threading.Thread(target=holders)
            sweeping = threading.Thread(target=run_threads, args=(3, sweeper))
            confirming.start()
            sweeping.start()
            run_threads(6, claimer)
            confirming.join(timeout=60)
            sweeping.join(timeout=60)
        assert not self.failed, self.failed[:10]
        assert not sampler.over, ("usage above capacity", sampler.over[:10])


def test_confirm_racing_the_expiry(clients, backend):
    latency = confirm_latency(clients)
    # Sent from twice that (plus 20 ms) before the expiry to 10 ms after it
    # (under this load a request takes longer than alone): they reach the
    # database's decision around the expiry, some before, some after.
    race = Race(clients, Recorder(), capacity=8, window=(-2 * latency - 0.02, 0.01))
    for round_ in range(2):
        race.round(round_)
    recorder, capacity, results, claims = race.recorder, race.capacity, race.results, race.claims
    attempts, roomies, swept_by, all_rps = (
        race.attempts,
        race.roomies,
        race.swept_by,
        race.providers,
    )

    outcomes = collections.Counter(call.kind for *_x, call in results)
    figures = {
        "answers": recorder.figures(),
        "confirm_latency_ms": round(latency * 1000),
        "confirms": dict(outcomes),
        "confirm_sent_minus_expiry_ms": sorted(
            round((call.sent - latest) * 1000) for *_x, latest, call in results
        ),
        # Anything but 204 / 409 hold.expired: when it was sent and answered (ms
        # after the expiry), and what it said.
        "confirms_wrong": [
            (round((call.sent - latest) * 1000), round((call.answered - latest) * 1000),
             call.kind, call.text[:200])
            for *_x, latest, call in results
            if call.kind not in ("204", "409 hold.expired")
        ],
    }  # fmt: skip
    print(f"\n{backend} confirm racing expiry:\n" + json.dumps(figures, indent=2, sort_keys=True))
    assert not recorder.wrong, (recorder.wrong[:10], figures["confirms_wrong"])
    assert len(results) == 2 * 3 * capacity

    wrong = []
    confirmed = collections.Counter()
    for n, (consumer, rp, earliest, latest, call) in enumerate(results):
        body = holdings(clients[n % 2], consumer)
        if call.status == 204:
            confirmed[rp] += 1
            if allocation_of(body) != {rp: {"VCPU": 1}} or body.get("hold", "?") is not None:
                at = (round((call.sent - latest) * 1000), round((call.answered - latest) * 1000))
                wrong.append(
                    ("confirmed (sent, answered ms after expiry), but", at, consumer, body)
                )
            if call.sent > latest + CLOCK_SLACK:
                wrong.append(("confirmed after expiry", consumer, call.sent - latest))
        else:  # 409 hold.expired (anything else is in recorder.wrong)
            if body != {"allocations": {}}:
                wrong.append(("expired, but", consumer, body))
            if call.answered < earliest - CLOCK_SLACK:
                wrong.append(("expired before its time", consumer, earliest - call.answered))
    assert not wrong, (wrong[:10], figures)
    claimed = collections.Counter(rp for _c, rp, _call in claims)
    roomy_used = sum(
        clients[0].get(f"/resource_providers/{roomy}/usages").json()["usages"]["VCPU"]
        for roomy in roomies
    )
    assert roomy_used == len(swept_by), (roomy_used, len(swept_by))
    for consumer, rp, _call in claims:
        body = holdings(clients[0], consumer)
        assert allocation_of(body) == {rp: {"VCPU": 1}} and body["hold"] is None, body
    for client in clients:
        for rp in all_rps:
            usages = client.get(f"/resource_providers/{rp}/usages")
            used = usages.json()["usages"]["VCPU"]
            assert used == confirmed[rp] + claimed[rp], (rp, used, confirmed[rp], claimed[rp])
            # Every room a lapsed hold left was claimed by the claimers.
            if used != capacity:
                lapsed = max(latest for _c, p, _e, latest, _call in results if p == rp)
                tried = [
                    (round((call.sent - lapsed) * 1000), round((call.answered - lapsed) * 1000),
                     call.kind)
                    for p, call in attempts if p == rp and call.sent > lapsed
                ]  # fmt: skip
                raise AssertionError(
                    f"provider {rp}: {used} used of {capacity} ({confirmed[rp]} confirmed, "
                    f"{claimed[rp]} claimed); claims tried after its last hold expired "
                    f"(sent, answered ms after; answer): {tried}"
                )


# --------------------------------------------------------------------------
# A confirm decided before the expiry and committed after it


@contextlib.contextmanager
def confirms_commit_at(moment: float):
    """Every transaction that confirms a hold (as the service notes it for its
    metrics: holds.EVENTS) waits until ``moment`` (time.time()) before its
    COMMIT is sent: a confirm decided before the expiry whose commit comes after
    it, as any delay between its last look at the clock and its commit (a slow
    commit, the process descheduled) makes it."""

    def commit(conn) -> None:
        if conn.info.get(holds.EVENTS, {}).get(holds.CONFIRMED):
            time.sleep(max(0.0, moment - time.time()))

    sa.event.listen(sa.engine.Engine, "commit", commit)
    try:
        yield
    finally:
        sa.event.remove(sa.engine.Engine, "commit", commit)


@pytest.mark.parametrize("claim_on", ["its provider", "another provider"])
def test_confirm_committed_after_the_expiry(clients, backend, claim_on):
    """A hold (ttl 1) on provider A, which has room for it alone; a confirm sent
    0.3 s before its expires_at, whose commit waits until 0.5 s after it; a claim
    sent 0.2 s after the expiry, on A (it needs the hold's room) or on B (room to
    spare: it commits, and sweeps the expired holds it sees). The spec: exactly one
    of the confirm and the expiry wins. A confirm 204 keeps the allocation (and
    the claim on A is refused); a 409 placement.hold.expired loses it (and the
    claim on A may have the room). Never a 204 with the allocation gone; never
    more on A than it has."""
    rp_a = provider(clients[0], f"confirmed-{uuid.uuid4().hex[:8]}", 1)
    rp_b = provider(clients[1], f"other-{uuid.uuid4().hex[:8]}", 100)
    consumer = str(uuid.uuid4())
    put = clients[0].put(f"/allocations/{consumer}", json=claim_body(rp_a, 1, 1))
    assert put.status_code == 204, put.text
    expires_at = epoch(holdings(clients[1], consumer)["hold"]["expires_at"])
    assert expires_at - time.time() > 0.4, "the hold was not read in time"
    answers: dict[str, httpx.Response] = {}

    def confirm() -> None:
        time.sleep(max(0.0, expires_at - 0.3 - time.time()))
        answers["confirm"] = clients[1].post(f"/allocations/{consumer}/confirm")

    with confirms_commit_at(expires_at + 0.5):
        confirming = threading.Thread(target=confirm)
        confirming.start()
        time.sleep(max(0.0, expires_at + 0.2 - time.time()))
        target = rp_a if claim_on == "its provider" else rp_b
        claimant = str(uuid.uuid4())
        answers["claim"] = clients[0].put(
            f"/allocations/{claimant}", json=claim_body(target, 1, None)
        )
        confirming.join(timeout=30)
    confirmed, claimed = answers["confirm"], answers["claim"]
    shown = holdings(clients[0], consumer)
    used_a = clients[1].get(f"/resource_providers/{rp_a}/usages").json()["usages"]["VCPU"]
    story = {
        "confirm": (confirmed.status_code, error_code(confirmed)),
        "claim": (claimed.status_code, kind(claimed)),
        "consumer": shown,
        "usage of A": used_a,
    }
    assert kind(confirmed) in ("204", "409 hold.expired"), story
    if kind(confirmed) == "204":
        assert allocation_of(shown) == {rp_a: {"VCPU": 1}}, ("confirmed, but lost", story)
        assert shown["hold"] is None, story
    else:
        assert shown == {"allocations": {}}, ("expired, but kept", story)
    if claim_on == "its provider":
        assert kind(claimed) in ("204", "409 capacity"), story
        assert (kind(confirmed) == "204") != (kind(claimed) == "204"), ("one wins", story)
    else:
        assert kind(claimed) == "204", story
    print(f"\n{backend}, claim on {claim_on}: {story}")
    on_a = [confirmed] + ([claimed] if claim_on == "its provider" else [])
    assert used_a == sum(kind(answer) == "204" for answer in on_a) <= 1, story
