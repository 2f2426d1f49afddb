"""Policy: upstream's rule names and defaults, one rule per operation, every
handler asking before it does anything, and what a policy file can do.

The gabbi files policy-*.yaml prove who gets what over HTTP on every
backend; these tests check the rule set itself and the start-up paths,
with a database that fails the test if a refused request touches it.
"""

from __future__ import annotations

import logging
import pathlib
import uuid

import httpx
import pytest
from oslo_config import cfg
from oslo_context import context as oslo_context
from oslo_policy import generator
from oslo_policy import policy as oslo_policy

from placement_svc import app, conf, policy, routes
from placement_svc.cmd import bootstrap, cli
from placement_svc.http.context import RequestContext
from tests.support.fixtures import UntouchableDatabase

ROOT = pathlib.Path(__file__).resolve().parents[2]
GENERATOR_CONF = ROOT / "etc" / "policy-generator.conf"
SAMPLE = ROOT / "etc" / "policy.yaml.sample"

# Upstream Placement's rules, names and defaults (placement/policies/ there).
BASE_RULES = {
    "admin_api": ("role:admin", ["project"], False),
    "service_api": ("role:service", ["project"], True),
    "admin_or_service_api": ("role:admin or role:service", ["project"], True),
    "project_reader_api": ("role:reader and project_id:%(project_id)s", None, True),
    "admin_or_project_reader_or_service_api": (
        "role:admin or rule:project_reader_api or role:service",
        ["project"],
        True,
    ),
}
API_RULES = {
    "placement:resource_providers:list": "rule:admin_or_service_api",
    "placement:resource_providers:create": "rule:admin_or_service_api",
    "placement:resource_providers:show": "rule:admin_or_service_api",
    "placement:resource_providers:update": "rule:admin_or_service_api",
    "placement:resource_providers:delete": "rule:admin_or_service_api",
    "placement:resource_classes:list": "rule:admin_or_service_api",
    "placement:resource_classes:create": "rule:admin_or_service_api",
    "placement:resource_classes:show": "rule:admin_or_service_api",
    "placement:resource_classes:update": "rule:admin_or_service_api",
    "placement:resource_classes:delete": "rule:admin_or_service_api",
    "placement:resource_providers:inventories:list": "rule:admin_or_service_api",
    "placement:resource_providers:inventories:create": "rule:admin_or_service_api",
    "placement:resource_providers:inventories:show": "rule:admin_or_service_api",
    "placement:resource_providers:inventories:update": "rule:admin_or_service_api",
    "placement:resource_providers:inventories:delete": "rule:admin_or_service_api",
    "placement:resource_providers:aggregates:list": "rule:admin_or_service_api",
    "placement:resource_providers:aggregates:update": "rule:admin_or_service_api",
    "placement:resource_providers:usages": "rule:admin_or_service_api",
    "placement:usages": "rule:admin_or_project_reader_or_service_api",
    "placement:traits:list": "rule:admin_or_service_api",
    "placement:traits:show": "rule:admin_or_service_api",
    "placement:traits:update": "rule:admin_or_service_api",
    "placement:traits:delete": "rule:admin_or_service_api",
    "placement:resource_providers:traits:list": "rule:admin_or_service_api",
    "placement:resource_providers:traits:update": "rule:admin_or_service_api",
    "placement:resource_providers:traits:delete": "rule:admin_or_service_api",
    "placement:allocations:manage": "rule:admin_or_service_api",
    "placement:allocations:list": "rule:admin_or_service_api",
    "placement:allocations:update": "rule:admin_or_service_api",
    "placement:allocations:delete": "rule:admin_or_service_api",
    "placement:resource_providers:allocations:list": "rule:admin_or_service_api",
    "placement:allocation_candidates:list": "rule:admin_or_service_api",
    "placement:allocation_candidates:explain": "rule:admin_or_service_api",
    "placement:allocation_candidates:capacity": "rule:admin_or_service_api",
    "placement:reshaper:reshape": "rule:service_api",
    # placement-svc's own: the Prometheus metrics, admins only
    "placement:metrics": "rule:admin_api",
}

PROJECT = "6a7c0c3b1f2e4d5c8b9a0f1e2d3c4b5a"
OTHER_PROJECT = "0f9e8d7c6b5a49382716a5b4c3d2e1f0"


