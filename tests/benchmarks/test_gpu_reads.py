"""What the GPU queue's extra runs are read by: py-spy profiles (``python -m benchmarks profiles``) and
PYTHONPROFILEIMPORTTIME's lines (``python -m benchmarks imports``)."""

from __future__ import annotations

from benchmarks import imports, profiles


def test_profile_diff_reads_a_processes_threads_and_main_thread_functions_from_py_spy_raw_output(tmp_path):
    raw = tmp_path / "profile.txt"
    raw.write_text(
        'process 1:"vllm serve";process 2:"python3 -c from multiprocessing.spawn import spawn_main; spawn_main()";'
        "thread (2): MainThread;run (core.py:10);capture (runner.py:20) 300\n"
        'process 1:"vllm serve";process 2:"python3 -c from multiprocessing.spawn import spawn_main; spawn_main()";'
        "thread (2): MainThread;run (core.py:11);load (backends.py:5) 100\n"
        'process 1:"vllm serve";process 2:"python3 -c from multiprocessing.spawn import spawn_main; spawn_main()";'
        "thread (3): vllm-otel-startup-sampler;_run (sampler.py:1) 50\n"
        'process 1:"vllm serve";thread (1): MainThread;serve (api.py:1) 999\n'
        'process 1:"vllm serve";thread (1): MainThread;<module> (vllm:5);wrapper (vllm_otel_startup/x/wrappers.py:1);'
        "main (main.py:95);_find_and_load (<frozen importlib._bootstrap>:1) 7\n")
    threads, inclusive, own, ours = profiles.load(raw, "spawn_main")
    assert threads == {"MainThread": 400, "vllm-otel-startup-sampler": 50}  # the API server's samples are not its
    assert inclusive["run (core.py)"] == 400 and own["capture (runner.py)"] == 300 and own["load (backends.py)"] == 100
    assert not ours
    # the launched process (py-spy may read its title as ""), and the wrapper of ours under vLLM's call in it
    threads, inclusive, own, ours = profiles.load(raw, profiles.LAUNCH)
    assert threads == {"MainThread": 1006, "MainThread, a frame of ours on its stack": 7}
    assert ours == {"wrapper (vllm_otel_startup/x/wrappers.py)": 7}


def test_import_times_are_split_per_interpreter_with_the_launcher_and_the_resource_tracker_set_aside():
    head = imports.HEADER + "\n"

    def line(us: int, mod: str) -> str:
        return f"import time: {us:>9} | {us:>10} | {mod}\n"

    log = (head + line(100, "opentelemetry.instrumentation") +  # opentelemetry-instrument, before it execs vllm
           head + line(5000, "torch") + line(300, "vllm") + "INFO 12:00:00 vLLM API server\n" +
           head + line(50, "multiprocessing.resource_tracker") +
           head + line(7000, "torch") + line(400, "vllm") + line(20, "late_api_import") +
           line(900, "vllm.v1.engine.core") + line(30, "late_api_import"))  # seen twice: the second is the API's
    segs = imports.import_segments(log)
    assert [sorted(s) for s in segs[2:]] == [["multiprocessing.resource_tracker"],
                                             ["late_api_import", "torch", "vllm", "vllm.v1.engine.core"]]
    assert segs[1]["late_api_import"] == 30  # given to the busiest earlier interpreter without it
    api, core = imports.main_two(segs)
    assert api == {"torch": 5000, "vllm": 300, "late_api_import": 30} and core["vllm.v1.engine.core"] == 900
