"""Which factor of vLLM's compile-cache key changed, and what to pin: from the key, factor hashes and
per-factor digests the torch.compile span carries (agent/causes/compile_key.py), between two starts (compare) or
against the nearest key cached on the same root (the start's own ``vllm.compile.changed_factors``).

Stdlib only, no I/O: the printed-at-ready summary imports it inside the server process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm_otel_startup import semconv as sc
from vllm_otel_startup.model.spanmodel import Span

FACTOR_HASHES = (("env", sc.COMPILE_FACTOR_ENV), ("config", sc.COMPILE_FACTOR_CONFIG),
                 ("code", sc.COMPILE_FACTOR_CODE), ("compiler", sc.COMPILE_FACTOR_COMPILER))


@dataclass(frozen=True)
class KeyInfo:
    """One start's compile-cache key as its torch.compile span recorded it."""

    key: str
    hashes: dict[str, str]  # env / config / code / compiler -> vLLM's hash
    env: dict[str, str]  # env factor -> digest
    config: dict[str, dict[str, str]]  # sub-config -> {"#": hash, field: digest}
    nearest: str | None
    changed: tuple[str, ...]  # vs nearest: env:NAME | config | code | compiler
    source: str
    other_keys: int | None = None  # keys other than this one on the cache root (None: not recorded)


def _json(v: Any) -> dict:
    import json  # lazy: the printed-at-ready summary imports this module inside the server

    try:
        d = json.loads(v) if isinstance(v, str) else None
    except ValueError:
        return {}
    return d if isinstance(d, dict) else {}


def key_info(spans: list[Span]) -> KeyInfo | None:
    """The first torch.compile span that carries a key (a start compiles one model graph per process)."""
    found = sorted((s for s in spans if s.attrs.get(sc.PHASE) == "torch_compile" and s.attrs.get(sc.COMPILE_CACHE_KEY)),
                   key=lambda s: s.start)
    if not found:
        return None
    a = found[0].attrs
    changed = a.get(sc.COMPILE_CHANGED_FACTORS) or ()
    return KeyInfo(str(a[sc.COMPILE_CACHE_KEY]), {k: str(a[attr]) for k, attr in FACTOR_HASHES if a.get(attr)},
                   {str(k): str(v) for k, v in _json(a.get(sc.COMPILE_FACTOR_ENV_DIGEST)).items()},
                   {str(k): v for k, v in _json(a.get(sc.COMPILE_FACTOR_CONFIG_DIGEST)).items() if isinstance(v, dict)},
                   a.get(sc.COMPILE_NEAREST_KEY), tuple(str(c) for c in changed),
                   str(a.get(sc.COMPILE_FACTORS_SOURCE) or ""),
                   a[sc.COMPILE_OTHER_KEYS] if isinstance(a.get(sc.COMPILE_OTHER_KEYS), int) else None)


def key_diff(a: KeyInfo, b: KeyInfo) -> list[str]:
    """The factors that differ between two keys, as precisely as the digests allow: ``env NAME``,
    ``config sub_config.field`` (or the sub-config alone), ``code``, ``compiler``. Empty when the keys match."""
    if a.key == b.key:
        return []
    out: list[str] = []
    for factor, _ in FACTOR_HASHES:
        ha, hb = a.hashes.get(factor), b.hashes.get(factor)
        if ha is None or hb is None or ha == hb:
            continue
        if factor == "env":
            names = [n for n in sorted(set(a.env) | set(b.env)) if a.env.get(n) != b.env.get(n)]
            out += [f"env {n}" for n in names] or ["env (variables not recorded)"]
        elif factor == "config":
            out += _config_diff(a.config, b.config) or ["config (fields not recorded)"]
        else:
            out.append(factor)
    if not out:  # the factor hashes are missing on one side: the key is all we can compare
        out.append("key (factors not recorded on both starts)")
    return out


def _config_diff(a: dict[str, dict[str, str]], b: dict[str, dict[str, str]]) -> list[str]:
    out = []
    for sub in sorted(set(a) | set(b)):
        da, db = a.get(sub, {}), b.get(sub, {})
        if da.get("#") == db.get("#") and da == db:
            continue
        fields = [f for f in sorted(set(da) | set(db)) if f != "#" and da.get(f) != db.get(f)]
        if sub == "vllm":
            out.append("config vLLM version")
        elif fields:
            out += [f"config {sub}.{f}" for f in fields]
        elif da.get("#") != db.get("#"):
            out.append(f"config {sub}")
    return out


def from_changed(changed: tuple[str, ...] | list[str]) -> list[str]:
    """The span's own ``changed_factors`` (env:NAME, config:sub.field, code, compiler) in key_diff's wording."""
    out = [c.replace(":", " ", 1) for c in changed]
    return ["config vLLM version" if c == "config vllm" else c for c in out]


def pin_hint(factors: list[str]) -> str:
    """What to pin so the next restart finds this key again."""
    env = [f[4:] for f in factors if f.startswith("env ") and "(" not in f]
    cfg = [f[7:] for f in factors if f.startswith("config ") and "(" not in f and f != "config vLLM version"]
    parts = []
    if env:
        names = ", ".join(env)
        parts.append(f"{names} differ{'s' if len(env) == 1 else ''} between starts and vLLM folds every known "
                     f"VLLM_* variable into the key: pin {'it' if len(env) == 1 else 'them'} to one value in the pod "
                     "spec (not a per-pod IP or hostname), or leave unset")
    if cfg:
        fields = ", ".join(cfg)
        parts.append(f"the config differs in {fields}: keep it identical across restarts, or pre-warm one cache "
                     "per value (one start at image build)")
    if any(f.startswith(("env (", "config (")) or f in ("env", "config") for f in factors):
        parts.append("keep the environment and the compilation-relevant config identical across restarts")
    if "code" in factors:
        parts.append("the traced vLLM/model source changed: start the same image (vLLM build, model code)")
    if "compiler" in factors:
        parts.append("the compiler hash changed: the same torch version and Inductor configuration")
    if "config vLLM version" in factors:
        parts.append("a different vLLM version: each version compiles once (pre-warm it at image build)")
    return "; ".join(parts)


def describe(factors: list[str]) -> str:
    return ", ".join(factors)
