"""pyproject.toml lists every package of placement_svc: setuptools takes
only the ones named, so a new folder left out is missing from the wheel
(and from every installation but an editable one). The wheel build test in
tests/functional/test_deploy_files.py finds it too, slowly; this finds it
at once."""

from __future__ import annotations

import pathlib
import tomllib

import placement_svc

PACKAGE = pathlib.Path(placement_svc.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"


def test_every_folder_of_the_package_is_in_the_wheel():
    listed = set(tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["packages"])
    folders = {
        ".".join(init.parent.relative_to(PACKAGE.parent).parts)
        for init in PACKAGE.rglob("__init__.py")
    }
    assert folders - listed == set(), "add them to [tool.setuptools] packages"
