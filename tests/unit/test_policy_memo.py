"""Policy, without its per-request cost: the policy files looked at once a
second at most, decisions remembered until the rules are next loaded.

Every decision here is compared with a plain oslo.policy Enforcer's (what
upstream Placement uses, looking at the files on every request); the speed
is shown by counting what is not done (file-system lookups, oslo.policy
checks), not by timing.
"""

from __future__ import annotations

import logging
import os

import pytest
from oslo_context import context as oslo_context
from oslo_policy import _checks, _external
from oslo_policy import policy as oslo_policy

from placement_svc import errors, policy
from placement_svc.http.context import RequestContext
from tests.unit.test_policy import OTHER_PROJECT, PROJECT, make_conf

LIST = "placement:resource_providers:list"


class Clock:
    """policy._clock, moved by hand."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture(autouse=True)
def clock(monkeypatch):
    """Time stands still unless a test moves it: no test here depends on
    how fast it runs (a slow run would otherwise cross a RECHECK)."""
    fake = Clock()
    monkeypatch.setattr(policy, "_clock", fake)
    return fake


def write(path, text, age=0):
    """Write a policy file with an mtime ``age`` seconds in the future of
    the last one, so oslo.policy (which compares mtimes) sees a change."""
    before = path.stat().st_mtime if path.exists() else 0
    path.write_text(text)
    when = max(before + 10, path.stat().st_mtime) + age
    os.utime(path, (when, when))


def plain_enforcer(settings):
    """What upstream uses: oslo.policy's Enforcer, built as make_enforcer builds ours."""
    enforcer = oslo_policy.Enforcer(settings)
    enforcer.suppress_default_change_warnings = True
    enforcer.register_defaults(policy.list_rules())
    enforcer.load_rules()
    return enforcer


def outcome(enforcer, action, target, credentials):
    """What authorize does: None, or the exception's type and message."""
    try:
        policy.authorize(enforcer, action, target, credentials)
    except Exception as exc:  # noqa: BLE001 - compared, whatever it is
        return type(exc), str(exc)
    return None


def creds(roles="", project=PROJECT, **headers):
    environ = {"HTTP_X_USER_ID": "u1", "HTTP_X_ROLES": roles}
    if project:
        environ["HTTP_X_PROJECT_ID"] = project
    environ.update({"HTTP_" + k.upper(): v for k, v in headers.items()})
    return RequestContext.from_environ(environ, "req-1").to_policy_values()


CREDENTIALS = {
    "admin": lambda: creds("admin"),
    "service": lambda: creds("service"),
    "reader": lambda: creds("reader"),
    "member": lambda: creds("member, reader"),
    "no-roles": lambda: creds(""),
    "system-admin": lambda: creds("admin,member,reader", None, openstack_system_scope="all"),
    "domain-admin": lambda: creds("admin", None, x_domain_id="d1"),
    "nova": lambda: creds(
        "reader", x_service_user_id="nova", x_service_roles="service", x_service_project_id="svc"
    ),
    # as oslo.context gives them (not a dict: oslo.policy asked each time)
    "oslo-context-admin": lambda: oslo_context.RequestContext(
        user_id="u1", project_id=PROJECT, roles=["admin", "member", "reader"]
    ).to_policy_values(),
}
TARGETS = [
    {"project_id": PROJECT, "user_id": "u1"},
    {"project_id": OTHER_PROJECT, "user_id": "u2"},
    {},
]


# -- the same decisions ------------------------------------------------------------


@pytest.mark.parametrize("new_defaults", [True, False])
def test_remembered_decisions_are_oslo_policys(tmp_path, new_defaults):
    settings = make_conf(tmp_path, enforce_new_defaults=new_defaults)
    ours, theirs = policy.make_enforcer(settings), plain_enforcer(settings)
    asked = 0
    for name in [rule.name for rule in policy.list_rules()] + ["placement:no_such_rule"]:
        for who, make in CREDENTIALS.items():
            for target in TARGETS:
                expected = outcome(theirs, name, dict(target), make())
                for attempt in ("first", "remembered"):
                    got = outcome(ours, name, dict(target), make())
                    assert got == expected, (name, who, target, attempt)
                asked += 1
    assert asked == (len(policy.list_rules()) + 1) * len(CREDENTIALS) * len(TARGETS)
    # Remembered indeed: one decision per (rule, dict credentials, target).
    dict_credentials = len(CREDENTIALS) - 1
    assert len(ours._decisions) == len(policy.list_rules()) * dict_credentials * len(TARGETS)


