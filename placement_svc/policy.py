"""Policy enforcement: one oslo.policy Enforcer per application.

The rules, their defaults and scope types are in ``placement_svc.policies``;
``[oslo_policy]`` (policy_file, policy_dirs, enforce_new_defaults, and
enforce_scope where the installed oslo.policy still has it) decides how they
apply, exactly as in upstream Placement, because the same library does the
work. A handler asks ``RequestContext.can(rule, target)``, which ends here.

The policy file is read when the application is built, so a file oslo.policy
cannot parse stops the service at start-up with one clear line; afterwards
it is re-read when it changes. Upstream's oslo.policy looks for changes on
every request (it searches the configuration directories for the policy
file and each policy.d directory: about a third of the 80 µs each decision
took); here the policy files are looked at for changes at most once a
second (``RECHECK``), so a changed file takes effect on the first request a
second or less after the change. A ``force_reload`` always looks.

Decisions are remembered until the rules are next loaded (each time the
files are looked at, or rules are set, registered or cleared): the same
rule, target and credentials, under the same enforce_new_defaults (and
enforce_scope), get the same answer for a dict lookup. Not when a rule uses
a check whose answer can change for the same inputs (``http:``, ``https:``,
or any check class that is not one of oslo.policy's own), nor for a target
or credentials holding anything but strings, integers, booleans, None and
lists of those; those are asked of oslo.policy each time.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, MutableMapping
from typing import Any

from oslo_config import cfg
from oslo_policy import _checks, policy
from oslo_policy import opts as policy_opts

from placement_svc import errors, policies, routes

LOG = logging.getLogger(__name__)

# Seconds between two looks at the policy files for changes.
RECHECK = 1.0
# Decisions remembered per enforcer; when full, they are all forgotten.
MEMO_SIZE = 4096
# The clock RECHECK is measured on (a module attribute, for the tests).
_clock = time.monotonic

# oslo.policy's own checks whose answer depends only on the rules, the target
# and the credentials. Exact classes: a subclass may do anything.
_DETERMINISTIC = frozenset(
    {
        _checks.TrueCheck,
        _checks.FalseCheck,
        _checks.NotCheck,
        _checks.AndCheck,
        _checks.OrCheck,
        _checks.RuleCheck,
        _checks.RoleCheck,
        _checks.GenericCheck,
    }
)


def list_rules() -> list[policy.RuleDefault]:
    """Placement's rules (``placement_svc.policies``), each API rule
    documented with the operations routes.py says it guards: the
    ``oslo.policy.policies`` entry point (namespace ``placement``)."""
    guarded = routes.by_policy()
    found = []
    for rule in policies.list_rules():
        operations = guarded.get(rule.name)
        if operations and not isinstance(rule, policy.DocumentedRuleDefault):
            rule = policy.DocumentedRuleDefault(
                name=rule.name,
                check_str=rule.check_str,
                description=rule.description,
                operations=operations,
                scope_types=rule.scope_types,
            )
        found.append(rule)
    return found


class PolicyFileError(RuntimeError):
    """The policy file (or a policy.d file) cannot be used."""


class Enforcer(policy.Enforcer):
    """oslo.policy's Enforcer, looking at the policy files at most once every
    ``RECHECK`` seconds, with a memo of decisions for ``authorize``.

    oslo.policy's ``enforce`` (and so ``authorize``) calls ``load_rules()``
    first, every time; that is where the throttle is. Anything that changes
    the rules some other way (``set_rules``, ``register_default``,
    ``clear``) lets the next ``load_rules()`` through at once and forgets
    the decisions, so oslo.policy's own follow-up work (registered defaults
    filled in, ``check_rules``) happens when it would upstream.
    """

    # When the files were last looked at (None: never, or since a change).
    _checked_at: float | None = None
    # Decisions, key -> allowed; None while they must not be remembered.
    _decisions: dict[tuple, bool] | None = None
    # Whether [oslo_policy] has enforce_scope (gone from newer oslo.policy).
    _has_enforce_scope: bool = False

    def load_rules(self, force_reload: bool = False) -> None:
        now = _clock()
        last = self._checked_at
        if not force_reload and last is not None and now - last < RECHECK:
            return
        self._checked_at = now  # other threads need not look meanwhile
        try:
            super().load_rules(force_reload)
        except BaseException:
            # Look again on the next call, as upstream does on every call.
            self._invalidate()
            raise
        self._checked_at = now  # set_rules, called by a reload, cleared it
        self._has_enforce_scope = "enforce_scope" in self.conf.oslo_policy
        # A new dict, not .clear(): a decision being made under the old
        # rules on another thread lands in the old one, which is dropped.
        self._decisions = {} if _deterministic(self.rules) else None

    def set_rules(
        self,
        rules: MutableMapping[str, _checks.BaseCheck],
        overwrite: bool = True,
        use_conf: bool = False,
    ) -> None:
        super().set_rules(rules, overwrite, use_conf)
        self._invalidate()

    def register_default(self, default: policy.RuleDefault) -> None:
        super().register_default(default)
        self._invalidate()

    def clear(self) -> None:
        super().clear()
        self._invalidate()

    def recheck(self) -> None:
        """Look at the policy files now, whenever they were last looked at:
        what upstream's ``load_rules()`` does (not a forced re-read)."""
        self._checked_at = None
        self.load_rules()

    def _invalidate(self) -> None:
        self._checked_at = None
        self._decisions = None

    def decide(self, action: str, target: Any, credentials: Any) -> bool:
        """Whether ``action`` is allowed: ``_ask``'s answer, remembered."""
        if action not in self.registered_rules:
            raise policy.PolicyNotRegistered(action)
        self.load_rules()
        decisions = self._decisions
        key = None
        if decisions is not None and isinstance(credentials, dict) and isinstance(target, dict):
            # What enforce does to the credentials, done first so that the
            # key is the same before and after and a remembered decision
            # leaves them as enforce would have.
            if credentials.get("system_scope"):
                credentials["system"] = credentials.get("system_scope")
            frozen_target = _frozen(target)
            frozen_credentials = _frozen(credentials)
            if frozen_target is not None and frozen_credentials is not None:
                opts = self.conf.oslo_policy
                key = (
                    action,
                    frozen_target,
                    frozen_credentials,
                    opts.enforce_scope if self._has_enforce_scope else None,
                    opts.enforce_new_defaults,
                )
                known = decisions.get(key)
                if known is not None:
                    return known
        allowed = _ask(self, action, target, credentials)
        if key is not None:
            if len(decisions) >= MEMO_SIZE:
                decisions.clear()
            decisions[key] = allowed
        return allowed


