"""A span's GPU memory: only on the process that owns a CUDA context, from one source fixed per process (NVML's
per-process figure where NVML lists the process, else PyTorch's reserved memory), absent, never 0 nor mixed,
where a reading fails. No GPU here: a stand-in torch.cuda, and a fake ``pynvml`` behind the real ``gpu.Nvml``."""

from __future__ import annotations

import os
import sys
import types

import pytest

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.resources import gpu
from vllm_otel_startup.agent.resources.sampler import Sampler

GB = 1_000_000_000


class _FakeCuda(types.ModuleType):
    def __init__(self, initialized: bool, reserved: int) -> None:
        super().__init__("torch.cuda")
        self.initialized, self.reserved = initialized, reserved
        self.fail = False

    def is_initialized(self) -> bool:
        return self.initialized

    def memory_reserved(self) -> int:
        if self.fail:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return self.reserved


class NVMLError(Exception):
    pass


class FakePynvml(types.ModuleType):
    """The part of pynvml our Nvml uses: two GPUs; the compute processes each lists, by host PID."""

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.procs: dict[int, list[tuple[int, int]]] = {0: [], 1: []}  # device -> [(pid, bytes)]
        self.fail = False
        self.inits = 0

    def nvmlInit(self):  # noqa: N802 - pynvml's names
        self.inits += 1

    def nvmlDeviceGetCount(self):  # noqa: N802
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):  # noqa: N802
        return i

    def nvmlDeviceGetUUID(self, h):  # noqa: N802
        return f"GPU-{h}".encode()

    def nvmlDeviceGetName(self, h):  # noqa: N802
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetComputeRunningProcesses(self, h):  # noqa: N802
        if self.fail:
            raise NVMLError("NVML_ERROR_GPU_IS_LOST")
        return [types.SimpleNamespace(pid=p, usedGpuMemory=b) for p, b in self.procs[h]]


@pytest.fixture
def cuda(monkeypatch):
    """A stand-in torch.cuda, on a host without the NVIDIA driver (unless the test asks for ``nvml``)."""
    c = _FakeCuda(initialized=False, reserved=0)
    monkeypatch.setitem(sys.modules, "torch.cuda", c)
    monkeypatch.setattr(gpu, "driver_present", lambda: False)
    monkeypatch.setattr(gpu, "in_pid_namespace", lambda: False)  # the host's PID namespace (unless a test says)
    return c


@pytest.fixture
def nvml(monkeypatch):
    fake = FakePynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(gpu, "driver_present", lambda: True)
    return fake


def child_with_context(cuda, reserved: int) -> Sampler:
    """A worker's sampler whose thread has just seen its CUDA context (as its _sample does)."""
    s = Sampler(host=False)
    cuda.initialized, cuda.reserved = True, reserved
    s._sample(1, 1, None)
    return s


def delta(s: Sampler, a, b) -> tuple[int | None, str | None]:
    attrs = s.summary(a, b)
    return attrs.get(sc.RES_GPU_MEMORY_DELTA), attrs.get(sc.RES_GPU_MEMORY_SOURCE)


# ---- where a CUDA context exists, and only there --------------------------------------------------------------
def test_gpu_memory_is_read_only_where_a_cuda_context_exists(monkeypatch, cuda):
    worker = Sampler(host=False)
    monkeypatch.delitem(sys.modules, "torch.cuda")
    assert worker.gpu_memory() == (None, None)  # torch.cuda never imported: no context, nothing touched
    monkeypatch.setitem(sys.modules, "torch.cuda", cuda)
    assert worker.gpu_memory() == (None, None)  # imported but no context: asking would create one
    assert worker.gpu_memory_source.source is None
    cuda.initialized, cuda.reserved = True, 16 * GB
    assert worker.gpu_memory() == (16 * GB, "torch_reserved")  # no NVML driver here: PyTorch's figure
    assert Sampler(host=True).gpu_memory() == (None, None)  # the API server: never


def test_a_span_that_creates_the_cuda_context_starts_from_zero(cuda):
    worker = Sampler(host=False)
    a = worker.snapshot()
    cuda.initialized, cuda.reserved = True, 2_000_000
    b = worker.snapshot()
    assert delta(worker, a, b) == (2_000_000, "torch_reserved")
    cuda.initialized = False  # another process, without a context: no GPU attributes at all
    other = Sampler(host=False)
    assert delta(other, other.snapshot(), other.snapshot()) == (None, None)


