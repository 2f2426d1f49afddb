"""[api] auth_strategy = keystone: keystonemiddleware guards every path but the root.

No keystone is contacted: a request without a token is refused by the
middleware itself, and the version document never reaches it.
"""

from __future__ import annotations

import httpx
from keystonemiddleware import auth_token

from placement_svc import app
from placement_svc.db.engine import Database, create_engine
from tests.functional import fixtures


def _client(tmp_path):
    conf = fixtures.make_conf()
    conf.set_override("auth_strategy", "keystone", group="api")
    # What an operator's [keystone_authtoken] would say; never contacted here.
    for group, opts in auth_token.list_opts():
        conf.register_opts(opts, group=group)
    conf.set_override(
        "www_authenticate_uri", "http://keystone.test/identity", group="keystone_authtoken"
    )
    engine = create_engine(f"sqlite:///{tmp_path}/k.db")
    application = app.create_app(conf, Database(engine))
    return httpx.Client(transport=httpx.WSGITransport(app=application), base_url="http://p")


def test_root_is_served_without_a_token(tmp_path):
    answer = _client(tmp_path).get("/")
    assert answer.status_code == 200
    assert answer.json()["versions"][0]["max_version"] == "1.39"


def test_other_paths_need_a_keystone_token(tmp_path):
    client = _client(tmp_path)
    for path in ("/traits", "/resource_providers", "/allocation_candidates"):
        answer = client.get(path, headers={"openstack-api-version": "placement latest"})
        assert answer.status_code == 401, path
        assert answer.headers["www-authenticate"] == 'Keystone uri="http://keystone.test/identity"'
