"""The configuration: documented options, an up-to-date sample, upstream's files read."""

from __future__ import annotations

import pathlib

import pytest
from oslo_config import generator

from placement_svc import conf
from placement_svc.cmd import bootstrap

ROOT = pathlib.Path(__file__).resolve().parents[2]
GENERATOR_CONF = ROOT / "etc" / "config-generator.conf"
SAMPLE = ROOT / "etc" / "placement.conf.sample"

UPSTREAM_STYLE = """\
[DEFAULT]
debug = true
log_dir = /var/log/placement

[api]
auth_strategy = keystone

[placement_database]
connection = mysql+pymysql://placement:secret@controller/placement
max_pool_size = 20
sync_on_startup = true

[placement]
max_allocation_candidates = 1000
randomize_allocation_candidates = true
allocation_candidates_generation_strategy = breadth-first

[keystone_authtoken]
www_authenticate_uri = http://controller:5000
auth_url = http://controller:5000
auth_type = password
"""


ALL_OPTIONS = [
    pytest.param(opt, id=f"{group}.{opt.name}") for group, opts in conf.list_opts() for opt in opts
]


@pytest.mark.parametrize("opt", ALL_OPTIONS)
def test_every_option_has_help_text(opt):
    assert opt.help and opt.help.strip()


def test_the_committed_sample_is_what_the_generator_writes(tmp_path):
    fresh = tmp_path / "placement.conf.sample"
    generator.main(["--config-file", str(GENERATOR_CONF), "--output-file", str(fresh)])
    assert SAMPLE.read_text() == fresh.read_text(), (
        "etc/placement.conf.sample is out of date: run 'make genconfig' (or tox -e genconfig)"
    )


def test_an_upstream_style_placement_conf_is_read(tmp_path):
    path = tmp_path / "placement.conf"
    path.write_text(UPSTREAM_STYLE)
    cfg = conf.make_conf(["--config-file", str(path)])
    assert cfg.placement_database.connection == (
        "mysql+pymysql://placement:secret@controller/placement"
    )
    assert cfg.placement_database.max_pool_size == 20
    assert cfg.placement_database.sync_on_startup is True
    assert cfg.api.auth_strategy == "keystone"
    assert cfg.placement.max_allocation_candidates == 1000
    assert cfg.placement.randomize_allocation_candidates is True
    assert cfg.placement.allocation_candidates_generation_strategy == "breadth-first"


def test_a_file_given_as_default_is_read_too(tmp_path):
    path = tmp_path / "placement.conf"
    path.write_text(UPSTREAM_STYLE)
    cfg = conf.make_conf(config_files=[str(path)])
    assert cfg.placement.max_allocation_candidates == 1000


def test_a_configuration_file_turns_the_quick_start_defaults_off(tmp_path):
    path = tmp_path / "placement.conf"
    path.write_text("[placement]\nmax_allocation_candidates = 5\n")
    cfg = conf.make_conf(config_files=[str(path)])
    assert cfg.placement_database.connection is None
    assert cfg.api.auth_strategy == "keystone"


def test_no_configuration_file_means_sqlite_and_noauth2():
    cfg = conf.make_conf(config_files=[])
    assert cfg.placement_database.connection == "sqlite:///placement.sqlite"
    assert cfg.api.auth_strategy == "noauth2"


def test_later_files_win(tmp_path):
    first, second = tmp_path / "a.conf", tmp_path / "b.conf"
    first.write_text("[placement]\nmax_allocation_candidates = 5\n")
    second.write_text("[placement]\nmax_allocation_candidates = 7\n")
    cfg = conf.make_conf(["--config-file", str(first), "--config-file", str(second)])
    assert cfg.placement.max_allocation_candidates == 7


def test_wsgi_reads_placement_conf_from_os_placement_config_dir():
    assert bootstrap.wsgi_config_files({"OS_PLACEMENT_CONFIG_DIR": "/etc/x"}) == [
        "/etc/x/placement.conf"
    ]
    assert bootstrap.wsgi_config_files({"OS_PLACEMENT_CONFIG_DIR": " "}) is None
    assert bootstrap.wsgi_config_files({}) is None
