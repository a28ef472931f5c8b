"""The shared real instrumented vLLM starts of the e2e tier (the run's backends, tiny model and work directory are
tests/conftest.py's).

Every start runs once per run and is shared by the tests that read it (a start costs ~1 minute). Each is a plan
(support/plans.py), queued when the run begins and made in the background, as many at once as the machine has
cores for (support/start_pool.py). The shared starts are defined here and read through a fixture of the same name,
which returns a ``Later``: its attributes are the ``Observed`` start's, once it is there. A skip or failure inside a
start reaches the tests that read it.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
from e2e_observed import Observed, observe
from e2e_params import COMPILE_KEY_NS, HUB_RATE, HUB_REPO, P2P_HOST, SLOW_RATE, WEIGHTS_NS

from support import harness
from support.plans import Session, plan
from support.start_pool import Later

pytestmark = pytest.mark.e2e


@pytest.hookimpl(trylast=True)  # after `-m` has deselected: the fast lane (`-m "not e2e"`) needs no e2e environment
def pytest_collection_modifyitems(config, items):
    chosen = any(item.get_closest_marker("e2e") for item in items)
    if chosen and not harness.VENV.joinpath("bin/vllm").exists():
        pytest.exit(f"e2e environment missing at {harness.E2E_HOME}: run tests/e2e/bootstrap.sh first", 2)


def padded(s: Session) -> Path:
    """The tiny model with its embedding and LM head padded to 200000 rows: 206 MB of weights to move."""
    return s.resource("padded_model", lambda: harness.make_tiny_model(s.workdir / "padded-model", "--vocab", "200000"))


@pytest.fixture(scope="session")
def padded_model(e2e) -> Path:
    return padded(e2e)


# ---- the shared starts (each read through the fixture of its name) -------------------------------------------


# Secrets planted in every form the redaction knows (tests/e2e/test_secrets.py): name -> value.
PLANTED = {name: f"zq-planted-{name}-{i}7f3a9c" for i, name in enumerate((
    "api_key_1", "api_key_2", "json_token", "json_env", "mirror_password", "query_sig", "origin_at_1",
    "origin_at_2", "origin_slash_1", "origin_slash_2", "origin_query", "bare_password", "hf_token", "otlp_header"))}
ORIGINS = [f"https://admin:{PLANTED['origin_at_1']}@{PLANTED['origin_at_2']}@example.invalid",
           f"https://admin:{PLANTED['origin_slash_1']}/{PLANTED['origin_slash_2']}@example.invalid",
           f"https://example.invalid/?token={PLANTED['origin_query']}",
           f"svc:{PLANTED['bare_password']}@db.invalid:5432",
           f"https://admin:{harness.SECRET_URL_PASSWORD}@example.invalid"]


@plan("eager", alone=True)  # its tests read its CPU figures (a CPU-bound import keeps one core busy)
def _eager(s: Session) -> Observed:
    """Eager start over OTLP http/protobuf through the collector, with secrets planted in argv (a list-valued
    --api-key, a JSON flag value, URLs with credentials in several forms) and in the environment (HF_TOKEN,
    *_API_KEY, a URL with a password, OTLP headers): one start for the trace tests and the secrets tests (a start
    costs ~1 minute of CI; the secrets' own start, eager too, differed only in what it planted)."""
    p, spooled, titles = PLANTED, [], {}
    overrides = {"auth_token": p["json_token"], "note": p["json_env"],
                 "mirror": f"https://mirror:{p['mirror_password']}@mirror.invalid/m?sig={p['query_sig']}"}
    start = harness.serve(
        s.tiny_model, s.workdir / "eager", s.backends,
        args=["--enforce-eager", "--api-key", p["api_key_1"], p["api_key_2"], harness.SECRET_API_KEY,
              "--hf-overrides", json.dumps(overrides), "--allowed-origins", json.dumps(ORIGINS)],
        env={"HF_TOKEN": p["hf_token"], "HUGGING_FACE_HUB_TOKEN": harness.SECRET_HF_TOKEN,
             "MY_SERVICE_API_KEY": p["json_env"], "OTEL_EXPORTER_OTLP_HEADERS": f"x-api-key={p['otlp_header']}",
             "MY_SERVICE_URL": f"https://svc:{harness.SECRET_URL_PASSWORD}@example.invalid/v1"},
        # PYTHONPATH first: OpenTelemetry's bootstrap rewrites it, and vLLM's process titles must survive that
        env_first={"PYTHONPATH": str(s.workdir / "empty-pythonpath")},
        on_ready=lambda proc: (spooled.extend(  # the children's spool, while the server runs (removed at exit)
            f.read_text(errors="replace") for f in (s.workdir / "eager" / "tmp").rglob("*.json")),
            titles.update(harness.process_titles(proc.pid))),
    )
    obs = observe(s.backends, start)
    obs.planted, obs.spooled, obs.titles = dict(p), spooled, titles
    return obs


@plan("compiled_cold")
def _compiled_cold(s: Session) -> Observed:
    """Default (torch.compile) start on an empty cache root, OTLP over gRPC."""
    return observe(s.backends, harness.serve(s.tiny_model, s.workdir / "compiled", s.backends, protocol="grpc",
                                              namespace="compiled"))


@plan("compiled_warm", after=("compiled_cold",))
def _compiled_warm(s: Session) -> Observed:
    """The same start again with the same cache root."""
    return observe(s.backends, harness.serve(s.tiny_model, s.workdir / "compiled", s.backends, namespace="compiled"))


def omp_binds(ranks: int) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for ``ranks`` CPU workers: one core each, of the cores this process may use
    (a host may give the suite any cores, not 0 and 1; with fewer cores than ranks, they share)."""
    cores = sorted(os.sched_getaffinity(0))
    return "|".join(str(cores[i % len(cores)]) for i in range(ranks))


@plan("tensor_parallel", alone=True)
def _tensor_parallel(s: Session) -> Observed:
    """Two tensor-parallel workers (CPU: one NUMA node here, so each worker's OpenMP threads are bound by hand). Alone:
    its tests hold it to the 98 % goal, and beside another start one rank allocated its KV cache in 1.85 s, the other
    in 0.45 s, then waited for it (95.4 %; 98.9-99.1 % in the runs before)."""
    return observe(s.backends, harness.serve(
        s.tiny_model, s.workdir / "tp2", s.backends, args=["--enforce-eager", "--tensor-parallel-size", "2"],
        env={"VLLM_CPU_OMP_THREADS_BIND": omp_binds(2)}, warm_modelinfo=True))


@plan("bad_model")
def _bad_model(s: Session) -> Observed:
    return observe(s.backends, harness.serve(s.workdir / "no-such-model", s.workdir / "bad", s.backends,
                                              expect_ready=False, timeout=300))


# compile-cache forensics (tests/e2e/test_compile_key.py): compiled starts on the compiled starts' cache root, after
# the warm one, each changing one thing against the cold start (the baseline: its key is the first in the root): a
# host-like env value vLLM folds into the key (should not matter), the model length (should). They report into a
# namespace of their own: a start "warm" by its cache root that misses is kept out of the compiled fleet's cold/warm
# comparison.


def _compile_key_start(s: Session, **kw) -> Observed:
    return observe(s.backends, harness.serve(s.tiny_model, s.workdir / "compiled", s.backends,
                                              namespace=COMPILE_KEY_NS, **kw))


@plan("compiled_env_changed", after=("compiled_warm",))
def _compiled_env_changed(s: Session) -> Observed:
    return _compile_key_start(s, env={"VLLM_P2P_SIDE_CHANNEL_HOST": P2P_HOST})


@plan("compiled_len_changed", after=("compiled_env_changed",))
def _compiled_len_changed(s: Session) -> Observed:
    return _compile_key_start(s, args=["--max-model-len", "128"])  # the model allows 256


# ---- weights from the hub and from slow storage (tests/e2e/test_weight_sources.py) -------------------------------
# The hub download and the slow storage are measured against their rate limits: those starts run with the machine
# to themselves (alone), so a start beside them does not take the CPU the transfer needs.


def _hub(s: Session):
    """A hub-protocol server on 127.0.0.1 (support/hub_server.py) serving the padded model at HUB_RATE."""
    from support.hub_server import HubProcess

    return s.resource("hub", lambda: HubProcess({HUB_REPO: padded(s)}, rate=HUB_RATE).start(), close=HubProcess.stop)


def _hub_serve(s: Session) -> harness.Start:
    return harness.serve(Path(HUB_REPO), s.workdir / "hub", s.backends, args=["--enforce-eager"],
                         namespace=WEIGHTS_NS, warm_modelinfo=True,
                         env={"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0", "HF_ENDPOINT": _hub(s).url,
                              "HF_HOME": str(s.workdir / "hf-home")})


@plan("hub_download", alone=True)
def _hub_download(s: Session) -> Observed:
    """`vllm serve ORG/NAME` with an empty HF_HOME: the weights come down from the hub server."""
    hub = _hub(s)
    obs = observe(s.backends, _hub_serve(s))
    stats = hub.stats()  # one reading of both
    obs.hub_bytes_sent, obs.hub_sends = stats["bytes_sent"], stats["sends"]
    return obs


@plan("hub_cached", after=("hub_download",), alone=True)
def _hub_cached(s: Session) -> Observed:
    """The same start again with the same HF_HOME: the hub cache has the weights. Alone too: its local-disk rate is
    the yardstick the slow storage's and the fleet panel's are compared with, and beside two compiled starts it fell
    to 0.028 GB/s (a CPU-bound copy on a starved host), barely above the 0.025 GB/s FUSE limit."""
    hub = _hub(s)
    before = hub.bytes_sent
    obs = observe(s.backends, _hub_serve(s))
    obs.hub_bytes_sent = hub.bytes_sent - before
    return obs


@plan("slow_storage", alone=True)
def _slow_storage(s: Session) -> Observed:
    """The padded model served from a throttled FUSE passthrough mount (support/slow_fs.py) at SLOW_RATE."""
    from support import ci
    from support.slow_fs import SlowMount, unusable

    why = unusable()
    if why is not None:
        ci.missing(f"no throttled FUSE mount possible: {why}", "tests/e2e/bootstrap_remote.sh (and /dev/fuse)")
    if importlib.util.find_spec("fuse") is None:
        ci.missing("fusepy is not installed", "tests/e2e/bootstrap_remote.sh")
    with SlowMount(padded(s), s.workdir / "slow-mnt", SLOW_RATE, s.workdir / "slow-fs.log") as mount:
        start = harness.serve(mount.path, s.workdir / "slow", s.backends, args=["--enforce-eager"],
                              namespace=WEIGHTS_NS, warm_modelinfo=True)
    return observe(s.backends, start)


# ---- the fixtures that read them ----------------------------------------------------------------------------------


def _reader(key: str):
    @pytest.fixture(scope="session", name=key)
    def read(e2e) -> Later:
        return e2e.later(key)
    read.__doc__ = f"The shared start ``{key}`` (being made in the background: a Later)."
    return read


for _key in ("eager", "compiled_cold", "compiled_warm", "tensor_parallel", "bad_model",
             "compiled_env_changed", "compiled_len_changed", "hub_download", "hub_cached",
             "slow_storage"):
    globals()[f"_{_key}_fixture"] = _reader(_key)
