"""The container image: the Containerfile built with buildah from the Debian base .ci/image
makes, then run as a user runs it (`vscheduler --version`, `vscheduler simulate`), as the
uid the chart expects. And, without building anything, the names that must agree: the
package's version, the chart's appVersion and image, the Containerfile's version label.

Building takes a minute or more, so the image tests carry the `image` marker and run only
where they can: with buildah and debootstrap installed and as root, or when
VSCHEDULER_IMAGE_TESTS=1 asks for them (then a missing tool is a failure, not a skip).
VSCHEDULER_IMAGE_TESTS=0, or `-m "not image"`, leaves them out.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".ci" / "image"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
CHART = ROOT / "charts" / "vscheduler"
EXAMPLE = "quickstart.yaml"
# Where the Containerfile puts the bundled examples.
EXAMPLES_IN_IMAGE = "/usr/share/vscheduler/examples"
# The store .ci/image builds into (its STORAGE_DRIVER, vfs unless set).
DRIVER = os.environ.get("STORAGE_DRIVER", "vfs")
# Build and run: a first build downloads the dependencies from PyPI.
TIMEOUT = 900


def _containerfile_arg(name: str) -> str:
    """The default of `ARG name=...` in the Containerfile."""
    text = (ROOT / "Containerfile").read_text()
    found = re.search(rf"^ARG {name}=(\S+)$", text, re.MULTILINE)
    assert found, f"no ARG {name}=... in the Containerfile"
    return found.group(1)


# ---------------------------------------------------------------- names that must agree


def test_chart_app_version_is_the_package_version():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == VERSION


def test_chart_default_image_is_the_one_built():
    # .ci/image builds vscheduler:<version>; the chart's image is repository:tag, with an
    # empty tag standing for appVersion (the "vscheduler.image" helper).
    image = yaml.safe_load((CHART / "values.yaml").read_text())["image"]
    assert image["repository"] == "vscheduler"
    assert image["tag"] in ("", VERSION)


def test_containerfile_version_label_is_the_package_version():
    assert _containerfile_arg("VERSION") == VERSION


def test_containerfile_user_is_the_charts_user():
    values = yaml.safe_load((CHART / "values.yaml").read_text())["podSecurityContext"]
    user = re.search(r"^USER (\S+)$", (ROOT / "Containerfile").read_text(), re.MULTILINE)
    assert user, "no USER in the Containerfile"
    assert user.group(1) == f"{values['runAsUser']}:{values['runAsGroup']}"


# ---------------------------------------------------------------- the built image


def _buildah(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["buildah", "--storage-driver", DRIVER, *args], capture_output=True,
                          text=True, timeout=TIMEOUT, check=check)


def _require_tools() -> None:
    """Skip where the image cannot be built, unless asked for: then fail."""
    asked = os.environ.get("VSCHEDULER_IMAGE_TESTS")
    if asked == "0":
        pytest.skip("VSCHEDULER_IMAGE_TESTS=0")
    missing = [tool for tool in ("buildah", "debootstrap") if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root (debootstrap and chroot isolation)")
    if missing:
        reason = f"the image needs {', '.join(missing)} (.ci/run installs the tools)"
        if asked == "1":
            pytest.fail(f"VSCHEDULER_IMAGE_TESTS=1 but {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """The image built from the working tree under a name of this run's own (two runs at
    once do not remove each other's image)."""
    _require_tools()
    name = f"localhost/vscheduler-test:{VERSION}-{os.getpid()}"
    built = subprocess.run([str(SCRIPT), "build", name], capture_output=True, text=True,
                           timeout=TIMEOUT, env={**os.environ, "STORAGE_DRIVER": DRIVER})
    assert built.returncode == 0, built.stderr[-4000:]
    try:
        yield name
    finally:
        _buildah("rmi", name, check=False)


@pytest.fixture(scope="module")
def container(image: str) -> Iterator[str]:
    made = _buildah("from", "--quiet", image)
    ctr = made.stdout.strip()
    try:
        yield ctr
    finally:
        _buildah("rm", ctr, check=False)


def _run(ctr: str, *command: str) -> str:
    """Runs `command` in the container as the image's user; its standard output."""
    done = _buildah("run", "--isolation", "chroot", ctr, "--", *command, check=False)
    assert done.returncode == 0, f"{command} failed: {done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.image
def test_image_prints_its_version(container):
    assert _run(container, "vscheduler", "--version").strip() == f"vscheduler {VERSION}"


@pytest.mark.image
def test_image_simulates_a_bundled_example_as_the_checkout_does(container):
    # The image ships the examples; its decisions are the checkout's, bind for bind.
    inside = json.loads(_run(container, "vscheduler", "simulate",
                             f"{EXAMPLES_IN_IMAGE}/{EXAMPLE}", "--output", "json"))
    here = subprocess.run([sys.executable, "-m", "vscheduler", "simulate",
                           str(ROOT / "examples" / EXAMPLE), "--output", "json"],
                          capture_output=True, text=True, check=True, cwd=ROOT, timeout=120)
    assert inside["binds"], "the image bound no pods"
    assert inside == json.loads(here.stdout)


@pytest.mark.image
def test_image_runs_as_the_charts_non_root_user(image, container):
    config = json.loads(_buildah("inspect", "--type", "image", image).stdout)["OCIv1"]["config"]
    # Numeric, so the kubelet's runAsNonRoot can check it without the image's /etc/passwd.
    assert config["User"] == "65532:65532"
    assert _run(container, "id", "-u").strip() == "65532"
    assert _run(container, "id", "-g").strip() == "65532"


@pytest.mark.image
def test_image_entrypoint_and_labels(image):
    config = json.loads(_buildah("inspect", "--type", "image", image).stdout)["OCIv1"]["config"]
    # The chart's `command: [vscheduler, run]` replaces both; `vscheduler` is on PATH.
    assert config["Entrypoint"] == ["vscheduler"]
    assert config["Cmd"] == ["run"]
    labels = config["Labels"]
    assert labels["org.opencontainers.image.title"] == "vscheduler"
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"


@pytest.mark.image
def test_image_carries_no_installer_and_no_build_leftovers(container):
    # The final stage copies the virtual environment alone: no pip in it, no sources, no
    # wheels, no pip cache. Looked at from outside: the image's user cannot read /root.
    root = Path(_buildah("mount", container).stdout.strip())
    try:
        assert (root / "opt/vscheduler/bin/vscheduler").is_file()
        leftovers = ["opt/vscheduler/bin/pip", "src", "wheels", "root/.cache/pip"]
        assert [path for path in leftovers if (root / path).exists()] == []
    finally:
        _buildah("umount", container, check=False)
    assert _run(container, "vscheduler", "run", "--help").startswith("usage:")
