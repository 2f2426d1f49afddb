"""Pure parsers for the filter parameters GET /resource_providers and
GET /allocation_candidates share: resources, required, member_of, in_tree.

They take raw query values and the request's microversion and return plain
data; every malformed value is a 400 naming the parameter (with its request
group suffix) and what was wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from placement_svc import errors
from placement_svc import microversion as mv
from placement_svc.uuidutil import is_uuid_like

if TYPE_CHECKING:
    from microversion_parse import Version


@dataclass
class TraitFilter:
    """``required``: every set in ``any_of`` needs one member; none of ``forbidden``."""

    any_of: list[frozenset[str]] = field(default_factory=list)
    forbidden: set[str] = field(default_factory=set)

    def names(self) -> set[str]:
        return set().union(*self.any_of, self.forbidden) if self.any_of else set(self.forbidden)

    def __bool__(self) -> bool:
        return bool(self.any_of or self.forbidden)


@dataclass
class AggregateFilter:
    """``member_of``: every set in ``any_of`` needs one member; none of ``forbidden``."""

    any_of: list[frozenset[str]] = field(default_factory=list)
    forbidden: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.any_of or self.forbidden)


def _bad(message: str, code: str = errors.DEFAULT) -> errors.BadRequest:
    return errors.BadRequest(message, code=code)


def resources(value: str, suffix: str = "") -> dict[str, int]:
    """``VCPU:2,MEMORY_MB:1024`` -> {"VCPU": 2, "MEMORY_MB": 1024}."""
    form = "?resources=VCPU:2,MEMORY_MB:1024"
    if value.strip() == "":
        raise _bad(
            f"Badly formed resources{suffix} parameter. Expected resources{suffix} query "
            f"string parameter in form: {form}. Got: empty string."
        )
    amounts: dict[str, int] = {}
    for item in value.split(","):
        name, sep, amount = item.partition(":")
        if not sep or ":" in amount or not name:
            raise _bad(
                f"Badly formed resources{suffix} parameter. Expected resources{suffix} query "
                f"string parameter in form: {form}. Got: {item}."
            )
        try:
            number = int(amount)
        except ValueError:
            raise _bad(
                f"Requested resource {name} expected positive integer amount. Got: {amount}."
            ) from None
        if number < 1:
            raise _bad(f"Requested resource {name} requires amount >= 1. Got: {number}.")
        amounts[name] = number
    return amounts


def required(values: list[str], version: Version, suffix: str = "") -> TraitFilter:
    """``required`` values: ``A,B,!C`` (``!`` from 1.22) and ``in:A,B`` (1.39, repeatable).

    Before 1.39 only the last of repeated parameters counts, as upstream.
    """
    allow_forbidden = version >= mv.FORBIDDEN_TRAITS
    allow_any = version >= mv.ANY_TRAITS
    if not allow_any:
        values = values[-1:]
    result = TraitFilter()
    param = f"required{suffix}"
    for value in values:
        if value.startswith("in:"):
            if not allow_any:
                raise _bad(
                    "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,"
                    f"CUSTOM_MAGIC' only supported since microversion 1.39. Got: {value}"
                )
            names = {name.strip() for name in value[3:].split(",")}
            if not all(names):
                raise _bad(
                    f"Invalid query string parameters: Expected '{param}' parameter value "
                    "of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty trait in: "
                    f"{value}"
                )
            if any(name.startswith("!") for name in names):
                raise _bad(
                    "Invalid query string parameters: The format 'in:HW_CPU_X86_VMX,"
                    f"CUSTOM_MAGIC' does not support forbidden traits. Got: {value}"
                )
            result.any_of.append(frozenset(names))
            continue
        listed = [name.strip() for name in value.split(",")]
        forbidden = {name.lstrip("!") for name in listed if name.startswith("!")}
        if not all(listed) or not all(forbidden):
            form = (
                "HW_CPU_X86_VMX,!CUSTOM_MAGIC"
                if allow_forbidden
                else ("HW_CPU_X86_VMX,CUSTOM_MAGIC")
            )
            raise _bad(
                f"Invalid query string parameters: Expected '{param}' parameter value of "
                f"the form: {form}. Got an empty trait in: {value}"
            )
        if forbidden and not allow_forbidden:
            raise _bad(
                f"Invalid query string parameters: Expected '{param}' parameter value of "
                f"the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: {value}"
            )
        result.any_of.extend(frozenset([n]) for n in listed if not n.startswith("!"))
        result.forbidden |= forbidden
    return result


def member_of(
    values: list[str], version: Version, suffix: str = "", name: str = "member_of"
) -> AggregateFilter:
    """``member_of``: a uuid, ``in:`` uuids (any of), ``!uuid`` / ``!in:`` (from 1.32).

    Repeating the parameter (AND of each) needs 1.24. ``name`` is the
    parameter the messages name: root_member_of (1.40) takes the same forms
    and gets the same words about itself.
    """
    param = f"{name}{suffix}"
    if len(values) > 1 and version < mv.MULTI_MEMBER_OF:
        raise _bad(f"Multiple {param} parameters are not supported")
    result = AggregateFilter()
    for value in values:
        if "," in value and not (value.startswith("in:") or value.startswith("!in:")):
            raise _bad(
                f"Multiple values for '{name}' must be prefixed with the 'in:' or "
                f"'!in:' keyword using the valid microversion. Got: {value}"
            )
        negative = value.startswith("!")
        body = value[1:] if negative else value
        uuids = set(body[3:].split(",")) if body.startswith("in:") else {body}
        for aggregate in uuids:
            if not is_uuid_like(aggregate):
                raise _bad(
                    f"Invalid query string parameters: Expected '{name}' parameter to "
                    f"contain valid UUID(s). Got: {aggregate}"
                )
        if negative:
            if version < mv.FORBIDDEN_AGGREGATES:
                raise _bad(
                    f"Forbidden {param} parameters are not supported in the specified microversion"
                )
            result.forbidden |= uuids
        else:
            result.any_of.append(frozenset(uuids))
    return result


def in_tree(value: str, suffix: str = "") -> str:
    stripped = value.strip()
    if not is_uuid_like(stripped):
        raise _bad(
            f"Invalid query string parameters: Expected 'in_tree{suffix}' parameter to be "
            f"a format of uuid. Got: {value}"
        )
    return stripped