def _deterministic(rules: policy.Rules) -> bool:
    """Whether every check in ``rules`` (and its default rule) is one of
    oslo.policy's own whose answer depends on the target and credentials
    alone: no ``http:``/``https:`` check, no check class of anyone else's."""
    pending: list[Any] = list(rules.values())
    if isinstance(rules.default_rule, _checks.BaseCheck):
        pending.append(rules.default_rule)
    while pending:
        check = pending.pop()
        if type(check) not in _DETERMINISTIC:
            return False
        pending.extend(getattr(check, "rules", None) or ())
        inner = getattr(check, "rule", None)
        if inner is not None:
            pending.append(inner)
    return True


# Not float: 0.0 == -0.0, but oslo.policy compares str(value).
_SCALARS = frozenset({bool, int})


def _frozen(values: Mapping) -> tuple | None:
    """``values`` as a hashable key: name, value, name, value... in the order
    of the sorted names. Equal only if oslo.policy cannot tell them apart:
    types are kept (1, True and "1" differ, and so do a list and a tuple).
    None if a value is anything but a string, None, an integer, a boolean or
    a list or tuple of those (a dict, a set, a float, an object...)."""
    try:
        names = sorted(values)
    except TypeError:  # names of types that do not sort together
        return None
    flat: list[Any] = []
    for name in names:
        value = values[name]
        kind = type(value)
        if kind is str or value is None:
            flat.append(name)
            flat.append(value)
        elif kind is list or kind is tuple:
            members: list[Any] = [kind]
            for member in value:
                member_kind = type(member)
                if member_kind is str or member is None:
                    members.append(member)
                elif member_kind in _SCALARS:
                    members.append((member_kind, member))
                else:
                    return None
            flat.append(name)
            flat.append(tuple(members))
        elif kind in _SCALARS:
            flat.append(name)
            flat.append((kind, value))
        else:
            return None
    return tuple(flat)


def _ask(enforcer: policy.Enforcer, action: str, target: Any, credentials: Any) -> bool:
    """oslo.policy's answer: True, or False for a refusal (a rule that does not
    allow it, or a token of the wrong scope). PolicyNotRegistered and any
    other exception pass through."""
    try:
        enforcer.authorize(action, target, credentials, do_raise=True)
    except (policy.PolicyNotAuthorized, policy.InvalidScope):
        return False
    return True


