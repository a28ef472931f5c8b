"""Session fixtures: real backends, a tiny model built offline, and real instrumented vLLM starts.

Each start runs once per session and is shared by the tests that read it (a start costs ~1 minute). The starts are
made in the background (support/start_pool.py: as many at once as the machine has cores for) from the moment the
first e2e test runs: a start fixture returns a ``Later``, whose attributes are the ``Observed`` start's once it is
there. Everything a start needs from other fixtures is resolved when the fixture is set up (in pytest's thread);
the start itself, and any check that may skip it, runs in the pool, so a skip or failure reaches the tests that read
it, not the prefetch.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # faults.py
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # support/: shared with the benchmark scripts

from e2e_ahead import queue_ahead  # noqa: E402
from e2e_observed import Observed, observe  # noqa: E402
from e2e_params import COMPILE_KEY_NS, HUB_RATE, HUB_REPO, P2P_HOST, SLOW_RATE, WEIGHTS_NS  # noqa: E402

from support import harness  # noqa: E402
from support.start_pool import SLOTS, Later, StartPool  # noqa: E402

pytestmark = pytest.mark.e2e


@pytest.hookimpl(trylast=True)  # after `-m` has deselected: the fast lane (`-m "not e2e"`) needs no e2e environment
def pytest_collection_modifyitems(config, items):
    selected = any(item.get_closest_marker("e2e") for item in items)
    if selected and not harness.VENV.joinpath("bin/vllm").exists():
        pytest.exit(f"e2e environment missing at {harness.E2E_HOME}: run tests/e2e/bootstrap.sh first", 2)


@pytest.fixture(scope="session")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="session")
def backends(workdir):
    b = harness.Backends(workdir / "backends").start()
    yield b
    b.stop()


@pytest.fixture(scope="session")
def tiny_model(workdir) -> Path:
    return harness.make_tiny_model(workdir / "tiny-model")


@pytest.fixture(scope="session")
def starts():
    pool = StartPool("tests/e2e/conftest.py")
    yield pool
    pool.close()


# The shared starts, longest chains first: the pool takes them in this order (a test that reads one not yet begun
# makes it itself). Test modules with starts of their own queue them the same way (e.g. test_loaders.py).
AHEAD = ("compile_key_base", "compiled_env_changed", "compiled_len_changed", "compiled_cold", "compiled_warm",
         "hub_download", "hub_cached", "slow_storage", "tensor_parallel", "eager", "secrets_start", "bad_model")


@pytest.fixture(scope="session", autouse=True)
def _shared_starts_ahead(request, starts):
    queue_ahead(request, AHEAD)


@pytest.fixture(scope="session")
def eager(backends, tiny_model, workdir, starts) -> Later:
    """Eager start over OTLP http/protobuf through the collector, with secrets planted in argv and env."""
    return starts.ahead("eager", lambda: observe(backends, harness.serve(
        tiny_model, workdir / "eager", backends,
        args=["--enforce-eager", "--api-key", harness.SECRET_API_KEY,
              "--allowed-origins", f'["https://admin:{harness.SECRET_URL_PASSWORD}@example.invalid"]'],
        env={"HF_TOKEN": harness.SECRET_HF_TOKEN,
             "MY_SERVICE_URL": f"https://svc:{harness.SECRET_URL_PASSWORD}@example.invalid/v1"},
    )))


# Secrets planted in every form the redaction knows (tests/e2e/test_secrets.py): name -> value.
PLANTED = {name: f"zq-planted-{name}-{i}7f3a9c" for i, name in enumerate((
    "api_key_1", "api_key_2", "json_token", "json_env", "mirror_password", "query_sig", "origin_at_1",
    "origin_at_2", "origin_slash_1", "origin_slash_2", "origin_query", "bare_password", "hf_token", "otlp_header"))}


@pytest.fixture(scope="session")
def secrets_start(backends, tiny_model, workdir, starts) -> Later:
    """Eager start with secrets planted in argv (list-valued --api-key, a JSON flag value, URLs with
    credentials in several forms) and in the environment (HF_TOKEN, *_API_KEY, OTLP headers)."""
    return starts.ahead("secrets_start", lambda: _secrets_start(backends, tiny_model, workdir))


def _secrets_start(backends, tiny_model, workdir) -> Observed:
    p, spooled = PLANTED, []
    overrides = {"auth_token": p["json_token"], "note": p["json_env"],
                 "mirror": f"https://mirror:{p['mirror_password']}@mirror.invalid/m?sig={p['query_sig']}"}
    origins = [f"https://admin:{p['origin_at_1']}@{p['origin_at_2']}@example.invalid",
               f"https://admin:{p['origin_slash_1']}/{p['origin_slash_2']}@example.invalid",
               f"https://example.invalid/?token={p['origin_query']}", f"svc:{p['bare_password']}@db.invalid:5432"]
    start = harness.serve(
        tiny_model, workdir / "secrets", backends,
        args=["--enforce-eager", "--api-key", p["api_key_1"], p["api_key_2"],
              "--hf-overrides", json.dumps(overrides), "--allowed-origins", json.dumps(origins)],
        env={"HF_TOKEN": p["hf_token"], "MY_SERVICE_API_KEY": p["json_env"],
             "OTEL_EXPORTER_OTLP_HEADERS": f"x-api-key={p['otlp_header']}"},
        on_ready=lambda proc: spooled.extend(  # the children's spool, while the server runs (removed at exit)
            f.read_text(errors="replace") for f in (workdir / "secrets" / "tmp").rglob("*.json")),
        warm_modelinfo=True,
    )
    obs = observe(backends, start)
    obs.planted, obs.spooled = dict(p), spooled
    return obs


@pytest.fixture(scope="session")
def compiled_cold(backends, tiny_model, workdir, starts) -> Later:
    """Default (torch.compile) start on an empty cache root, OTLP over gRPC."""
    return starts.ahead("compiled_cold", lambda: observe(backends, harness.serve(
        tiny_model, workdir / "compiled", backends, protocol="grpc", namespace="compiled")))


@pytest.fixture(scope="session")
def compiled_warm(backends, tiny_model, workdir, compiled_cold, starts) -> Later:
    """The same start again with the same cache root."""
    def make() -> Observed:
        compiled_cold.result()  # the same cache root: after the cold start
        return observe(backends, harness.serve(tiny_model, workdir / "compiled", backends, namespace="compiled"))
    return starts.ahead("compiled_warm", make)


def omp_binds(ranks: int) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for ``ranks`` CPU workers: one core each, of the cores this process may use
    (a host may give the suite any cores, not 0 and 1; with fewer cores than ranks, they share)."""
    cores = sorted(os.sched_getaffinity(0))
    return "|".join(str(cores[i % len(cores)]) for i in range(ranks))


