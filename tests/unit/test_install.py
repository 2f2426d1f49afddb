"""placement_svc.install: the pip command an error message suggests for an
extra, one that works for the way this installation was made."""

from __future__ import annotations

import json
import shlex
import sys

from placement_svc import install


class _Dist:
    def __init__(self, direct_url):
        self.direct_url = direct_url

    def read_text(self, name):
        assert name == "direct_url.json"
        return None if self.direct_url is None else json.dumps(self.direct_url)


def _with(monkeypatch, *dists):
    monkeypatch.setattr(install.importlib.metadata, "distributions", lambda name: iter(dists))


PIP = f"{shlex.quote(sys.executable)} -m pip install"


def test_an_editable_checkout_takes_its_own_path_with_the_extra(monkeypatch):
    _with(
        monkeypatch,
        _Dist(None),  # the checkout's egg-info, found first from inside it
        _Dist({"dir_info": {"editable": True}, "url": "file:///srv/placement%20svc"}),
    )
    assert install.extra_command("keystone") == f"{PIP} -e '/srv/placement svc[keystone]'"


def test_a_wheel_file_takes_that_file_with_the_extra(monkeypatch):
    wheel = "file:///tmp/dist/placement_svc-0.1.0-py3-none-any.whl"
    _with(monkeypatch, _Dist({"archive_info": {}, "url": wheel}))
    assert install.extra_command("postgresql") == (
        f"{PIP} '/tmp/dist/placement_svc-0.1.0-py3-none-any.whl[postgresql]'"
    )


def test_an_index_install_takes_the_name(monkeypatch):
    _with(monkeypatch, _Dist(None))
    assert install.extra_command("mysql") == f"{PIP} 'placement-svc[mysql]'"


def test_this_installation_gets_a_command_for_itself():
    command = install.extra_command("keystone")
    assert command.startswith(PIP) and command.endswith("[keystone]'")
