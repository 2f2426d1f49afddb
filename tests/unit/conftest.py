"""What several unit test modules share."""

from __future__ import annotations

import logging

import oslo_context.context
import pytest


@pytest.fixture
def restore_logging(monkeypatch):
    # No thread-current oslo.context context left by another test in this
    # process (oslo.context makes the first one made current): none here.
    monkeypatch.setattr(oslo_context.context, "get_current", lambda: None)
    root = logging.getLogger()
    kept, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in kept:
        root.addHandler(handler)
    root.setLevel(level)