def make_conf(tmp_path, policy_text=None, **oslo_policy_overrides):
    """A quick-start style configuration whose policy file is ours (or absent)."""
    cfg_ = conf.make_conf(config_files=[], quickstart_if_unconfigured=False)
    cfg_.set_override("auth_strategy", "noauth2", group="api")
    path = tmp_path / "policy.yaml"
    if policy_text is not None:
        path.write_text(policy_text)
    cfg_.set_override("policy_file", str(path), group="oslo_policy")
    for name, value in oslo_policy_overrides.items():
        cfg_.set_override(name, value, group="oslo_policy")
    return cfg_


def api_rules():
    return [rule for rule in policy.list_rules() if rule.name.startswith("placement:")]


def operations():
    """(rule name, method, path) for every documented operation."""
    return [(rule.name, op["method"], op["path"]) for rule in api_rules() for op in rule.operations]


# -- the rule set --------------------------------------------------------------


def test_the_rules_are_upstreams_with_upstreams_defaults():
    rules = {rule.name: rule for rule in policy.list_rules()}
    assert set(rules) == set(BASE_RULES) | set(API_RULES)
    for name, (check_str, scope_types, deprecated) in BASE_RULES.items():
        rule = rules[name]
        assert (rule.check_str, rule.scope_types) == (check_str, scope_types), name
        if deprecated:
            assert rule.deprecated_rule.name == "rule:admin_api"
            assert rule.deprecated_rule.check_str == "role:admin"
            assert rule.deprecated_rule.deprecated_since == "W"
        else:
            assert rule.deprecated_rule is None
    for name, check_str in API_RULES.items():
        assert rules[name].check_str == check_str, name
        assert rules[name].scope_types == ["project"], name
        assert rules[name].deprecated_rule is None, name


def test_every_rule_is_documented():
    for rule in policy.list_rules():
        assert rule.description and rule.description.strip(), rule.name
    for rule in api_rules():
        assert isinstance(rule, oslo_policy.DocumentedRuleDefault), rule.name
        assert rule.operations, rule.name


def test_every_route_has_exactly_one_rule_and_every_rule_a_route(tmp_path):
    declared = {
        (operation.method, route.template)
        for route, operation in routes.operations()
        if route.template != "/"  # the version document is open to all
    }
    declared.add(("GET", "/metrics"))  # not the Placement API, but behind a rule too
    documented = [(method, path) for _name, method, path in operations()]
    assert len(documented) == len(set(documented)), "an operation documented twice"
    assert set(documented) == declared


def test_the_committed_sample_is_what_the_generator_writes(tmp_path):
    fresh = tmp_path / "policy.yaml.sample"
    generator.generate_sample(
        ["--config-file", str(GENERATOR_CONF), "--output-file", str(fresh)],
        conf=cfg.ConfigOpts(),
    )
    assert SAMPLE.read_text() == fresh.read_text(), (
        "etc/policy.yaml.sample is out of date: run "
        "'oslopolicy-sample-generator --config-file etc/policy-generator.conf'"
    )


# -- every handler asks first ----------------------------------------------------


def client(tmp_path, policy_text=None, **oslo_policy_overrides):
    application = app.create_app(
        make_conf(tmp_path, policy_text, **oslo_policy_overrides), UntouchableDatabase()
    )
    return httpx.Client(transport=httpx.WSGITransport(app=application), base_url="http://p")


def call(http, method, path, token, roles=None, system_scope=False):
    url = (
        path.replace("{uuid}", str(uuid.uuid4()))
        .replace("{consumer_uuid}", str(uuid.uuid4()))
        .replace("{root_uuid}", str(uuid.uuid4()))
        .replace("{resource_class}", "VCPU")
        .replace("{name}", "CUSTOM_GOLD")
    )
    if url == "/usages":
        url += f"?project_id={PROJECT}"
    headers = {"x-auth-token": token, "openstack-api-version": "placement latest"}
    if roles is not None:
        headers["x-roles"] = roles
    if system_scope:
        headers["openstack-system-scope"] = "all"
    body = b"{}" if method in ("PUT", "POST", "PATCH") else None
    if body is not None:
        headers["content-type"] = "application/json"
    return http.request(method, url, headers=headers, content=body)


@pytest.mark.parametrize("rule, method, path", operations())
def test_a_caller_without_roles_is_refused_before_anything_else(tmp_path, rule, method, path):
    answer = call(client(tmp_path), method, path, f"alice:{PROJECT}")
    assert answer.status_code == 403, answer.text
    error = answer.json()["errors"][0]
    assert error["title"] == "Forbidden"
    assert error["code"] == "placement.undefined_code"
    assert f"Policy does not allow {rule} to be performed." in error["detail"]