def test_a_remembered_refusal_is_the_same_forbidden_and_the_same_log_line(tmp_path, caplog):
    settings = make_conf(tmp_path)
    ours, theirs = policy.make_enforcer(settings), plain_enforcer(settings)
    target = {"project_id": PROJECT}
    messages = []
    for enforcer in (theirs, ours, ours):
        credentials = CREDENTIALS["system-admin"]()
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="placement_svc.policy"):
            with pytest.raises(errors.Forbidden) as refused:
                policy.authorize(enforcer, LIST, target, credentials)
        assert str(refused.value) == f"Policy does not allow {LIST} to be performed."
        # No oslo.policy exception shown chained to it, as before.
        forbidden = refused.value
        assert forbidden.__cause__ is None
        assert forbidden.__context__ is None or forbidden.__suppress_context__
        logged = [r.getMessage() for r in caplog.records if r.name == "placement_svc.policy"]
        messages.append(logged)
        # oslo.policy's enforce adds "system" to the credentials; so does a remembered one.
        assert credentials["system"] == "all"
    assert messages[0] == messages[1] == messages[2]
    assert len(messages[0]) == 1 and "Policy check for " + LIST in messages[0][0]
    assert len(ours._decisions) == 1


def test_an_unregistered_rule_is_never_remembered(tmp_path):
    ours = policy.make_enforcer(make_conf(tmp_path))
    for _ in range(2):
        with pytest.raises(oslo_policy.PolicyNotRegistered):
            policy.authorize(ours, "placement:no_such_rule", {}, creds("admin"))
    assert ours._decisions == {}


def test_a_plain_oslo_enforcer_still_works(tmp_path):
    theirs = plain_enforcer(make_conf(tmp_path))
    policy.authorize(theirs, LIST, {}, creds("admin"))
    with pytest.raises(errors.Forbidden, match="Policy does not allow " + LIST):
        policy.authorize(theirs, LIST, {}, creds("reader"))
    with pytest.raises(oslo_policy.PolicyNotRegistered):
        policy.authorize(theirs, "placement:no_such_rule", {}, creds("admin"))


@pytest.mark.parametrize(
    "target, extra",
    [
        ({"project_id": PROJECT, "tags": {"a": 1}}, {}),  # a dict: not hashable
        ({"project_id": PROJECT}, {"groups": {"g1", "g2"}}),  # a set
        ({"project_id": PROJECT, "owner": object()}, {}),  # hashable, but what is it?
        ({"project_id": PROJECT}, {"roles": ["reader", ["nested"]]}),
    ],
    ids=["dict-in-target", "set-in-credentials", "object-in-target", "nested-list"],
)
def test_values_that_cannot_be_keys_are_asked_each_time(tmp_path, target, extra):
    ours = policy.make_enforcer(make_conf(tmp_path))
    theirs = plain_enforcer(make_conf(tmp_path))
    for roles in ("admin", "reader"):
        credentials = {**creds(roles), **extra}
        for _ in range(2):
            assert outcome(ours, LIST, target, dict(credentials)) == outcome(
                theirs, LIST, target, dict(credentials)
            )
    assert ours._decisions == {}


def test_values_oslo_policy_tells_apart_are_remembered_apart(tmp_path):
    # GenericCheck compares str(value) and walks lists, not tuples: 1, True,
    # "1", 0.0 and -0.0, a list or a tuple of roles must not share a decision.
    text = (
        '"placement:traits:list": "True:%(flag)s"\n'
        '"placement:traits:delete": "\'0.0\':%(flag)s"\n'
        '"placement:traits:show": "roles:reader"\n'
    )
    ours = policy.make_enforcer(make_conf(tmp_path, text))
    theirs = plain_enforcer(make_conf(tmp_path, text))
    for rule in ("placement:traits:list", "placement:traits:delete"):
        for flag in (1, True, "True", 1.0, "1", None, 0.0, -0.0, 0, False):
            for _ in range(2):
                target = {"flag": flag}
                assert outcome(ours, rule, target, creds("admin")) == outcome(
                    theirs, rule, target, creds("admin")
                ), (rule, flag)
    for roles in (["reader"], ("reader",), ["READER"]):
        for _ in range(2):
            credentials = {**creds(), "roles": roles}
            assert outcome(ours, "placement:traits:show", {}, dict(credentials)) == outcome(
                theirs, "placement:traits:show", {}, dict(credentials)
            ), roles


