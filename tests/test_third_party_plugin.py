"""A plugin in a separate distribution is used by a conf that names it, with no change to
vscheduler: the test builds such a package, installs it with pip, and runs simulate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.builders import node, pod

PLUGIN = '''
"""Keeps pods off nodes labelled `maintenance: "true"` and prefers `tier: fast` nodes."""

from vscheduler.fit import Unfit
from vscheduler.hookspecs import hookimpl
from vscheduler.plugin import Argument, Plugin


class MaintenancePlugin(Plugin):
    name = "maintenance"
    arguments = (Argument("fast.weight", int, 10),)

    @hookimpl
    def predicate(self, task, node):
        if node.labels.get("maintenance") == "true":
            return Unfit("node(s) were under maintenance")
        return None

    @hookimpl
    def node_order(self, task, node):
        return self.args["fast.weight"] if node.labels.get("tier") == "fast" else 0
'''

PYPROJECT = '''
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "vscheduler-maintenance"
version = "1.0.0"

[project.entry-points."vscheduler.plugins"]
maintenance = "vscheduler_maintenance:MaintenancePlugin"
'''

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: maintenance, arguments: {fast.weight: 5}}]
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory the package is pip-installed into."""
    source = tmp_path_factory.mktemp("src")
    (source / "pyproject.toml").write_text(PYPROJECT)
    (source / "vscheduler_maintenance.py").write_text(textwrap.dedent(PLUGIN))
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--target", str(target), str(source)],
                   check=True, capture_output=True)
    return target


def _simulate(tmp_path: Path, site: Path | None, conf: str) -> subprocess.CompletedProcess:
    manifest = tmp_path / "cluster.yaml"
    objects = [node("slow"), node("down", labels={"maintenance": "true", "tier": "fast"}),
               node("fast", labels={"tier": "fast"}), pod("p")]
    manifest.write_text("\n---\n".join(json.dumps(o) for o in objects))
    conf_file = tmp_path / "conf.yaml"
    conf_file.write_text(conf)
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "vscheduler.cli", "simulate", str(manifest), "--conf",
         str(conf_file), "--output", "json"], capture_output=True, text=True, env=env)


def test_installed_plugin_is_used_by_a_conf_that_names_it(site: Path, tmp_path: Path):
    run = _simulate(tmp_path, site, CONF)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["binds"] == {"default/p": "fast"}


def test_installed_plugin_is_listed(site: Path):
    env = dict(os.environ, PYTHONPATH=str(site))
    run = subprocess.run([sys.executable, "-m", "vscheduler.cli", "plugins"],
                         capture_output=True, text=True, env=env, check=True)
    assert ("  maintenance (vscheduler_maintenance:MaintenancePlugin)\n"
            "    Keeps pods off nodes labelled `maintenance: \"true\"` and prefers `tier: fast` "
            "nodes.\n"
            "      fast.weight: an integer, default 10\n") in run.stdout


def test_without_the_package_the_conf_fails_listing_installed_plugins(tmp_path: Path):
    run = _simulate(tmp_path, None, CONF)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "tiers[1].plugins[0] (maintenance): unknown plugin 'maintenance'" in lines[0]
    assert "installed: " in lines[0] and "gang" in lines[0]