@pytest.fixture(scope="session")
def tensor_parallel(backends, tiny_model, workdir, starts) -> Later:
    """Two tensor-parallel workers (CPU: one NUMA node here, so each worker's OpenMP threads are bound by hand)."""
    return starts.ahead("tensor_parallel", lambda: observe(backends, harness.serve(
        tiny_model, workdir / "tp2", backends, args=["--enforce-eager", "--tensor-parallel-size", "2"],
        env={"VLLM_CPU_OMP_THREADS_BIND": omp_binds(2)}, warm_modelinfo=True)))


@pytest.fixture(scope="session")
def bad_model(backends, workdir, starts) -> Later:
    return starts.ahead("bad_model", lambda: observe(backends, harness.serve(
        workdir / "no-such-model", workdir / "bad", backends, expect_ready=False, timeout=300)))


# compile-cache forensics (tests/e2e/test_compile_key.py): compiled starts on a cache root and fleet of their own
# (after the first, a start there is "warm" by its cache root but misses: kept out of the compiled fleet's cold/warm
# comparison), each changing one thing against the first: a host-like env value vLLM folds into the key (should
# not matter), the model length (should)


def _compile_key_start(starts, name, backends, tiny_model, workdir, after: tuple[Later, ...] = (), **kw) -> Later:
    def make() -> Observed:
        for earlier in after:  # one cache root: in order
            earlier.result()
        return observe(backends, harness.serve(tiny_model, workdir / COMPILE_KEY_NS, backends,
                                                namespace=COMPILE_KEY_NS, **kw))
    return starts.ahead(name, make)