# -- checks that may answer differently ---------------------------------------------


class Post:
    """requests.post for oslo.policy's HttpCheck: counts, answers True then False."""

    def __init__(self):
        self.calls = 0

    def __call__(self, url, **kwargs):
        self.calls += 1
        answer = self.calls % 2 == 1

        class Response:
            text = "True" if answer else "False"

            def close(self):
                pass

        return Response()


def test_an_http_check_is_asked_every_time(tmp_path, monkeypatch):
    post = Post()
    monkeypatch.setattr(_external.requests, "post", post)
    text = f'"{LIST}": "http://127.0.0.1:1/check"\n'
    ours = policy.make_enforcer(make_conf(tmp_path, text))
    assert ours._decisions is None
    credentials = creds("admin")
    policy.authorize(ours, LIST, {}, dict(credentials))  # True
    with pytest.raises(errors.Forbidden):
        policy.authorize(ours, LIST, {}, dict(credentials))  # False
    policy.authorize(ours, LIST, {}, dict(credentials))  # True
    assert post.calls == 3
    # The http check is anywhere in the rules: other rules are not remembered either.
    policy.authorize(ours, "placement:traits:list", {}, dict(credentials))
    assert ours._decisions is None


def test_an_https_check_referred_to_by_another_rule_is_asked_every_time(tmp_path, monkeypatch):
    post = Post()
    monkeypatch.setattr(_external.requests, "post", post)
    text = (
        '"remote": "https://127.0.0.1:1/check"\n'
        f'"{LIST}": "not role:nobody and (rule:remote or role:nobody)"\n'
    )
    ours = policy.make_enforcer(make_conf(tmp_path, text))
    results = [outcome(ours, LIST, {}, creds("admin")) for _ in range(4)]
    assert post.calls == 4
    assert [r is None for r in results] == [True, False, True, False]


class Coin(_checks.Check):
    """Someone's own check: heads, tails, heads..."""

    tosses = 0

    def __call__(self, target, creds, enforcer, current_rule=None):
        Coin.tosses += 1
        return Coin.tosses % 2 == 1


def test_a_check_class_not_oslo_policys_own_is_asked_every_time(tmp_path, monkeypatch):
    monkeypatch.setitem(_checks.registered_checks, "coin", Coin)
    monkeypatch.setattr(Coin, "tosses", 0)
    ours = policy.make_enforcer(make_conf(tmp_path, f'"{LIST}": "coin:toss"\n'))
    assert ours._decisions is None
    results = [outcome(ours, LIST, {}, creds("admin")) for _ in range(4)]
    assert Coin.tosses == 4
    assert [r is None for r in results] == [True, False, True, False]


def test_an_http_check_removed_from_the_file_lets_decisions_be_remembered(tmp_path, clock):
    path = tmp_path / "policy.yaml"
    settings = make_conf(tmp_path, f'"{LIST}": "http://127.0.0.1:1/check"\n')
    ours = policy.make_enforcer(settings)
    assert ours._decisions is None
    write(path, f'"{LIST}": "role:admin"\n')
    clock.now += policy.RECHECK
    policy.authorize(ours, LIST, {}, creds("admin"))
    assert len(ours._decisions) == 1


# -- looking at the files once a second ------------------------------------------------


def test_a_changed_policy_file_takes_effect_once_recheck_has_passed(tmp_path, clock):
    path = tmp_path / "policy.yaml"
    ours = policy.make_enforcer(make_conf(tmp_path, '"placement:traits:list": "role:auditor"\n'))
    auditor = creds("auditor")
    policy.authorize(ours, "placement:traits:list", {}, dict(auditor))
    write(path, '"placement:traits:list": "role:observer"\n')
    clock.now += policy.RECHECK * 0.99
    policy.authorize(ours, "placement:traits:list", {}, dict(auditor))  # not looked at yet
    clock.now += policy.RECHECK * 0.02
    with pytest.raises(errors.Forbidden):
        policy.authorize(ours, "placement:traits:list", {}, dict(auditor))
    policy.authorize(ours, "placement:traits:list", {}, creds("observer"))