# ---- one source per process: NVML sees the process / a PID namespace ---------------------------------------
def test_nvml_per_process_memory_where_nvml_lists_the_process(cuda, nvml):
    """Host PID namespace: NVML lists this PID (on both GPUs here); its figure includes the CUDA context."""
    nvml.procs = {0: [(os.getpid(), 500_000_000)], 1: [(os.getpid(), 100_000_000), (1, 9 * GB)]}
    worker = child_with_context(cuda, reserved=0)
    assert worker.gpu_memory_source.source == "nvml_process" and nvml.inits == 1
    a = worker.snapshot()
    nvml.procs[0] = [(os.getpid(), 16_500_000_000)]  # weights loaded
    cuda.reserved = 16 * GB
    b = worker.snapshot()
    assert (a.gpu, a.gpu_src) == (600_000_000, "nvml_process")
    assert delta(worker, a, b) == (16 * GB, "nvml_process")  # never PyTorch's figure at one end


def test_pid_namespace_reads_torch_reserved_for_the_whole_process(cuda, nvml):
    """In a pod NVML lists host PIDs, never ours: PyTorch's figure, fixed when the context is first seen."""
    nvml.procs = {0: [(os.getpid() + 100_000, 500_000_000)], 1: []}
    worker = child_with_context(cuda, reserved=1 * GB)
    assert worker.gpu_memory_source.source == "torch_reserved"
    a = worker.snapshot()
    nvml.procs[0] = [(os.getpid(), 17 * GB)]  # even if NVML later lists a process with our number
    cuda.reserved = 17 * GB
    b = worker.snapshot()
    assert delta(worker, a, b) == (16 * GB, "torch_reserved")


def test_in_a_pid_namespace_nvml_is_never_asked(cuda, nvml, monkeypatch):
    """A pod: a host process may well have our PID number, and NVML would report its memory as ours. The source is
    PyTorch's from the first reading, without waiting for (or loading) NVML."""
    monkeypatch.setattr(gpu, "in_pid_namespace", lambda: True)
    nvml.procs = {0: [(os.getpid(), 30 * GB)], 1: []}  # the host's process with our number
    worker = Sampler(host=False)
    worker._thread = types.SimpleNamespace(is_alive=lambda: True)
    cuda.initialized, cuda.reserved = True, 2 * GB
    assert worker.gpu_memory() == (2 * GB, "torch_reserved")  # no "pending" window
    worker._sample(1, 1, None)
    assert nvml.inits == 0 and worker.gpu_memory() == (2 * GB, "torch_reserved")


def test_with_child_nvml_off_a_worker_never_loads_nvml_and_reads_pytorch(cuda, nvml, monkeypatch):
    """The overhead diagnostic (OTEL_PYTHON_VLLM_STARTUP_OFF=child_nvml): NVML could list the process, but a child
    never loads it; its spans carry PyTorch's figure from the first reading on."""
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_OFF", "child_nvml")
    nvml.procs = {0: [(os.getpid(), 30 * GB)], 1: []}
    worker = Sampler(host=False)
    worker._thread = types.SimpleNamespace(is_alive=lambda: True)
    cuda.initialized, cuda.reserved = True, 2 * GB
    assert worker.gpu_memory() == (2 * GB, "torch_reserved")
    worker._sample(1, 1, None)
    assert nvml.inits == 0 and worker.nvml is None and worker.gpu_memory() == (2 * GB, "torch_reserved")
    # the usual order in a child: its sampler thread sees the CUDA context before any span asks
    first = child_with_context(cuda, reserved=3 * GB)
    assert nvml.inits == 0 and first.nvml is None and first.gpu_memory_source.source == "torch_reserved"


@pytest.mark.parametrize(("status", "nested"), [(b"Name:\tpython\nNSpid:\t4242\t17\n", True),
                                                 (b"Name:\tpython\nNSpid:\t4242\n", False),
                                                 (b"Name:\tpython\n", False)])  # a kernel without NSpid
