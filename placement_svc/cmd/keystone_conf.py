"""What ``[keystone_authtoken]`` must hold before the service may start on keystone.

keystonemiddleware's auth_token builds without complaint from a
``[keystone_authtoken]`` with no ``auth_type``, then fails every request but
the version document: keystoneauth raises ``MissingAuthPlugin`` when it asks
keystone about a token and, without ``www_authenticate_uri``, when it names
keystone in a 401. That is upstream's default for a ``placement.conf`` that
sets only the database. What auth_token really needs is ``auth_type`` (in
``[keystone_authtoken]``, or in the section its ``auth_section`` names) and
the options that plugin requires (``auth_url`` for ``password``).
``www_authenticate_uri`` is optional: the 401 then names the plugin's
``auth_url``.
"""

from __future__ import annotations

GROUP = "keystone_authtoken"
NOAUTH_HINT = "or set [api] auth_strategy = noauth2 (no authentication, for tests)"


def problem(conf) -> str | None:
    """One line saying what keystone authentication lacks; None when the
    strategy is not keystone or nothing is missing.

    Registers auth_token's options on ``conf`` (and the auth options in an
    ``auth_section``, which auth_token reads but never registers itself).
    """
    if conf.api.auth_strategy != "keystone":
        return None
    try:
        from keystoneauth1 import exceptions, loading
        from keystonemiddleware import auth_token
    except ImportError:
        return None  # create_app names the extra to install
    for group, opts in auth_token.list_opts():
        conf.register_opts(opts, group=group)
    section = conf[GROUP].auth_section or GROUP
    conf.register_opts(loading.get_auth_common_conf_options(), group=section)
    auth_type = conf[section].auth_type
    if not auth_type:
        return _no_auth_type(section)
    try:
        loader = loading.get_plugin_loader(auth_type)
    except exceptions.NoMatchingPlugin:
        return f"[{section}] auth_type = {auth_type}: keystoneauth has no such plugin"
    conf.register_opts(loading.get_auth_plugin_conf_options(loader), group=section)
    missing = [o.dest for o in loader.get_options() if o.required and conf[section][o.dest] is None]
    if missing:
        names = " and ".join(f"[{section}] {name}" for name in missing)
        return f"[{section}] auth_type = {auth_type} needs {names}, which the configuration lacks"
    return None


def _no_auth_type(section: str) -> str:
    if section == GROUP:
        where = f"[{GROUP}] auth_type"
    else:
        where = f"auth_type in [{section}] ([{GROUP}] auth_section)"
    return (
        f"[api] auth_strategy = keystone needs {where}: an auth plugin (e.g. password, "
        f"with auth_url, username, password, ...) for keystonemiddleware to validate "
        f"tokens; {NOAUTH_HINT}"
    )
