"""GET /metrics under ``placement-svc serve --workers 2``: one scrape, every worker.

Each gunicorn worker counts into files of its own in one shared directory
(prometheus_client's multiprocess mode); whichever worker answers a
scrape reads them all. The test makes requests until both workers have
served some (the request log names the process), then scrapes several
times: every scrape, from whichever worker, has the full count.
"""

from __future__ import annotations

import re
import urllib.request

from tests.support.servers import assert_one_line_error, free_port, run, serving, write_conf

ADMIN = {"x-auth-token": "admin"}
LINE = (
    'placement_http_requests_total{{method="GET",microversion="1.0",'
    'route="/resource_providers",status="200"}} {count}.0'
)


def _get(url: str, headers=ADMIN) -> str:
    request = urllib.request.Request(url, headers={**headers, "connection": "close"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
        return response.read().decode()


def _served_by(log) -> set[str]:
    """The pids of the processes that logged GET /resource_providers."""
    return set(
        re.findall(r" (\d+) INFO placement_svc\.requests .*\"GET /resource_providers\"", log)
    )


def test_one_scrape_counts_the_requests_of_every_worker(tmp_path, sqlite_url, monkeypatch):
    shared = tmp_path / "metrics"
    shared.mkdir()
    (shared / "counter_1.db").write_bytes(b"an earlier run's counts")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(shared))
    private = f"127.0.0.1:{free_port()}"
    conf = write_conf(tmp_path, sqlite_url, f"[metrics]\nlisten = {private}\n")
    with serving(tmp_path, conf, "--workers", "2") as (base, log):
        made = 0
        while len(_served_by(log.read_text())) < 2:
            assert made < 300, "one worker served every request"
            _get(base + "/resource_providers")
            made += 1
        workers = _served_by(log.read_text())
        for _scrape in range(6):
            assert LINE.format(count=made) in _get(base + "/metrics")
        # [metrics] listen: the same counts from the master, no token asked.
        assert LINE.format(count=made) in _get(f"http://{private}/metrics", headers={})
        counted_by = {path.name for path in shared.glob("counter_*.db")}
    assert counted_by == {f"counter_{pid}.db" for pid in workers}


def test_a_metrics_listen_address_that_cannot_be_used_is_one_line(tmp_path):
    conf = write_conf(tmp_path, f"sqlite:///{tmp_path}/p.sqlite", "[metrics]\nlisten = nowhere\n")
    result = run("serve", "--config-file", conf, "--bind", f"127.0.0.1:{free_port()}", cwd=tmp_path)
    assert result.returncode == 1
    assert_one_line_error(result, "[metrics] listen: expected HOST:PORT, got 'nowhere'")
