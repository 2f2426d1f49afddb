"""Every request and response schema is a valid JSON schema of its draft
(the check Schema once made at import, for every process: see
placement_svc/schemas/common.py)."""

from __future__ import annotations

import importlib
import pkgutil

import jsonschema
import pytest

import placement_svc.schemas
from placement_svc.schemas.common import MADE, Schema

for module in pkgutil.iter_modules(placement_svc.schemas.__path__):
    importlib.import_module(f"placement_svc.schemas.{module.name}")


def test_the_schemas_of_every_module_are_made():
    assert len(MADE) > 270


@pytest.mark.parametrize("index", range(len(MADE)))
def test_each_schema_is_valid_for_its_draft(index):
    schema = MADE[index]
    jsonschema.validators.validator_for(schema).check_schema(schema)


def test_a_broken_schema_is_caught():
    broken = Schema({"type": "object", "properties": {"a": {"type": "no such type"}}})
    MADE.remove(broken)
    with pytest.raises(jsonschema.SchemaError):
        jsonschema.validators.validator_for(broken).check_schema(broken)
