"""How this installation of placement-svc gets an extra (keystone, a
database driver): the pip command to suggest in an error message, one that
works where the service runs.

A checkout installed with ``pip install -e .`` (what ``make`` does) takes
``pip install -e '/path/to/checkout[extra]'``; one installed from a
directory or a wheel file (``python -m build``) takes that path with the
extra; an install from a package index takes the name. The command names
this Python's own pip, so it lands in the same environment.
"""

from __future__ import annotations

import importlib.metadata
import json
import shlex
import sys
import urllib.parse

NAME = "placement-svc"


def extra_command(extra: str) -> str:
    """``python -m pip install ...`` that adds ``extra`` to this installation."""
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    for dist in importlib.metadata.distributions(name=NAME):
        raw = dist.read_text("direct_url.json")
        if not raw:
            continue  # a checkout's own metadata (egg-info) on the path: look on
        info = json.loads(raw)
        url = info.get("url", "")
        if url.startswith("file://"):
            path = urllib.parse.unquote(urllib.parse.urlsplit(url).path)
            editable = info.get("dir_info", {}).get("editable")
            return f"{pip} {'-e ' if editable else ''}{shlex.quote(f'{path}[{extra}]')}"
        break
    return f"{pip} {shlex.quote(f'{NAME}[{extra}]')}"
