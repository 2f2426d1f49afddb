"""What serve's workers know of a request before they run it, from its
bytes alone: where it ends (its head's Content-Length or chunked body),
the limits it is read under ([api] options), and the answers given without
the application (a JSON error in upstream's format). Pure, but for the
limits, which serve sets once before the workers fork."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from gunicorn.http import message as http_message

from placement_svc import errors
from placement_svc.http import middleware


@dataclass
class Limits:
    """What serve reads from [api] before the workers fork."""

    request_line: int = middleware.MAX_URL_LENGTH + 32
    header_fields: int = 100
    header_field_size: int = 8190
    header_timeout: float = 20.0
    body_timeout: float = 20.0
    connections: int = 1000
    pending_bytes: int = 64 * 1024 * 1024
    keepalive_timeout: float = 10.0

    @property
    def header_section(self) -> int:
        """The most bytes a request line and header section can take before
        gunicorn's parser refuses them (its own buffer bound, with slack)."""
        return self.request_line + self.header_fields * (self.header_field_size + 2) + 8


LIMITS = Limits()


def configure(conf) -> None:
    """Take the limits from [api] (serve calls this before the workers fork)."""
    global LIMITS
    LIMITS = Limits(
        request_line=conf.api.max_request_line,
        header_fields=conf.api.max_header_fields,
        header_field_size=conf.api.max_header_field_size,
        header_timeout=float(conf.api.client_header_timeout),
        body_timeout=float(conf.api.client_body_timeout),
        connections=conf.api.max_client_connections,
        pending_bytes=conf.api.max_pending_request_bytes,
        keepalive_timeout=float(conf.api.keepalive_timeout),
    )


@dataclass
class Head:
    """What the header section says of the body."""

    content_length: int | None = None
    chunked: bool = False
    expects_continue: bool = False
    unclear: bool = False  # let gunicorn's parser judge (and refuse) it


def read_head(head: bytes) -> Head:
    """The framing a header section (without its final blank line) asks
    for. Anything gunicorn's parser would refuse or read otherwise
    (conflicting or malformed lengths, codings other than a final chunked)
    is ``unclear``: the request is handed over as it is, and the parser
    answers it."""
    lines = head.split(b"\r\n")
    version = lines[0].rpartition(b" ")[2]
    lengths, codings, expect = [], [], False
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon:
            continue
        name = name.lower()
        value = value.strip()
        if name == b"content-length":
            lengths.append(value)
        elif name == b"transfer-encoding":
            codings.extend(c.strip().lower() for c in value.split(b","))
        elif name == b"expect":
            expect = value.lower() == b"100-continue"
    result = Head(expects_continue=expect and version == b"HTTP/1.1")
    if codings:
        if lengths or codings[-1] != b"chunked" or version != b"HTTP/1.1":
            result.unclear = True
        else:
            result.chunked = True
    elif lengths:
        if len(set(lengths)) != 1 or not lengths[0].isdigit() or len(lengths[0]) > 18:
            result.unclear = True
        else:
            result.content_length = int(lengths[0])
    return result


def chunked_end(data: bytes | bytearray, position: int) -> tuple[int, bool, bool]:
    """Walk the chunks of a chunked body from ``position`` (the start of a
    chunk's size line) as far as ``data`` goes: (the position reached, the
    body is whole, the body is malformed). The end is the position after
    the last chunk's trailer section."""
    while True:
        line_end = data.find(b"\r\n", position)
        if line_end < 0:
            if len(data) - position > 1024:  # no size line is that long
                return position, False, True
            return position, False, False
        size_text = bytes(data[position:line_end]).partition(b";")[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            return position, False, True
        if size < 0 or len(size_text) > 16:
            return position, False, True
        if size == 0:
            if data[line_end + 2 : line_end + 4] == b"\r\n":
                return line_end + 4, True, False
            trailer_end = data.find(b"\r\n\r\n", line_end + 2)
            if trailer_end < 0:
                return position, False, False
            return trailer_end + 4, True, False
        after = line_end + 2 + size + 2
        if len(data) < after:
            return position, False, False
        position = after


class BoundedRequest(http_message.Request):
    """gunicorn's request, whose line is refused as soon as
    LIMITS.request_line bytes have come without its end."""

    def read_line(self, unreader, buf, limit=0):
        return super().read_line(unreader, buf, limit or LIMITS.request_line)


def error_answer(error: errors.PlacementError) -> bytes:
    """A whole HTTP answer carrying upstream's JSON error, closing the connection."""
    body = json.dumps(errors.error_body(error, f"req-{uuid.uuid4()}", True)).encode()
    head = f"HTTP/1.1 {error.status} {error.title}\r\nConnection: close\r\n"
    for name, value in error.headers.items():
        head += f"{name}: {value}\r\n"
    head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body
