"""pyproject.toml lists every package of placement_svc: setuptools takes
only the ones named, so a new folder left out is missing from the wheel
(and from every installation but an editable one). The wheel build test in
tests/functional/test_deploy_files.py finds it too, slowly; this finds it
at once."""

from __future__ import annotations

import pathlib
import re

import placement_svc

PACKAGE = pathlib.Path(placement_svc.__file__).parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"


def test_every_folder_of_the_package_is_in_the_wheel():
    # tomllib is 3.11's; the package runs on 3.10 too. The list is one block.
    block = re.search(r"^packages = \[(.*?)^\]", PYPROJECT.read_text(), re.M | re.S)
    listed = set(re.findall(r'"([a-z_.]+)"', block.group(1)))
    assert "placement_svc.api" in listed
    folders = {
        ".".join(init.parent.relative_to(PACKAGE.parent).parts)
        for init in PACKAGE.rglob("__init__.py")
    }
    assert folders - listed == set(), "add them to [tool.setuptools] packages"