def test_a_pid_namespace_is_read_from_nspid(tmp_path, status, nested):
    (tmp_path / "status").write_bytes(status)
    assert gpu.in_pid_namespace(str(tmp_path / "status")) is nested
    assert gpu.in_pid_namespace(str(tmp_path / "missing")) is False


def test_the_source_is_pending_while_the_sampler_thread_loads_nvml(cuda, nvml):
    """A child's sampler thread loads NVML after it sees the context; a span end read meanwhile is absent (not
    read from PyTorch at one end and NVML at the other)."""
    nvml.procs = {0: [(os.getpid(), 3 * GB)], 1: []}
    worker = Sampler(host=False)
    worker._thread = types.SimpleNamespace(is_alive=lambda: True)  # sampling, not yet at its next tick
    a = worker.snapshot()  # no context yet
    cuda.initialized, cuda.reserved = True, 2 * GB
    pending = worker.snapshot()
    assert (pending.gpu, pending.gpu_src) == (None, "pending") and nvml.inits == 0
    worker._sample(1, 1, None)  # the thread's tick: NVML, source
    b = worker.snapshot()
    assert delta(worker, a, pending) == (None, None)
    assert delta(worker, pending, b) == (None, None)
    assert delta(worker, a, b) == (3 * GB, "nvml_process")  # created the context: from 0, one source


def test_the_source_waits_for_the_first_memory_the_process_holds(cuda, nvml):
    """torch.cuda says it is initialised before the CUDA runtime creates the context (lazily, at the first
    allocation), and NVML lists the process only from then on: fixing the source at that first sight chose
    PyTorch's figure on every EngineCore of a real H100 start, where NVML does list processes."""
    nvml.procs = {0: [], 1: []}
    worker = child_with_context(cuda, reserved=0)  # initialised, nothing allocated, not listed yet
    assert worker.gpu_memory_source.source is None and nvml.inits == 1
    pending = worker.snapshot()
    assert (pending.gpu, pending.gpu_src) == (None, "pending")
    nvml.procs[0] = [(os.getpid(), 600_000_000)]  # the first allocation: context + memory, listed
    cuda.reserved = 2_000_000
    worker._sample(2, 1, None)
    assert worker.gpu_memory_source.source == "nvml_process"
    assert delta(worker, pending, worker.snapshot()) == (None, None)  # one end unread: absent


def test_memory_pytorch_holds_without_nvml_listing_us_means_torch(cuda, nvml):
    nvml.procs = {0: [(os.getpid() + 1, GB)], 1: []}
    worker = child_with_context(cuda, reserved=1 * GB)
    assert worker.gpu_memory_source.source == "torch_reserved"


# ---- failing readings: absent, never 0, never the other source -------------------------------------------------
def test_a_failing_nvml_reading_is_absent_not_zero_nor_torch(cuda, nvml):
    nvml.procs = {0: [(os.getpid(), 2 * GB)], 1: []}
    worker = child_with_context(cuda, reserved=1 * GB)
    assert worker.gpu_memory_source.source == "nvml_process"
    a = worker.snapshot()
    nvml.fail = True
    b = worker.snapshot()
    assert (b.gpu, b.gpu_src) == (None, "nvml_process")
    assert delta(worker, a, b) == (None, None)  # the end failed
    nvml.fail = False
    c = worker.snapshot()
    assert delta(worker, b, c) == (None, None)  # the start failed: not "from 0"
    assert delta(worker, a, c) == (0, "nvml_process")  # both ends read: a real 0
    assert worker.gpu_memory_source.source == "nvml_process"  # one failure never switches the source


def test_nvml_failing_when_the_context_is_first_seen_means_torch_for_the_process(cuda, nvml):
    nvml.fail = True
    worker = child_with_context(cuda, reserved=5 * GB)
    assert worker.gpu_memory_source.source == "torch_reserved"
    nvml.fail = False
    nvml.procs = {0: [(os.getpid(), 7 * GB)], 1: []}
    assert worker.gpu_memory() == (5 * GB, "torch_reserved")