@pytest.mark.parametrize("rule, method, path", operations())
def test_a_system_scoped_admin_is_refused_everywhere(tmp_path, rule, method, path):
    answer = call(client(tmp_path), method, path, "root", "admin,member,reader", True)
    assert answer.status_code == 403, answer.text
    assert f"Policy does not allow {rule} to be performed." in answer.text


@pytest.mark.parametrize("rule, method, path", operations())
@pytest.mark.parametrize("roles", ["admin", "service"])
def test_admins_and_services_get_past_policy(tmp_path, rule, method, path, roles):
    answer = call(client(tmp_path), method, path, f"someone:{PROJECT}", roles)
    if rule == "placement:reshaper:reshape" and roles == "admin":
        assert answer.status_code == 403  # the new default: services only
    elif rule == "placement:metrics" and roles == "service":
        assert answer.status_code == 403  # the metrics are for admins
    else:
        assert answer.status_code != 403, answer.text


def test_the_legacy_default_lets_admins_reshape(tmp_path):
    http = client(tmp_path, enforce_new_defaults=False)
    answer = call(http, "POST", "/reshaper", "admin")
    assert answer.status_code == 400, answer.text  # past policy, to the body's schema


def test_usages_target_the_project_in_the_query(tmp_path):
    http = client(tmp_path)
    headers = {
        "x-auth-token": f"bob:{PROJECT}",
        "x-roles": "reader",
        "openstack-api-version": "placement latest",
    }
    own = http.get(f"/usages?project_id={PROJECT}", headers=headers)
    assert own.status_code == 500  # allowed: it reached the (untouchable) database
    other = http.get(f"/usages?project_id={OTHER_PROJECT}", headers=headers)
    assert other.status_code == 403
    # Policy before the query's schema, as upstream: no project is not yours.
    assert http.get("/usages", headers=headers).status_code == 403
    headers["x-roles"] = "admin"
    assert http.get("/usages", headers=headers).status_code == 400


def test_refusal_comes_after_the_version_accept_and_media_type(tmp_path):
    http = client(tmp_path)
    token = {"x-auth-token": f"alice:{PROJECT}"}
    assert http.get("/traits", headers=token).status_code == 404  # no /traits at 1.0
    latest = {**token, "openstack-api-version": "placement latest"}
    assert http.get("/traits", headers={**latest, "accept": "text/plain"}).status_code == 406
    answer = http.post(
        "/resource_providers", headers={**latest, "content-type": "text/plain"}, content=b"x"
    )
    assert answer.status_code == 415
    answer = http.delete(
        f"/resource_providers/{uuid.uuid4()}/inventories",
        headers={**token, "openstack-api-version": "placement 1.4"},
    )
    assert answer.status_code == 405


# -- policy files ---------------------------------------------------------------


def test_a_policy_file_overrides_a_default(tmp_path):
    http = client(tmp_path, '"placement:traits:list": "role:auditor"\n')
    headers = {"openstack-api-version": "placement latest"}
    auditor = call(http, "GET", "/traits", f"eve:{PROJECT}", "auditor")
    assert auditor.status_code == 500  # allowed, to the database
    admin = http.get("/traits", headers={**headers, "x-auth-token": "admin"})
    assert admin.status_code == 403


@pytest.mark.parametrize(
    "text",
    [
        "foo: [\n",  # not YAML
        "- a list\n- of rules\n",  # YAML, not a mapping
        "just words\n",
    ],
)
def test_a_malformed_policy_file_stops_the_service_at_start_up(tmp_path, text):
    settings = make_conf(tmp_path, text)
    with pytest.raises(policy.PolicyFileError) as caught:
        app.create_app(settings, UntouchableDatabase())
    message = str(caught.value)
    assert message.startswith(f"cannot load the policy file {tmp_path / 'policy.yaml'}: ")
    assert "\n" not in message
    settings.set_override("connection", f"sqlite:///{tmp_path}/p.db", group="placement_database")
    with pytest.raises(bootstrap.Failure, match="cannot load the policy file"):
        bootstrap.build_app(settings)  # what serve and the WSGI module do: one line, exit 1


