"""GET /: the version document, served without authentication."""

from placement_svc import microversion as mv
from placement_svc.http import answering


def home(req, resp):
    # Upstream's home does not check Accept: the document is JSON for anyone.
    document = {
        "versions": [
            {
                "id": f"v{mv.MIN_VERSION}",
                "max_version": str(mv.max_version(req.env)),
                "min_version": str(mv.MIN_VERSION),
                "status": "CURRENT",
                # Relative on purpose: the service never learns its public URL.
                "links": [{"rel": "self", "href": ""}],
            }
        ]
    }
    answering.render(resp, document)
    answering.cache_headers(req, resp)
