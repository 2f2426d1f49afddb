"""Accept headers read the way upstream's webob reads them.

Upstream decides two things from Accept with webob: whether a handler's
406 applies, and whether an error is rendered as HTML, JSON or plain text.
What shows through is reproduced here: a header that does not parse
counts as no header at all, q=0 excludes, an offer's quality comes from
the most specific range that matches it, ties go to the first offer, and
upstream's request log turns a missing header or a bare */* into JSON.
"""

from __future__ import annotations

import re

JSON = "application/json"
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_VALUE = rf'(?:{_TOKEN}|"(?:[^"\\]|\\.)*")'
_PARAMS = re.compile(rf"\s*;\s*({_TOKEN})=({_VALUE})")
_RANGE = re.compile(rf"^\s*({_TOKEN})/({_TOKEN})((?:\s*;\s*{_TOKEN}={_VALUE})*)\s*$")
_QVALUE = re.compile(r"^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$")


def parse(header: str) -> list[tuple[str, str, float]] | None:
    """(type, subtype, q) for each media range without media type parameters
    (the offers here have none, so those ranges match nothing); None when the
    header does not parse."""
    ranges = []
    for element in header.split(","):
        if not element.strip():
            continue
        match = _RANGE.match(element)
        if match is None:
            return None
        q, media_params = 1.0, False
        for name, value in _PARAMS.findall(match.group(3)):
            if name.lower() == "q":
                if not _QVALUE.match(value):
                    return None
                q = float(value)
                break  # what follows q are accept extensions, which match anything
            media_params = True
        if not media_params:  # a range with parameters matches no offer made here
            ranges.append((match.group(1).lower(), match.group(2).lower(), q))
    return ranges


def acceptable(header: str | None, offers: tuple[str, ...]) -> list[str]:
    """The offers the header accepts, best first (webob's acceptable_offers)."""
    if not header or header.strip() == "*/*":
        return [JSON] + [offer for offer in offers if offer != JSON]
    ranges = parse(header)
    if ranges is None:
        return list(offers)
    scored = []
    for index, offer in enumerate(offers):
        kind, sub = offer.split("/", 1)
        best = None
        for rkind, rsub, q in ranges:
            if (rkind, rsub) == (kind, sub):
                specificity = 3
            elif rkind == kind and rsub == "*":
                specificity = 2
            elif (rkind, rsub) == ("*", "*"):
                specificity = 1
            else:
                continue
            if best is None or specificity > best[0]:
                best = (specificity, q)
        if best is not None and best[1] > 0:
            scored.append((-best[1], index, offer))
    return [offer for _q, _index, offer in sorted(scored)]


def accepts_json(header: str | None) -> bool:
    return JSON in acceptable(header, (JSON,))


def error_media_type(header: str | None) -> str:
    """HTML, JSON or, when the client takes neither, plain text."""
    offers = acceptable(header, ("text/html", JSON))
    return offers[0] if offers else "text/plain"
