"""version.py: the package's one version string, the one its metadata and the command line report."""

from __future__ import annotations

from importlib.metadata import version

from vllm_otel_startup.version import __version__


def test_the_version_is_the_installed_distributions_and_reads_as_a_release():
    assert __version__ == version("vllm-otel-startup")
    assert all(part.isdigit() for part in __version__.split("."))
