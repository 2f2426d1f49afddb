"""Gabbi fixtures: a fresh database and application per YAML file.

``APIFixture`` is the default: quick-start configuration (noauth2) and
oslo.policy's own [oslo_policy] defaults; the policy fixtures
(``LegacyRBACFixture``, ``SecureRBACFixture``, ``OpenPolicyFixture``) change
only [oslo_policy]. The
environment variables it sets are there for YAML files to use as
``$ENVIRON['NAME']``: fresh uuids per file, so files never depend on each
other's data.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Iterator

import httpx
from gabbi import fixture
from oslo_policy import opts as policy_opts

from placement_svc import app, conf, policy
from placement_svc.db.engine import Database, create_engine
from placement_svc.operating import metrics
from tests.support import databases

UUID_NAMES = (
    "RP_UUID",
    "ALT_RP_UUID",
    "PARENT_PROVIDER_UUID",
    "ALT_PARENT_PROVIDER_UUID",
    "CONSUMER_UUID",
    "ALT_CONSUMER_UUID",
    "PROJECT_ID",
    "ALT_PROJECT_ID",
    "USER_ID",
    "ALT_USER_ID",
    "AGGREGATE_UUID",
    "ALT_AGGREGATE_UUID",
)


def make_conf(**overrides):
    """A ConfigOpts for tests: no files read, noauth2, overrides as group.option."""
    cfg = conf.make_conf(config_files=[], quickstart_if_unconfigured=False)
    cfg.set_override("auth_strategy", "noauth2", group="api")
    for key, value in overrides.items():
        group, _dot, name = key.partition(".")
        cfg.set_override(name, value, group=group)
    return cfg


def for_backend(backend: str, slot) -> dict:
    """The fixture classes a YAML file may name, bound to one backend."""

    class APIFixture(fixture.GabbiFixture):
        """Every microversion placement-svc has, its own (1.40+) included."""

        config_overrides: dict = {}
        max_microversion: str | None = None

        def start_fixture(self):
            test_db = databases.get(backend)
            test_db.reset()
            overrides = dict(self.config_overrides)
            if self.max_microversion:
                overrides["api.max_microversion"] = self.max_microversion
            cfg = make_conf(**overrides)
            slot.app = app.create_app(cfg, test_db.db)
            for name in UUID_NAMES:
                os.environ[name] = str(uuid.uuid4())
            os.environ["PLACEMENT_SVC_VERSION"] = metrics.release()
            os.environ["RP_NAME"] = "rp-" + os.environ["RP_UUID"][:8]
            os.environ["ALT_RP_NAME"] = "rp-" + os.environ["ALT_RP_UUID"][:8]

        def stop_fixture(self):
            slot.app = None

    class ParityFixture(APIFixture):
        """[api] max_microversion = 1.39: the service as upstream's clients and
        tests see it. The suites written for upstream's API run with it, so
        the cap is proven to keep them byte for byte as they were."""

        max_microversion = "1.39"

    class CORSFixture(ParityFixture):
        """CORS on for one origin; every other [cors] option at its default."""

        config_overrides = {"cors.allowed_origin": ["http://valid.example.com"]}

    class LegacyRBACFixture(ParityFixture):
        """Policy with the deprecated admin-only defaults ORed in, as upstream
        deployments that set [oslo_policy] enforce_new_defaults = False."""

        config_overrides = {"oslo_policy.enforce_new_defaults": False}

    class SecureRBACFixture(ParityFixture):
        """Policy with the new defaults only, and scope enforced."""

        config_overrides = {"oslo_policy.enforce_new_defaults": True, **_ENFORCE_SCOPE}

    class OpenPolicyFixture(ParityFixture):
        """A policy file that opens every API rule ("@") to any caller."""

        def start_fixture(self):
            self.policy_dir = tempfile.TemporaryDirectory(prefix="placement-policy-")
            path = os.path.join(self.policy_dir.name, "policy.yaml")
            with open(path, "w", encoding="utf-8") as handle:
                for rule in policy.list_rules():
                    if rule.name.startswith("placement:"):
                        handle.write(f'"{rule.name}": "@"\n')
            self.config_overrides = {"oslo_policy.policy_file": path}
            super().start_fixture()

        def stop_fixture(self):
            super().stop_fixture()
            self.policy_dir.cleanup()

    class UnreachableDatabaseFixture(APIFixture):
        """The application over a database of this backend that refuses every
        connection: nothing listens on port 1, and SQLite's file is in a
        directory that does not exist."""

        def start_fixture(self):
            super().start_fixture()
            url = {
                "sqlite": f"sqlite:///{tempfile.gettempdir()}/no-such-dir-{uuid.uuid4()}/p.sqlite",
                "postgresql": "postgresql+psycopg://postgres@127.0.0.1:1/test",
                "mysql": "mysql+pymysql://root@127.0.0.1:1/test",
            }[backend]
            self.db = Database(create_engine(url))
            slot.app = app.create_app(make_conf(), self.db)

        def stop_fixture(self):
            super().stop_fixture()
            self.db.dispose()

    class DrainedFixture(APIFixture):
        """[healthcheck] backends = disable_by_file, with the file that
        disable_by_file_path names present (a node being drained), and
        detailed output on."""

        def start_fixture(self):
            self.drain_dir = tempfile.TemporaryDirectory(prefix="placement-drain-")
            path = os.path.join(self.drain_dir.name, "healthcheck_disable")
            with open(path, "w", encoding="utf-8"):
                pass
            os.environ["DRAIN_FILE"] = path
            self.config_overrides = {
                "healthcheck.backends": ["disable_by_file"],
                "healthcheck.disable_by_file_path": path,
                "healthcheck.detailed": True,
                "healthcheck.database_result_ttl": 0.0,
            }
            super().start_fixture()

        def stop_fixture(self):
            super().stop_fixture()
            self.drain_dir.cleanup()

    class MetricsOffFixture(APIFixture):
        """[metrics] enabled = False."""

        config_overrides = {"metrics.enabled": False}

    class SmallBudgetFixture(APIFixture):
        """A search budget a test can exhaust in a moment, and few groups."""

        config_overrides = {
            "placement.allocation_candidates_search_budget": 20000,
            "placement.max_request_groups": 12,
        }

    return {
        "APIFixture": APIFixture,
        "UnreachableDatabaseFixture": UnreachableDatabaseFixture,
        "DrainedFixture": DrainedFixture,
        "MetricsOffFixture": MetricsOffFixture,
        "SmallBudgetFixture": SmallBudgetFixture,
        "ParityFixture": ParityFixture,
        "CORSFixture": CORSFixture,
        "LegacyRBACFixture": LegacyRBACFixture,
        "SecureRBACFixture": SecureRBACFixture,
        "OpenPolicyFixture": OpenPolicyFixture,
    }


# oslo.policy before 6.0 has [oslo_policy] enforce_scope; from 6.0 scope is
# always enforced and the option is gone.
_ENFORCE_SCOPE = (
    {"oslo_policy.enforce_scope": True}
    if any(opt.name == "enforce_scope" for _group, opts in policy_opts.list_opts() for opt in opts)
    else {}
)


ADMIN_HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement latest"}


def api_client(application, headers=ADMIN_HEADERS):
    """An httpx client calling ``application`` in-process."""
    return httpx.Client(
        transport=httpx.WSGITransport(app=application),
        base_url="http://placement.test",
        headers=headers,
    )


@contextlib.contextmanager
def servers_over(url: str, count: int = 2, headers=ADMIN_HEADERS) -> Iterator[list[httpx.Client]]:
    """``count`` applications over the database at ``url``, each with its own
    engine (as so many API hosts would be), a client for each; their
    connections closed at the end, so the database can be dropped."""
    engines = [create_engine(url) for _ in range(count)]
    try:
        yield [
            api_client(app.create_app(make_conf(), Database(engine)), headers) for engine in engines
        ]
    finally:
        for engine in engines:
            engine.dispose()


class UntouchableDatabase:
    """A refused request must not reach the database; an allowed one does."""

    engine = None  # no pool for the metrics to watch
    on_retry = None

    class Touched(Exception):
        pass

    def read(self, fn):
        raise self.Touched()

    def write(self, fn):
        raise self.Touched()
