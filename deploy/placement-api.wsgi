"""placement_svc.wsgi:application for Apache mod_wsgi (deploy/placement-api.conf).

mod_wsgi loads a script by its path rather than a module by its name; this
one only imports the application. Apache's SetEnv reaches a request's
environ, not os.environ at import, so the configuration directory is set
here: $OS_PLACEMENT_CONFIG_DIR when the server's environment has it,
otherwise /etc/placement (the application reads placement.conf there).
"""

import os

os.environ.setdefault("OS_PLACEMENT_CONFIG_DIR", "/etc/placement")

from placement_svc.wsgi import application  # noqa: E402

__all__ = ["application"]
