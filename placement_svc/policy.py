"""Policy enforcement: one oslo.policy Enforcer per application.

The rules, their defaults and scope types are in ``placement_svc.policies``;
``[oslo_policy]`` (policy_file, policy_dirs, enforce_new_defaults, and
enforce_scope where the installed oslo.policy still has it) decides how they
apply, exactly as in upstream Placement, because the same library does the
work. A handler asks ``RequestContext.can(rule, target)``, which ends here.

The policy file is read when the application is built, so a file oslo.policy
cannot parse stops the service at start-up with one clear line; afterwards
oslo.policy re-reads it whenever it changes, as upstream's does.
"""

from __future__ import annotations

import json
import logging

from oslo_config import cfg
from oslo_policy import opts as policy_opts
from oslo_policy import policy

from placement_svc import errors, policies, routes

LOG = logging.getLogger(__name__)


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


def make_enforcer(conf, rules=None) -> policy.Enforcer:
    """An Enforcer over ``conf`` with placement's defaults and the policy file loaded."""
    enforcer = policy.Enforcer(conf)
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
    and raises oslo.policy's PolicyNotRegistered.
    """
    if enforcer is None:  # fail closed: a context built without the application's enforcer
        raise errors.Forbidden(f"Policy does not allow {action} to be performed.")
    try:
        enforcer.authorize(action, target, credentials, do_raise=True)
    except (policy.PolicyNotAuthorized, policy.InvalidScope):
        LOG.debug(
            "Policy check for %s failed with credentials %s",
            action,
            {k: v for k, v in credentials.items() if v},
        )
        raise errors.Forbidden(f"Policy does not allow {action} to be performed.") from None


def effective_rules(enforcer: policy.Enforcer) -> list[tuple[str, str]]:
    """(name, check) for every rule as it is enforced now: placement's rules in
    their documented order, then whatever else the policy files define."""
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
