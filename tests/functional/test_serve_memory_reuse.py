"""A serve worker answers a large provider list in memory it already holds:
the pages of one answer's body and its copies are not handed back to the
system and faulted in again by the next (issue 30; runtime.tune_malloc).
By default glibc would: about a page fault per 4 KB of body, every time."""

from __future__ import annotations

import datetime
import pathlib
import uuid

import httpx
import pytest

from placement_svc.cmd import runtime
from placement_svc.db import migration, tables
from placement_svc.db.engine import create_engine
from tests.support import servers

HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}
PROVIDERS = 1000  # a body of about 750 KB


def _worker_of(conf_path: str) -> int:
    """The pid of the one serve worker: the process of this configuration
    whose parent is one too (the master)."""
    serving = {}
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if conf_path.encode() in argv and b"serve" in argv:
            serving[int(proc.name)] = parent
    workers = [pid for pid, parent in serving.items() if parent in serving]
    assert len(workers) == 1, serving
    return workers[0]


def _faults(pid: int) -> int:
    """The process's minor page faults so far (field 10 of /proc/PID/stat)."""
    return int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def _cloud(url: str) -> None:
    """PROVIDERS root providers, written straight into a fresh database."""
    engine = create_engine(url)
    migration.sync(engine)
    now = datetime.datetime(2026, 11, 27, 12, 0, 0)
    rows = [
        {"id": n, "uuid": str(uuid.uuid4()), "name": f"host-{n}", "generation": 0,
         "root_provider_id": n, "created_at": now}
        for n in range(1, PROVIDERS + 1)
    ]  # fmt: skip
    with engine.begin() as conn:
        conn.execute(tables.resource_providers.insert(), rows)
    engine.dispose()


@pytest.mark.skipif(runtime._mallopt is None, reason="glibc's mallopt only")
def test_a_large_list_is_answered_without_faulting_fresh_pages(tmp_path):
    database = f"sqlite:///{tmp_path}/placement.sqlite"
    _cloud(database)
    conf = servers.write_conf(tmp_path, database)
    with servers.serving(tmp_path, conf, "--workers", "1") as (url, _log):
        with httpx.Client(base_url=url, headers=HEADERS, timeout=30) as client:
            worker = _worker_of(conf)
            for _ in range(3):  # warm: the statement, the kept list bodies
                listed = client.get("/resource_providers").json()["resource_providers"]
                assert len(listed) == PROVIDERS
            before = _faults(worker)
            sizes = {len(client.get("/resource_providers").content) for _ in range(10)}
            per_answer = (_faults(worker) - before) / 10
    assert min(sizes) > 700_000
    # Untuned, each answer faulted in about 520 pages (measured); what is
    # left is the odd page of the allocator's and the interpreter's own.
    assert per_answer < 20, per_answer