@pytest.fixture(scope="session")
def compile_key_base(backends, tiny_model, workdir, starts) -> Later:
    return _compile_key_start(starts, "compile_key_base", backends, tiny_model, workdir)


@pytest.fixture(scope="session")
def compiled_env_changed(backends, tiny_model, workdir, compile_key_base, starts) -> Later:
    return _compile_key_start(starts, "compiled_env_changed", backends, tiny_model, workdir, (compile_key_base,),
                              env={"VLLM_P2P_SIDE_CHANNEL_HOST": P2P_HOST})


@pytest.fixture(scope="session")
def compiled_len_changed(backends, tiny_model, workdir, compile_key_base, compiled_env_changed, starts) -> Later:
    return _compile_key_start(starts, "compiled_len_changed", backends, tiny_model, workdir,
                              (compile_key_base, compiled_env_changed),
                              args=["--max-model-len", "128"])  # the model allows 256


# ---- weights from the hub and from slow storage (tests/e2e/test_weight_sources.py) -------------------------------


@pytest.fixture(scope="session")
def padded_model(workdir) -> Path:
    """The tiny model with its embedding and LM head padded to 200000 rows: 206 MB of weights to move."""
    return harness.make_tiny_model(workdir / "padded-model", "--vocab", "200000")


@pytest.fixture(scope="session")
def hub(padded_model):
    """A hub-protocol server on 127.0.0.1 (support/hub_server.py) serving the padded model at HUB_RATE."""
    from support.hub_server import HubServer

    server = HubServer({HUB_REPO: padded_model}, rate=HUB_RATE).start()
    yield server
    server.stop()


def _hub_serve(backends, hub, workdir) -> harness.Start:
    return harness.serve(Path(HUB_REPO), workdir / "hub", backends, args=["--enforce-eager"], namespace=WEIGHTS_NS,
                         warm_modelinfo=True,
                         env={"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0", "HF_ENDPOINT": hub.url,
                              "HF_HOME": str(workdir / "hf-home")})


# The hub download and the slow storage are measured against their rate limits: each of those starts runs with the
# machine to itself (SLOTS.alone), so a start beside it does not take the CPU the transfer needs.


@pytest.fixture(scope="session")
def hub_download(backends, hub, workdir, starts) -> Later:
    """`vllm serve ORG/NAME` with an empty HF_HOME: the weights come down from the hub server."""
    def make() -> Observed:
        with SLOTS.alone():
            obs = observe(backends, _hub_serve(backends, hub, workdir))
        obs.hub_bytes_sent = hub.bytes_sent
        return obs
    return starts.ahead("hub_download", make)


@pytest.fixture(scope="session")
def hub_cached(backends, hub, workdir, hub_download, starts) -> Later:
    """The same start again with the same HF_HOME: the hub cache has the weights."""
    def make() -> Observed:
        hub_download.result()
        before = hub.bytes_sent
        obs = observe(backends, _hub_serve(backends, hub, workdir))  # no rate measured: beside other starts
        obs.hub_bytes_sent = hub.bytes_sent - before
        return obs
    return starts.ahead("hub_cached", make)


@pytest.fixture(scope="session")
def slow_storage(backends, padded_model, workdir, starts) -> Later:
    """The padded model served from a throttled FUSE passthrough mount (support/slow_fs.py) at SLOW_RATE."""
    def make() -> Observed:
        from support import ci
        from support.slow_fs import SlowMount, unusable

        why = unusable()
        if why is not None:
            ci.missing(f"no throttled FUSE mount possible: {why}", "tests/e2e/bootstrap_remote.sh (and /dev/fuse)")
        if importlib.util.find_spec("fuse") is None:
            ci.missing("fusepy is not installed", "tests/e2e/bootstrap_remote.sh")
        with SLOTS.alone(), SlowMount(padded_model, workdir / "slow-mnt", SLOW_RATE, workdir / "slow-fs.log") as m:
            start = harness.serve(m.path, workdir / "slow", backends, args=["--enforce-eager"], namespace=WEIGHTS_NS,
                                  warm_modelinfo=True)
        return observe(backends, start)
    return starts.ahead("slow_storage", make)
