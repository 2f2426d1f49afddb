"""A streamed answer's end, for the layers that report on a request.

Most answers are made whole by the handler and have a Content-Length: the
request log and the metrics note them when the application returns. A huge
allocation-candidates answer is streamed instead (answering.render_chunks): most
of its time and every byte come after that. ``when_sent`` wraps such a body
so that a report waits for its last byte (or for the server closing it
early, when the client went away) and learns how many bytes were sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator


def streamed(body: Iterable[bytes]) -> bool:
    """Whether a WSGI body is still to be made as the server reads it (not
    a list of its pieces, made whole already)."""
    return not isinstance(body, list | tuple)


class when_sent:  # noqa: N801 - used as a function
    """A WSGI body that calls ``then(sent)`` once, with the bytes it yielded,
    when its last piece is taken or when the server closes it."""

    def __init__(self, body: Iterable[bytes], then: Callable[[int], None]):
        self.body, self.then = body, then
        self.sent = 0
        self.done = False

    def __iter__(self) -> Iterator[bytes]:
        for piece in self.body:
            self.sent += len(piece)
            yield piece
        self._finish()

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self._finish()

    def _finish(self) -> None:
        if not self.done:
            self.done = True
            self.then(self.sent)
