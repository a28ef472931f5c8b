"""The overhead benchmark's GPU form: its plan as a start queue for ../shared/gpu/driver.py (DRIVER_QUEUE=...),
the driver patched by gpu/driver_lanes.diff for per-start environments, lanes and profiles."""

from __future__ import annotations

from benchmarks.activation import activation
from benchmarks.arm_presets import GPU_DISTRO_PATH, placed
from benchmarks.pairs import arms_of

LOGGING_NAME = "overhead_logging.json"  # copied beside the queue: the driver reads @tools/ as its own folder
DEBUG = {"OTEL_PYTHON_VLLM_STARTUP_DEBUG": "1"}
IMPORTTIME = {"PYTHONPROFILEIMPORTTIME": "1"}  # every interpreter's imports, to its stderr (serve.log)


def gpu_queue(pairs: int, variants: dict[str, dict[str, str]], lanes: int = 1, profile: bool = False,
              tail: dict[str, dict[str, str]] | None = None, tail_pairs: int = 2,
              once: dict[str, dict[str, str]] | None = None, first_pair: int = 1, imports: int = 0) -> list[dict]:
    """Entries for ../shared/gpu/driver.py (its keys; ``env``: extra environment of that start; ``gpu``: with two
    lanes, the GPU of each start: two consecutive starts of a pair run at the same time, one per GPU, the GPUs
    swapped every pair). ``profile``: first a pair under py-spy (``profile``: the driver's patched form,
    gpu/driver_lanes.diff), not counted. ``tail``: after the pairs, ``tail_pairs`` pairs of each named arm
    against plain, one pair of each arm in turn (an arm's ratio then comes from those pairs only). ``once``: instead
    of all that, one plain start and one start of each named arm (pair 1), read by their page faults (per_start).
    ``first_pair`` > 1: more pairs for a machine that has run a queue already (its compile cache filled): no cold
    start, pairs numbered from there, each pair's order as it would have been in one long queue. ``imports``: after
    the profile, that many pairs with ``PYTHONPROFILEIMPORTTIME=1`` in both arms (not counted: read by ``imports``)."""
    log_cfg = {"VLLM_LOGGING_CONFIG_PATH": f"@tools/{LOGGING_NAME}"}  # the driver's folder there
    variants = placed(variants, GPU_DISTRO_PATH)  # the sdkdefaults preset: opentelemetry-distro carried in tools
    # an ``env…`` arm: the cpu form's activation with the GPU machine's paths (the driver, patched by
    # gpu/driver_lanes.diff, reads @R as its state dir; every start there has @R/site:@R/site-otel)
    via_env_gpu = activation("@R/site-otel/opentelemetry/instrumentation/auto_instrumentation", "@R/site:@R/site-otel")
    q = [dict(name="cold_otlp", instr=True, export="otlp", drop=True, est=200, limit=330, env={**log_cfg, **DEBUG})]
    if first_pair > 1:
        q.clear()
    elif lanes > 1:
        q[0]["gpu"] = 0

    def add(pair: int, arms: list[tuple[str, dict[str, str] | None]], label: str = "pair",
            common: dict[str, str] | None = None, **extra: object) -> None:
        for i, (arm, env) in enumerate(arms):
            instr = env is not None
            env = {**(common or {}), **(env or {})}
            # an empty endpoint: the local start file only (the driver starts no sink and sets no endpoint)
            local = instr and env.get("OTEL_EXPORTER_OTLP_ENDPOINT") == ""
            env = {k: v for k, v in env.items() if not (local and k == "OTEL_EXPORTER_OTLP_ENDPOINT")}
            via_env = instr and arm.startswith("env")  # no launcher: what deploy/adoption sets, the driver's paths
            q.append(dict(name=f"{label}{pair}_{arm}", instr=instr, export="otlp" if instr and not local else "none",
                          drop=False, est=90, limit=170, pair=pair, arm=arm,
                          env={**log_cfg, **(DEBUG if instr else {}), **(via_env_gpu if via_env else {}), **env},
                          **({"launcher": False} if via_env else {}), **extra))
            if lanes > 1:
                # each arm on either GPU about equally often: an even number of arms takes each position equally
                # often over a Latin square's rounds, an odd number needs the pair's parity too
                q[-1]["gpu"] = (i + pair * (len(arms) % 2)) % 2

    if once:  # one start of each arm beside one plain start (a bisect read by per_start's page faults)
        add(1, [("plain", None), *once.items()])
        return q
    if profile:
        add(0, arms_of(0, {}), label="profile", profile=True)
    for pair in range(1, imports + 1):
        add(pair, arms_of(pair, {}), label="imports", common=IMPORTTIME)
    for pair in range(first_pair, first_pair + pairs):
        add(pair, arms_of(pair, variants))
    n = first_pair + pairs - 1
    for rnd in range(tail_pairs):  # round robin: a queue cut short still has pairs of every arm; each arm's order
        for name, env in (tail or {}).items():  # (and with two lanes its GPU) flips from one round to the next
            n += 1
            add(n, [("plain", None), (name, env)][:: 1 if rnd % 2 == 0 else -1])
    return q
