"""What two snapshots say of the interval between them (agent/resources/snapshot.py): a span's resource attributes."""

from __future__ import annotations

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.agent.resources.snapshot import Snapshot, summarize

S = 1_000_000_000


def test_cpu_time_and_average_cores_are_the_exact_deltas_and_the_peak_comes_from_the_readings_inside():
    a, b = Snapshot(0, 0, None, None, rss=100), Snapshot(2 * S, 3 * S, None, None, rss=120)
    attrs = summarize(a, b, [1.2, 1.9], [150, 130])
    assert attrs[sc.RES_CPU_TIME] == 3.0 and attrs[sc.RES_CORES_AVG] == 1.5
    assert attrs[sc.RES_SAMPLES] == 2 and attrs[sc.RES_CORES_PEAK] == 1.9
    assert attrs[sc.RES_RSS_PEAK] == 150  # no high-water mark: the most read inside


def test_a_high_water_mark_that_rose_inside_is_the_rss_peak():
    a = Snapshot(0, 0, None, None, rss=100, hwm=200)
    b = Snapshot(S, 0, None, None, rss=120, hwm=900)
    assert summarize(a, b, [], [150])[sc.RES_RSS_PEAK] == 900


def test_disk_reads_their_rate_and_a_subprocess_waited_for():
    a = Snapshot(0, 0, 1_000, None, child_cpu=0.0)
    b = Snapshot(2 * S, 0, 4 * 10**9 + 1_000, None, child_cpu=0.5, child_rss=7)
    attrs = summarize(a, b, [], [])
    assert attrs[sc.RES_DISK_READ] == 4 * 10**9 and attrs[sc.RES_DISK_READ_GBPS] == 2.0
    assert attrs[sc.RES_CHILDREN_CPU_TIME] == 0.5 and attrs[sc.RES_CHILDREN_RSS_PEAK] == 7
    assert sc.RES_CORES_PEAK not in attrs and sc.RES_CHILDREN_CPU_TIME not in summarize(a, a, [], [])