def test_with_no_recheck_window_a_change_is_seen_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(policy, "RECHECK", 0.0)
    path = tmp_path / "policy.yaml"
    ours = policy.make_enforcer(make_conf(tmp_path, '"placement:traits:list": "role:auditor"\n'))
    policy.authorize(ours, "placement:traits:list", {}, creds("auditor"))
    write(path, '"placement:traits:list": "role:observer"\n')
    with pytest.raises(errors.Forbidden):
        policy.authorize(ours, "placement:traits:list", {}, creds("auditor"))


def test_with_a_long_recheck_window_a_change_waits_but_a_forced_reload_does_not(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(policy, "RECHECK", 3600.0)
    path = tmp_path / "policy.yaml"
    settings = make_conf(tmp_path, '"placement:traits:list": "role:auditor"\n')
    ours, theirs = policy.make_enforcer(settings), plain_enforcer(settings)
    policy.authorize(ours, "placement:traits:list", {}, creds("auditor"))
    write(path, '"placement:traits:list": "role:observer"\n')
    with pytest.raises(errors.Forbidden):  # upstream sees it at once
        policy.authorize(theirs, "placement:traits:list", {}, creds("auditor"))
    for _ in range(3):  # we, not within the window
        policy.authorize(ours, "placement:traits:list", {}, creds("auditor"))
    ours.load_rules(force_reload=True)
    with pytest.raises(errors.Forbidden):
        policy.authorize(ours, "placement:traits:list", {}, creds("auditor"))


def test_policy_show_sees_the_file_as_it_is_now(tmp_path, monkeypatch):
    monkeypatch.setattr(policy, "RECHECK", 3600.0)
    path = tmp_path / "policy.yaml"
    ours = policy.make_enforcer(make_conf(tmp_path, '"placement:traits:list": "role:auditor"\n'))
    write(path, '"placement:traits:list": "role:observer"\n')
    assert ("placement:traits:list", "role:observer") in policy.effective_rules(ours)
    with pytest.raises(errors.Forbidden):
        policy.authorize(ours, "placement:traits:list", {}, creds("auditor"))


def test_a_policy_d_file_takes_effect_once_recheck_has_passed(tmp_path, clock):
    policy_d = tmp_path / "policy.d"
    policy_d.mkdir()
    settings = make_conf(tmp_path, policy_dirs=[str(policy_d)])
    ours = policy.make_enforcer(settings)
    policy.authorize(ours, LIST, {}, creds("admin"))
    write(policy_d / "10-lock.yaml", f'"{LIST}": "!"\n')
    os.utime(policy_d, (os.path.getmtime(policy_d) + 20,) * 2)
    policy.authorize(ours, LIST, {}, creds("admin"))
    clock.now += policy.RECHECK
    with pytest.raises(errors.Forbidden):
        policy.authorize(ours, LIST, {}, creds("admin"))


def test_a_file_that_breaks_fails_the_request_that_sees_it_as_upstream(tmp_path, clock):
    # As oslo.policy: the request that first sees the broken file fails;
    # then the old rules stay (oslo.policy has cached the file's mtime).
    path = tmp_path / "policy.yaml"
    settings = make_conf(tmp_path, '"placement:traits:list": "role:auditor"\n')
    ours, theirs = policy.make_enforcer(settings), plain_enforcer(settings)
    write(path, "foo: [\n")
    clock.now += policy.RECHECK
    for enforcer in (theirs, ours):
        with pytest.raises(ValueError):
            policy.authorize(enforcer, "placement:traits:list", {}, creds("auditor"))
        assert outcome(enforcer, "placement:traits:list", {}, creds("auditor")) is None


# -- the memo's life ---------------------------------------------------------------------


def test_the_memo_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(policy, "MEMO_SIZE", 3)
    ours = policy.make_enforcer(make_conf(tmp_path))
    for n in range(3):
        policy.authorize(ours, LIST, {"n": str(n)}, creds("admin"))
    assert len(ours._decisions) == 3
    policy.authorize(ours, LIST, {"n": "3"}, creds("admin"))
    assert len(ours._decisions) == 1


def test_the_memo_is_emptied_when_the_rules_are_loaded(tmp_path, clock):
    ours = policy.make_enforcer(make_conf(tmp_path))
    policy.authorize(ours, LIST, {}, creds("admin"))
    first = ours._decisions
    assert len(first) == 1
    clock.now += policy.RECHECK
    policy.authorize(ours, LIST, {"other": "x"}, creds("admin"))
    assert ours._decisions is not first and len(ours._decisions) == 1


def test_set_rules_is_seen_at_once(tmp_path, clock):
    ours = policy.make_enforcer(make_conf(tmp_path))
    policy.authorize(ours, LIST, {}, creds("admin"))
    ours.set_rules(oslo_policy.Rules.from_dict({LIST: "role:auditor"}), overwrite=False)
    assert ours._decisions is None
    with pytest.raises(errors.Forbidden):
        policy.authorize(ours, LIST, {}, creds("admin"))
    policy.authorize(ours, LIST, {}, creds("auditor"))


def test_a_rule_registered_later_is_enforced_at_once(tmp_path, clock):
    settings = make_conf(tmp_path)
    ours, theirs = policy.make_enforcer(settings), plain_enforcer(settings)
    policy.authorize(ours, LIST, {}, creds("admin"))
    late = oslo_policy.RuleDefault("placement:late", "role:late")
    for enforcer in (theirs, ours):
        enforcer.register_default(late)
        assert outcome(enforcer, "placement:late", {}, creds("late")) is None
        assert outcome(enforcer, "placement:late", {}, creds("admin"))[0] is errors.Forbidden


def test_after_clear_the_next_load_goes_through(tmp_path, clock, monkeypatch):
    settings = make_conf(tmp_path)
    ours, theirs = policy.make_enforcer(settings), plain_enforcer(settings)
    policy.authorize(ours, LIST, {}, creds("admin"))
    loads = []
    real = oslo_policy.Enforcer.load_rules

    def counted(self, *args, **kwargs):
        loads.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(oslo_policy.Enforcer, "load_rules", counted)
    ours.clear()
    assert ours._decisions is None
    with pytest.raises(oslo_policy.PolicyNotRegistered):  # clear() forgets the defaults
        policy.authorize(ours, LIST, {}, creds("admin"))
    assert loads == []
    # Whatever oslo.policy makes of a cleared enforcer, ours makes the same.
    theirs.clear()
    for enforcer in (theirs, ours):
        enforcer.register_defaults(policy.list_rules())
    loads.clear()
    assert outcome(ours, LIST, {}, creds("admin")) == outcome(theirs, LIST, {}, creds("admin"))
    assert loads.count(ours) == 1  # the first look since clear() went through
    for enforcer in (theirs, ours):
        enforcer.load_rules(force_reload=True)
    assert outcome(ours, LIST, {}, creds("admin")) is None
    assert outcome(theirs, LIST, {}, creds("admin")) is None


# -- what a remembered decision does not do ------------------------------------------


def test_a_repeated_decision_touches_no_file_and_runs_no_check(tmp_path, clock, monkeypatch):
    ours = policy.make_enforcer(make_conf(tmp_path, '"placement:traits:list": "role:auditor"\n'))
    counts = {"exists": 0, "getmtime": 0, "check": 0}

    def counting(name, real):
        def wrapper(*args, **kwargs):
            counts[name] += 1
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(os.path, "exists", counting("exists", os.path.exists))
    monkeypatch.setattr(os.path, "getmtime", counting("getmtime", os.path.getmtime))
    monkeypatch.setattr(_checks, "_check", counting("check", _checks._check))

    def asked(credentials):
        for name in counts:
            counts[name] = 0
        policy.authorize(ours, LIST, {"project_id": PROJECT}, credentials)
        return dict(counts)

    clock.now += policy.RECHECK
    first = asked(creds("admin"))
    assert first["exists"] > 0 and first["getmtime"] > 0 and first["check"] > 0
    assert asked(creds("admin")) == {"exists": 0, "getmtime": 0, "check": 0}
    other = asked(creds("service"))  # another caller: asks oslo.policy, no file looked at
    assert other["exists"] == other["getmtime"] == 0 and other["check"] > 0
    clock.now += policy.RECHECK
    again = asked(creds("admin"))  # the next look: files, and the decision asked again
    assert again["getmtime"] > 0 and again["check"] > 0