def make_enforcer(conf, rules=None) -> Enforcer:
    """An Enforcer over ``conf`` with placement's defaults and the policy file loaded."""
    enforcer = Enforcer(conf)
    # Every base rule changed its default in Wallaby; saying so on each load
    # would only fill the logs (upstream silences this too).
    enforcer.suppress_default_change_warnings = True
    enforcer.register_defaults(rules if rules is not None else list_rules())
    try:
        enforcer.load_rules()
    except Exception as exc:  # noqa: BLE001 - YAML, type and I/O errors alike
        where = enforcer.policy_path or conf.oslo_policy.policy_file
        if isinstance(exc, (AttributeError, TypeError)):  # YAML, but not a mapping
            reason = "it must be a mapping of rule names to check strings"
        else:
            reason = " ".join(str(exc).split()) or type(exc).__name__
        raise PolicyFileError(f"cannot load the policy file {where}: {reason}") from exc
    unused = unused_file_rules(enforcer)
    if unused:
        # oslo.policy itself says nothing (only oslopolicy-validator does);
        # an operator's typo deserves a line in the log.
        LOG.warning(
            "The policy files define rules placement does not have; they are ignored: %s",
            ", ".join(unused),
        )
    return enforcer


def unused_file_rules(enforcer: policy.Enforcer) -> list[str]:
    """Names the policy files define that no placement rule is or refers to.

    oslo.policy keeps them but never consults them: most likely a typo or a
    rule of another service. A name other rules refer to (``rule:NAME``) is
    an alias, and used; so are the default rule and deprecated names.
    """
    known = set(enforcer.registered_rules)
    known.add(enforcer.conf.oslo_policy.policy_default_rule)
    for default in enforcer.registered_rules.values():
        if default.deprecated_rule is not None:
            known.add(default.deprecated_rule.name)
    referenced = set()
    for check in enforcer.rules.values():
        _collect_references(check, referenced)
    return sorted(set(enforcer.file_rules) - known - referenced)


def _collect_references(check, found: set) -> None:
    if getattr(check, "kind", None) == "rule":
        found.add(check.match)
    for sub in getattr(check, "rules", None) or ():
        _collect_references(sub, found)
    inner = getattr(check, "rule", None)
    if inner is not None:
        _collect_references(inner, found)


def authorize(enforcer, action: str, target: dict, credentials: dict) -> None:
    """Raise errors.Forbidden, with upstream's message, unless ``action`` is allowed.

    A token of the wrong scope (a system-scoped token on a project rule) is
    refused the same way. An unregistered ``action`` is a programming error
    and raises oslo.policy's PolicyNotRegistered. ``make_enforcer``'s
    enforcer remembers the decision (``Enforcer.decide``); any other
    oslo.policy Enforcer is asked each time.
    """
    if enforcer is None:  # fail closed: a context built without the application's enforcer
        raise errors.Forbidden(f"Policy does not allow {action} to be performed.")
    if isinstance(enforcer, Enforcer):
        allowed = enforcer.decide(action, target, credentials)
    else:  # a plain oslo.policy Enforcer: no memo
        allowed = _ask(enforcer, action, target, credentials)
    if not allowed:
        LOG.debug(
            "Policy check for %s failed with credentials %s",
            action,
            {k: v for k, v in credentials.items() if v},
        )
        raise errors.Forbidden(f"Policy does not allow {action} to be performed.")


def effective_rules(enforcer: policy.Enforcer) -> list[tuple[str, str]]:
    """(name, check) for every rule as it is enforced now: placement's rules in
    their documented order, then whatever else the policy files define."""
    if isinstance(enforcer, Enforcer):
        enforcer.recheck()  # the files as they are now, not as a second ago
    else:
        enforcer.load_rules()
    names = list(enforcer.registered_rules)
    names += sorted(name for name in enforcer.rules if name not in enforcer.registered_rules)
    return [(name, str(enforcer.rules[name])) for name in names if name in enforcer.rules]


def render_effective(enforcer: policy.Enforcer) -> str:
    """``effective_rules`` as policy-file YAML (one ``"name": "check"`` per line)."""
    lines = []
    registered = enforcer.registered_rules
    extra_started = False
    for name, check in effective_rules(enforcer):
        if name not in registered and not extra_started:
            lines.append("# Defined by the policy files, not placement rules:")
            extra_started = True
        lines.append(f"{json.dumps(name)}: {json.dumps(check)}")
    return "\n".join(lines) + "\n"


def get_enforcer() -> policy.Enforcer:
    """The ``oslo.policy.enforcer`` entry point (namespace ``placement``) for
    oslopolicy-policy-generator, -validator and -list-redundant.

    Those tools read the policy options from oslo.config's global CONF, so
    this loads placement.conf from the standard places into it, as
    upstream's entry point does.
    """
    cfg.CONF([], project="placement")
    policy_opts.set_defaults(cfg.CONF)
    return make_enforcer(cfg.CONF)