def test_a_failing_torch_reading_is_absent(cuda):
    worker = child_with_context(cuda, reserved=1 * GB)
    a = worker.snapshot()
    cuda.fail = True
    b = worker.snapshot()
    assert (b.gpu, b.gpu_src) == (None, "torch_reserved")
    assert delta(worker, a, b) == (None, None)
    assert delta(worker, b, a) == (None, None)


def test_every_reading_failing_leaves_no_gpu_attribute(cuda, nvml):
    nvml.fail = True
    cuda.fail = True
    worker = child_with_context(cuda, reserved=0)
    a, b = worker.snapshot(), worker.snapshot()
    attrs = worker.summary(a, b)
    assert sc.RES_GPU_MEMORY_DELTA not in attrs and sc.RES_GPU_MEMORY_SOURCE not in attrs
    assert attrs[sc.RES_CPU_TIME] >= 0  # the rest of the summary is there


# ---- when NVML is loaded ----------------------------------------------------------------------------------------
def test_a_child_loads_nvml_only_once_its_cuda_context_exists(cuda, nvml, monkeypatch):
    """NVML initialised by an EngineCore while it imported vLLM made those imports 2.3-2.9 s slower on the
    H100 host: children defer it until their own CUDA context exists, the API server until it has started a
    process (its GPU readings begin there; before, it imports)."""
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_HZ", "10")  # fast ticks: descendants every 10th, GPUs 5th
    child = Sampler(host=False)
    child._setup()
    child._sample(1, 1, None)
    assert nvml.inits == 0  # importing, no context yet: no NVML
    cuda.initialized = True
    child._sample(2, 1, None)
    child._sample(3, 1, None)
    assert nvml.inits == 1  # once, after the context exists
    api = Sampler(host=True)
    api._setup()
    api._discover = lambda files=None: None  # no descendant yet
    api._sample(1, 1, None, every=True)  # a busy tick (every 5 s): every reading on it
    assert nvml.inits == 1 and api.nvml is None
    api._discover = lambda files=None: setattr(api, "_tree", {os.getpid()})  # its EngineCore appears
    api._sample(11, 1, None)
    api._sample(21, 1, None)
    assert nvml.inits == 2  # loaded then, once
    assert api.gpu_memory() == (None, None)


def test_a_half_imported_torch_cuda_never_stops_a_childs_sampler(monkeypatch):
    """While torch imports, torch.cuda sits in sys.modules half made (no is_initialized yet): the child's
    sampler must keep sampling (it stopped on the AttributeError, and the EngineCore's and the worker's
    resource series vanished)."""
    monkeypatch.setitem(sys.modules, "torch.cuda", types.ModuleType("torch.cuda"))
    child = Sampler(host=False)
    child.gap_ns = 0  # every tick a reading of its own, however close
    child._sample(1, 1, None)
    child._sample(2, 1, None)
    assert len(child.times) == 2 and child.gpu_memory_source.source is None
    assert child.gpu_memory() == (None, None)


def test_pcie_bytes_come_from_the_drivers_counters_or_not_at_all():
    counters = {198: 1_000, 197: 500}

    def field_values(handle, ids):
        return [types.SimpleNamespace(nvmlReturn=0, valueType=3, value=types.SimpleNamespace(ullVal=counters[i]))
                for i in ids]

    nv = gpu.Nvml.__new__(gpu.Nvml)
    nv.ok, nv._pcie_fields = True, None
    nv._nv = types.SimpleNamespace(nvmlDeviceGetFieldValues=field_values)
    assert nv._pcie_counters("h") == {"pcie_rx": 1_000.0, "pcie_tx": 500.0}
    nv._nv = types.SimpleNamespace(nvmlDeviceGetFieldValues=lambda h, ids: [
        types.SimpleNamespace(nvmlReturn=3, valueType=3, value=None) for _ in ids])  # NOT_SUPPORTED
    nv._pcie_fields = None
    assert nv._pcie_counters("h") == {} and nv._pcie_fields is False


