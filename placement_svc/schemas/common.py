"""Named parts the per-family schemas are composed from, and the Schema type
every request schema is, with its validator built once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, TypeVar

import jsonschema
from microversion_parse import Version

from placement_svc.uuidutil import is_uuid_like

T = TypeVar("T")

# Upstream checks body uuids with oslo's looser rule, not jsonschema's own.
FORMAT_CHECKER = jsonschema.FormatChecker()
FORMAT_CHECKER.checks("uuid")(is_uuid_like)


# Every Schema made, in this process: what the schema test checks.
MADE: list[Schema] = []


class Schema(dict):
    """A JSON schema that reads whole as the dict it is, with its validator
    built once, on first use: jsonschema.validate() checks the schema on
    every call, which costs more than the validation. Never mutated after it
    is made.

    Checking a schema against its metaschema is left to the test suite
    (tests/unit/test_schemas_are_valid.py checks every one in ``MADE``):
    done at import, it took every worker and every command half a second
    for the 270 response schemas alone."""

    def __init__(self, schema: dict):
        super().__init__(schema)
        self._validator = None
        MADE.append(self)

    @property
    def validator(self):
        if self._validator is None:
            cls = jsonschema.validators.validator_for(self)
            self._validator = cls(self, format_checker=FORMAT_CHECKER)
        return self._validator

    def check(self, data) -> None:
        """Raise the error jsonschema.validate() raises (the most relevant
        one) when ``data`` breaks the schema."""
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(data))
        if error is not None:
            raise error

    def accepts(self, data) -> bool:
        return self.validator.is_valid(data)


def pick(table: Sequence[tuple[Version, T]], version: Version) -> T:
    """The entry of the last feature in ``table`` (oldest first) that
    ``version`` has; a version older than the first feature gets the first."""
    chosen = table[0][1]
    for since, entry in table:
        if version >= since:
            chosen = entry
    return chosen


CUSTOM_NAME_PATTERN = "^CUSTOM_[A-Z0-9_]+$"

# A resource class name as written by clients; 255 is the column's length.
CUSTOM_RESOURCE_CLASS = {"type": "string", "pattern": CUSTOM_NAME_PATTERN, "maxLength": 255}

TRAIT_NAME = {"type": "string", "minLength": 1, "maxLength": 255}
CUSTOM_TRAIT_NAME = {**TRAIT_NAME, "pattern": CUSTOM_NAME_PATTERN}

UUID = {"type": "string", "format": "uuid"}


class Param(NamedTuple):
    """A query or path parameter as the OpenAPI document shows it: the form
    of its value (query values are strings on the wire; ``schema`` says what
    the string holds) and what it means."""

    schema: dict
    description: str


INTEGER = {"type": "integer", "minimum": 1}
UUID_VALUE = {"type": "string", "format": "uuid"}
UUIDS = {"type": "string", "pattern": "^(in:)?[0-9a-fA-F-]+(,[0-9a-fA-F-]+)*$"}
TEXT = {"type": "string"}