def test_policy_show_fails_with_one_line_on_a_malformed_file(tmp_path, capsys):
    (tmp_path / "policy.yaml").write_text("foo: [\n")
    config = tmp_path / "placement.conf"
    config.write_text(f"[oslo_policy]\npolicy_file = {tmp_path / 'policy.yaml'}\n")
    assert cli.main(["policy", "show", "--config-file", str(config)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("placement-svc: error: cannot load the policy")


def test_a_rule_placement_does_not_have_is_warned_about_and_ignored(tmp_path, caplog):
    text = (
        '"placement:resource_provider:list": "@"\n'  # a typo: ..._providers:list
        '"is_auditor": "role:auditor"\n'  # an alias, used below
        '"placement:traits:list": "rule:is_auditor"\n'
    )
    with caplog.at_level(logging.WARNING, logger="placement_svc.policy"):
        http = client(tmp_path, text)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "placement:resource_provider:list" in warnings[0]
    assert "is_auditor" not in warnings[0]
    answer = call(http, "GET", "/resource_providers", f"alice:{PROJECT}")
    assert answer.status_code == 403
    assert "placement:resource_providers:list" in answer.text
    assert call(http, "GET", "/traits", f"eve:{PROJECT}", "auditor").status_code == 500


def test_policy_show_prints_the_effective_policy(tmp_path, capsys):
    (tmp_path / "policy.yaml").write_text('"placement:usages": "role:auditor"\n"extra": "@"\n')
    config = tmp_path / "placement.conf"
    config.write_text(
        f"[oslo_policy]\npolicy_file = {tmp_path / 'policy.yaml'}\nenforce_new_defaults = false\n"
    )
    assert cli.main(["policy", "show", "--config-file", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split('": ', 1)[0].strip('"') for line in lines if not line.startswith("#")]
    assert names == [rule.name for rule in policy.list_rules()] + ["extra"]
    assert '"placement:usages": "role:auditor"' in lines
    assert '"service_api": "(role:service or role:admin)"' in lines  # the legacy OR
    assert '"placement:reshaper:reshape": "rule:service_api"' in lines


def test_policy_show_with_the_new_defaults(tmp_path, capsys):
    config = tmp_path / "placement.conf"
    config.write_text(f"[oslo_policy]\npolicy_file = {tmp_path / 'none.yaml'}\n")
    assert cli.main(["policy", "show", "--config-file", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert '"service_api": "role:service"' in lines
    assert len(lines) == len(policy.list_rules())


# -- the context -----------------------------------------------------------------

KEYSTONE_HEADERS = {
    "HTTP_X_USER_ID": "u1",
    "HTTP_X_USER_DOMAIN_ID": "default",
    "HTTP_X_PROJECT_ID": PROJECT,
    "HTTP_X_PROJECT_DOMAIN_ID": "default",
    "HTTP_X_ROLES": "reader, Member",
    "HTTP_X_IS_ADMIN_PROJECT": "False",
    "HTTP_X_SERVICE_USER_ID": "nova",
    "HTTP_X_SERVICE_ROLES": "service",
    "HTTP_X_SERVICE_PROJECT_ID": "services",
}


@pytest.mark.parametrize(
    "environ",
    [
        KEYSTONE_HEADERS,
        {"HTTP_X_USER_ID": "u1", "HTTP_X_DOMAIN_ID": "d1", "HTTP_X_ROLES": "admin"},
        {"HTTP_X_USER_ID": "u1", "HTTP_OPENSTACK_SYSTEM_SCOPE": "all", "HTTP_X_ROLES": "admin"},
        {"HTTP_X_USER": "u1", "HTTP_X_TENANT_ID": PROJECT},
    ],
    ids=["project", "domain", "system", "old-names"],
)
def test_credentials_are_what_oslo_context_would_give(environ):
    ours = RequestContext.from_environ(environ, "req-1").to_policy_values()
    theirs = dict(oslo_context.RequestContext.from_environ(environ).to_policy_values())
    assert ours == theirs


def test_can_defaults_the_target_to_the_callers_project(tmp_path):
    enforcer = policy.make_enforcer(make_conf(tmp_path))
    ctx = RequestContext.from_environ(
        {"HTTP_X_USER_ID": "u1", "HTTP_X_PROJECT_ID": PROJECT, "HTTP_X_ROLES": "reader"},
        "req-1",
        enforcer,
    )
    ctx.can("placement:usages")  # its own project
    with pytest.raises(Exception, match="Policy does not allow placement:usages"):
        ctx.can("placement:usages", {"project_id": OTHER_PROJECT})
    with pytest.raises(oslo_policy.PolicyNotRegistered):
        ctx.can("placement:no_such_rule")
