"""Diagnostics for overhead measurements, not a user setting: ``OTEL_PYTHON_VLLM_STARTUP_OFF`` names parts of the
agent to leave out, so a benchmark can price each part by starting vLLM with and without it (the overhead
benchmark's ``--variant``). Kept apart from settings.py so that environment_variables.py, which offers the user
settings as ``opentelemetry-instrument`` options, never lists it. Read through ``off()`` only. Standard library only:
the instrumentor reads it at interpreter start.
"""

from __future__ import annotations

from collections.abc import Mapping

from vllm_otel_startup.settings import PREFIX, Setting, text

OFF = Setting(PREFIX + "OFF", "", "diagnostics, for overhead measurements (the overhead benchmark's `--variant`): "
              "parts of the agent to leave out, comma-separated: `instrumentor` (our distro and configurator set up "
              "OpenTelemetry's SDK, its exporters and threads; our instrumentor does nothing: OpenTelemetry alone "
              "under our configuration, the overhead benchmark's `otelonly`), `compile_stages` (PyTorch's compile "
              "regions as "
              "spans), `watchers` (the garbage-collection and import watchers), `probes` (the cause probes), "
              "`span_resources` (each phase span's CPU / I/O / GPU-memory readings), `helper_env` (PyTorch's Python "
              "helpers start without OpenTelemetry's sitecustomize: agent/patching/helper_env.py), `child_nvml` (an "
              "EngineCore or worker never loads NVML: its GPU memory comes from PyTorch's allocator, source "
              "`torch_reserved`), "
              "`phase_spans` (only the patch points a start needs to begin, hand over and end: spawn, ready, guard, "
              "marker and CLI rows, whose spans remain); what the first four and `phase_spans` explain is then "
              "missing from the trace (without `probes` or `phase_spans` the config facts and their fleet labels "
              "too); and, to bisect the agent's core: `export_nudge` (no export threads: the batch processors' own "
              "schedule), `process_context` (the process span is not made the current span: vLLM's own spans are not "
              "its children), `span_processor` (the SDK provider keeps its own id generator and sampler and gets no "
              "span processor of ours: the spans are exported as made, with no phase tags, local file, metrics or "
              "ready printout), `child_hooks` (an EngineCore or worker installs no patch point: its process span "
              "stays open and its start never ends), `child_wrappers` (an EngineCore or worker registers its "
              "post-import hooks, wrapt's import finder included, but wraps nothing: its start never ends either), "
              "`child_agent` (an EngineCore or worker runs nothing of ours, as a helper: only the API server is "
              "traced), `row:TARGET` (that patch point, in every process: "
              "`row:vllm.v1.engine.core:EngineCoreProc.__init__`) and `frameless` (Python >= 3.12: span, ready, "
              "guard and enrich rows are wrapped as on 3.11, instead of traced through `sys.monitoring` with no frame "
              "of ours under vLLM's call)", internal=True)

PARTS = frozenset({"instrumentor", "compile_stages", "watchers", "probes", "span_resources", "helper_env", "child_nvml",
                   "phase_spans", "export_nudge", "process_context", "span_processor", "child_hooks",
                   "child_wrappers", "child_agent", "frameless"})


def off(part: str, environ: Mapping[str, str] | None = None) -> bool:
    """Is ``part`` (one of PARTS, or ``row:TARGET`` in lower case) left out by OTEL_PYTHON_VLLM_STARTUP_OFF?"""
    return part in {x.strip().lower() for x in text(OFF, environ).split(",")}
