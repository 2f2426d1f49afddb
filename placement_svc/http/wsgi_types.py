"""The types of PEP 3333, for the layers that wrap the WSGI application.

The same shapes as typeshed's ``_typeshed.wsgi`` (``wsgiref.types`` from
Python 3.11), defined here so that they exist at run time on 3.10 too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Protocol, TypeAlias

# What sys.exc_info() gives: an exception being handled, or three Nones.
ExcInfo: TypeAlias = (
    tuple[type[BaseException], BaseException, TracebackType] | tuple[None, None, None]
)
Environ: TypeAlias = dict[str, Any]


class StartResponse(Protocol):
    """``start_response(status, headers, exc_info=None)``: the server's
    callable that sends the status line and headers; it gives back the
    legacy ``write(data)`` callable."""

    def __call__(
        self, status: str, headers: list[tuple[str, str]], exc_info: ExcInfo | None = ..., /
    ) -> Callable[[bytes], object]: ...


# A WSGI application, or a layer (middleware) around one.
WSGIApp: TypeAlias = Callable[[Environ, StartResponse], Iterable[bytes]]
