"""[api] auth_strategy = keystone: keystonemiddleware guards every path but the root.

No keystone is contacted: a request without a token is refused by the
middleware itself, and the version document never reaches it.
"""

from __future__ import annotations

import httpx
from keystonemiddleware import auth_token

from placement_svc import app
from placement_svc.db import migration
from placement_svc.db.engine import Database, create_engine
from tests.support import fixtures


def _client(url: str, **authtoken):
    conf = fixtures.make_conf()
    conf.set_override("auth_strategy", "keystone", group="api")
    # What an operator's [keystone_authtoken] would say; never contacted here.
    for group, opts in auth_token.list_opts():
        conf.register_opts(opts, group=group)
    conf.set_override(
        "www_authenticate_uri", "http://keystone.test/identity", group="keystone_authtoken"
    )
    for name, value in authtoken.items():
        conf.set_override(name, value, group="keystone_authtoken")
    engine = create_engine(url)
    migration.sync(engine)
    application = app.create_app(conf, Database(engine))
    return httpx.Client(transport=httpx.WSGITransport(app=application), base_url="http://p")


def test_root_is_served_without_a_token(sqlite_url):
    answer = _client(sqlite_url).get("/")
    assert answer.status_code == 200
    assert answer.json()["versions"][0]["max_version"] == "1.51"


def test_other_paths_need_a_keystone_token(sqlite_url):
    client = _client(sqlite_url)
    for path in ("/traits", "/resource_providers", "/allocation_candidates"):
        answer = client.get(path, headers={"openstack-api-version": "placement latest"})
        assert answer.status_code == 401, path
        assert answer.headers["www-authenticate"] == 'Keystone uri="http://keystone.test/identity"'


def test_keystone_tokens_carry_roles_and_project_into_policy(sqlite_url):
    """Token validation faked with keystonemiddleware's own fixture: the roles
    and project of a valid token decide what policy allows; an unknown token
    is a 401."""
    from keystonemiddleware.fixture import AuthTokenFixture

    with AuthTokenFixture() as tokens:
        tokens.add_token_data(
            token_id="admin-token", user_id="u-admin", project_id="p-admin", role_list=["admin"]
        )
        tokens.add_token_data(
            token_id="reader-token",
            user_id="u-reader",
            project_id="p-reader",
            role_list=["reader", "member"],
        )
        client = _client(sqlite_url)
        latest = {"openstack-api-version": "placement latest"}

        def call(method, path, token, **kwargs):
            return client.request(method, path, headers={**latest, "x-auth-token": token}, **kwargs)

        assert call("GET", "/traits", "admin-token").status_code == 200
        created = call("POST", "/resource_providers", "admin-token", json={"name": "cn"})
        assert created.status_code == 200, created.text

        refused = call("GET", "/resource_providers", "reader-token")
        assert refused.status_code == 403
        assert "placement:resource_providers:list" in refused.json()["errors"][0]["detail"]
        own = call("GET", "/usages?project_id=p-reader", "reader-token")
        assert own.status_code == 200, own.text
        assert own.json()["usages"] == {}
        assert call("GET", "/usages?project_id=p-admin", "reader-token").status_code == 403

        assert call("GET", "/traits", "no-such-token").status_code == 401


def test_a_memcached_token_cache_is_usable_with_the_keystone_extra(sqlite_url):
    """[keystone_authtoken] memcached_servers makes auth_token import
    python-memcached on the first token it checks; the keystone extra brings
    it. An unreachable memcached is a cache miss, not an error."""
    from keystonemiddleware.fixture import AuthTokenFixture

    with AuthTokenFixture() as tokens:
        tokens.add_token_data(
            token_id="admin-token", user_id="u-admin", project_id="p-admin", role_list=["admin"]
        )
        client = _client(sqlite_url, memcached_servers=["127.0.0.1:1"])
        answer = client.get(
            "/traits",
            headers={"openstack-api-version": "placement latest", "x-auth-token": "admin-token"},
        )
        assert answer.status_code == 200, answer.text