def test_reserved_bytes_come_from_the_allocators_own_statistics_not_the_flattened_copy(monkeypatch):
    """memory_reserved() flattens every allocator statistic into a new dict (~0.5 ms a span end on the H200 host):
    the figure is read from the nested statistics it flattens; another torch falls back to memory_reserved()."""
    cuda = _FakeCuda(initialized=True, reserved=5 * GB)
    cuda.current_device = lambda: 1
    flat_reads = []
    cuda.memory_reserved = lambda: flat_reads.append(1) or 5 * GB
    c = types.ModuleType("torch._C")
    c._cuda_memoryStats = lambda device: {"reserved_bytes": {"all": {"current": 7 * GB if device == 1 else 0}}}
    monkeypatch.setitem(sys.modules, "torch.cuda", cuda)
    monkeypatch.setitem(sys.modules, "torch._C", c)
    assert gpu.reserved_bytes() == 7 * GB and flat_reads == []
    c._cuda_memoryStats = lambda device: {}  # not the layout we know
    assert gpu.reserved_bytes() == 5 * GB and flat_reads == [1]


def test_gpu_sample_hz_sets_how_often_the_api_server_reads_the_gpus(monkeypatch):
    """OTEL_PYTHON_VLLM_STARTUP_GPU_SAMPLE_HZ: NVML device readings every n-th fast tick: at SAMPLE_HZ=10 every 5th
    by default (2 Hz), every 10th at 1 Hz, none at 0; at the default SAMPLE_HZ (2) every tick."""
    assert Sampler(host=True).gpu_every == 1
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_HZ", "10")
    for value, every in (("2", 5), ("1", 10), ("0", 0), ("50", 1)):
        monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_GPU_SAMPLE_HZ", value)
        assert Sampler(host=True).gpu_every == every, value


def test_the_api_server_reads_the_gpus_from_the_first_process_it_starts_on(monkeypatch, nvml):
    """Before the API server starts a process the start is that interpreter importing, nothing on a GPU: no NVML
    readings (each call releases the GIL the import then has to take back). From its first child on, at
    GPU_SAMPLE_HZ."""
    monkeypatch.setenv("OTEL_PYTHON_VLLM_STARTUP_SAMPLE_HZ", "10")  # fast ticks: the GPUs every 5th
    s = Sampler(host=True)
    s.nvml = types.SimpleNamespace(ok=True, device_readings=lambda: read.append(1) or [])
    read: list[int] = []
    monkeypatch.setattr(s, "_discover", lambda files=None: None)  # the tree is set below, not read from /proc
    for tick in range(1, 11):
        s._sample(tick, 1, None)
    assert read == []
    s._tree = {os.getpid() + 1}  # the first child
    for tick in range(11, 21):
        s._sample(tick, 1, None)
    assert len(read) == 2  # ticks 15 and 20: every 5th


# ---- the start's GPUs, not the host's: CUDA_VISIBLE_DEVICES ----------------------------------------------------
HOST = [(i, {"hw.id": f"GPU-{u}", "hw.name": "NVIDIA H100 80GB HBM3", "hw.vendor": "nvidia"})
        for i, u in enumerate(("0a1b", "7c2d", "7c9e", "f00d"))]


@pytest.mark.parametrize(("value", "handles"), [
    (None, [0, 1, 2, 3]),  # unset: every GPU
    ("2", [2]), ("3,1", [3, 1]),  # indices, in CUDA's order
    ("GPU-f00d,GPU-0a", [3, 0]),  # UUIDs, a unique prefix enough
    ("1,GPU-7c,3", [1]),  # an ambiguous prefix: CUDA stops reading there
    ("0,9,1", [0]), ("1,1", [1]),  # no such index / repeated
    ("", []), ("-1", []), ("MIG-4b1c", []),  # none visible; a MIG instance names no whole GPU
])
def test_only_the_gpus_cuda_visible_devices_gives_the_start(value, handles):
    assert [h for h, _ in gpu.visible(HOST, value)] == handles


def test_a_start_pinned_to_one_gpu_reads_that_gpu_alone(monkeypatch, nvml):
    """Two starts side by side on a two-GPU host, one per GPU: each API server's sampler reads its own GPU (NVML
    ignores CUDA_VISIBLE_DEVICES: read unfiltered, each would report, and poll, the other's)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    n = gpu.Nvml()
    assert n.ok and [ident["hw.id"] for _, ident in n.devices] == ["GPU-1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-4b1c")
    n = gpu.Nvml()
    assert not n.ok and n.model == "NVIDIA H100 80GB HBM3" and n.device_readings() == []
