"""Package discovery for the layout in pyproject.toml.

Everything else lives in pyproject.toml. Discovery is here because the repository keeps
actions/ and plugins/ beside the core while they install as vscheduler.actions and
vscheduler.plugins; a list of package names once forgot two subpackages and shipped a
program that could not start.
"""

from setuptools import find_packages, setup


def _installed_as(prefix: str, folder: str) -> list[str]:
    """`folder`'s package and its subpackages, named under `prefix`."""
    return [prefix] + [f"{prefix}.{name}" for name in find_packages(folder)]


setup(
    packages=find_packages(include=["vscheduler", "vscheduler.*"])
    + _installed_as("vscheduler.actions", "actions")
    + _installed_as("vscheduler.plugins", "plugins"),
)
