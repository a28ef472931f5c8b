"""What of a string may leave the process: the one redaction every exit applies (span and resource attributes,
events, status messages, metric labels, the printout, the local file, the command line's output).

- ``sensitive(name)``: a name (flag, JSON key, query parameter, environment variable) names a secret when one
  of its words (split at ``-_.``, spaces and camelCase) is ``key``/``keys`` or ends in ``key``, is ``secret…``,
  ``password``/``passwd``/``passphrase``/``pwd``, ``credential(s)``, ``auth…`` (not ``author…``), ``cookie``,
  ``bearer``, ``sig``/``signature``, or ``token`` / ends in ``token`` — unless the next word says the value is
  about vocabulary tokens or a location (``bos_token_id``, ``long_prefill_token_threshold``, ``hf_token_path``).
  Words, not substrings: ``--tokenizer``, ``--max-num-batched-tokens`` and ``pass_config`` keep their values.
- ``redact_argv``: the values of sensitive flags (``--flag value …`` up to the next flag: ``--api-key`` takes
  several; and ``--flag=value``); every other value through ``redact_value``.
- ``redact_value``: a value that parses as JSON is walked (and re-serialised when that changed it): string
  values under a sensitive key are blanked (numbers and booleans are kept: they are ids and switches, never
  credentials), every other string is scrubbed; anything else is scrubbed.
- ``redact_url``: in free text, the user-info of every URL (``scheme://user:pw@host``, ``@`` or ``/`` inside the
  password included) and of scheme-less ``user:pw@host:port``, and the values of sensitive query parameters
  (``?token=``, ``sig=``, ``X-Amz-Signature=``, ``key=`` …).
- ``scrub``: ``redact_url`` plus the values of this process's secret environment variables (names that are
  ``sensitive``, user-info passwords of URL-valued variables, ``OTEL_EXPORTER_OTLP_*HEADERS`` values; values
  of at least 8 characters, so common words are never blanked), ``Bearer``/``Basic`` credentials and
  ``name=value`` / ``name: value`` pairs whose name ends in a secret word (``api_key=…``, ``"hf_token": "…"``;
  in free text a lone ``key`` is not enough: ``KeyError: 'x'`` keeps its message), and a command line inside
  the text (``… --api-key k1 k2 …`` up to the next flag or the end of the line, a repr'd list too).
- ``scrub_value`` / ``scrub_attributes`` / ``scrubbed``: attribute values; a list of strings is taken for a command line
  (``redact_argv``: a list is where a command line hides).

Why this shape: the exits are many but the strings are few and short, so one ``scrub`` applied at each exit's
choke point (the span processor before a span ends, the fleet labels, the file encoder, the printout, the
command line's messages) is cheaper to keep right than a redaction per producer. Over-redaction is preferred
to a leak: a URL whose path holds ``host:port/…@…`` loses that part, and a positional argument right after a
secret flag is blanked with it (as ``argparse`` would take it for a second value of a list-valued flag).

Standard library only and cheap to import (imported at every interpreter start): the regular expressions are
compiled on first use, each on its own, the environment's secrets collected once per process on first use
(``forget_env()`` for tests and after the environment changed). So the import costs nearly
nothing, the first scrub pays for compiling and reading the environment, and each span's attributes after it cost
microseconds.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

REDACTED = "<redacted>"
MIN_ENV_SECRET = 8  # shorter environment values are not scrubbed from free text (too likely to be common words)
_NOT_SECRET_ENV = frozenset({"PWD", "OLDPWD"})  # "pwd" is a password elsewhere, the working directory here
_TOKEN_NOT_SECRET_BEFORE = frozenset({
    "id", "ids", "threshold", "budget", "limit", "limits", "count", "counts", "len", "length", "size", "num",
    "type", "types", "index", "idx", "level", "path", "file", "dir", "name", "ratio", "rate",
})


# Compiled on first use, each on its own (a process that scrubs only short names compiles only what they need).
_SOURCES = {
    "words": r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+",
    "secret_word": r"(?:\w*keys?|secret\w*|passw(?:or)?d\w*|passphrase|pwd|credentials?|cookies?|bearer|sig"
                   r"|signatures?|auth(?!or(?:s|ity|ities|ship)?$)\w*)",  # auth, authorization; not author(ity)
    "token_word": r"\w*token",
    "url": r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<rest>[^\s\"'<>`]*)",  # up to white space or a quote
    "bare_userinfo": r"(?<![^\s\"'=,;(\[{<])[^\s\"'=,;(\[{<>@/:]+:[^\s\"'<>`]*@[^\s\"'<>`]*",  # user:pw@host
    "query": r"(?P<sep>[?&;])(?P<name>[^=&;#?\s\"'<>]+)=(?P<val>[^&;#\s\"'<>]*)",
    # HTTP credentials: "Bearer <token>", "Basic <base64>" (not a plain word: "basic configuration")
    "auth_scheme": r"\b(?P<s>[Bb]earer|Basic)\s+(?![A-Z]?[a-z]+\b)[A-Za-z0-9._~+/=:-]{8,}",
    "pair_name": r"(?P<name>[A-Za-z_][\w.-]{0,80})[\"']?\s*[=:]\s*",  # name=, name:, "name": , 'name'=
    "pair_value": r"\"(?:[^\"\\]|\\.)*\"|'[^']*'|\[[^\]]*\]|[^\s\"'&,;)}\]\[{]+",  # quoted, a list, a word
    "redacted_only": r"(?:[\s\"',\[\]]|<redacted>)*",
    "has_flag": r"(?:^|[\s\[(,'\"])--?[A-Za-z]",  # a command line in free text
    "ws": r"(\s+)",
    "token": r"([\[({'\"]*)(.*?)([,'\"\])}]*)",  # a word of a command line in a repr: ['--api-key', 'k']
}
_compiled: dict[str, re.Pattern[str]] = {}


def _re(name: str) -> re.Pattern[str]:
    pattern = _compiled.get(name)
    if pattern is None:
        pattern = _compiled[name] = re.compile(_SOURCES[name])
    return pattern


def _words(name: str) -> list[str]:
    return [w.lower() for w in _re("words").findall(name)]


def _secret_at(words: list[str], i: int) -> bool:
    w = words[i]
    if _re("secret_word").fullmatch(w):
        return True
    if _re("token_word").fullmatch(w):
        return i + 1 == len(words) or words[i + 1] not in _TOKEN_NOT_SECRET_BEFORE
    return False


def sensitive(name: str) -> bool:
    """Whether a flag, JSON key, query parameter or environment variable of this name holds a secret."""
    words = _words(name)
    return any(_secret_at(words, i) for i in range(len(words)))


def _sensitive_in_text(name: str) -> bool:
    """Stricter, for ``name=value`` in free text: the last word is secret (and a lone ``key`` is not)."""
    words = _words(name)
    if not words or not _secret_at(words, len(words) - 1):
        return False
    return len(words) > 1 or words[0] not in ("key", "keys")


# ---- URLs -------------------------------------------------------------------------------------------------
def _userinfo_end(rest: str, need_colon: bool) -> int:
    """Where the user-info of ``rest`` (a URL after ``scheme://``) ends: the index of its ``@``, or -1.
    The last ``@`` before the first ``/`` (``user:p@ss@host``); else, for a password with a ``/`` in it
    (``user:pa/ss@host``), the last ``@`` after a ``user:`` that has no ``/`` before its colon."""
    ats = [i for i, c in enumerate(rest) if c == "@"]
    if not ats:
        return -1
    slash = rest.find("/")
    plain = [i for i in ats if slash < 0 or i < slash]
    if plain and (not need_colon or ":" in rest[:plain[-1]]):
        return plain[-1]
    colon = rest.find(":")
    if colon > 0 and (slash < 0 or colon < slash):
        return ats[-1]
    return -1


def _query(rest: str) -> str:
    if "?" not in rest:
        return rest
    head, _, tail = rest.partition("?")

    def blank(m: re.Match[str]) -> str:
        return f"{m['sep']}{m['name']}={REDACTED}" if m["val"] and sensitive(m["name"]) else m.group(0)

    return head + _re("query").sub(blank, "?" + tail)


def _url(m: re.Match[str]) -> str:
    rest = m["rest"]
    at = _userinfo_end(rest, need_colon=False)
    if at >= 0:
        rest = REDACTED + rest[at:]
    return m["scheme"] + _query(rest)


def redact_url(text: str) -> str:
    """Blank the user-info and the sensitive query values of every URL in ``text`` (scheme-less
    ``user:password@host`` too)."""
    if "@" not in text and "?" not in text:
        return text
    text = _re("url").sub(_url, text)
    if "@" in text:
        text = _re("bare_userinfo").sub(_bare, text)
    return text


def _bare(m: re.Match[str]) -> str:
    token = m.group(0)
    if "://" in token:  # a URL: done above
        return token
    at = _userinfo_end(token, need_colon=True)
    return REDACTED + token[at:] if at > 0 else token


# ---- the environment's secrets ------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def env_secrets() -> tuple[str, ...]:
    """Values of this process's secret environment variables, longest first (collected once)."""
    found: set[str] = set()
    for name, value in list(os.environ.items()):
        if not value or name in _NOT_SECRET_ENV:
            continue
        if name.startswith("OTEL_EXPORTER_OTLP") and name.endswith("HEADERS"):  # key=value,...: credentials
            from urllib.parse import unquote

            for _, _, v in (p.partition("=") for p in value.split(",")):
                plain = unquote(v).strip()
                found.update((v.strip(), plain, plain.rpartition(" ")[2]))
        elif sensitive(name):
            found.add(value.strip())
        if "@" in value and "://" in value:  # a URL with a password (proxies, databases, object stores)
            for m in _re("url").finditer(value):
                at = _userinfo_end(m["rest"], need_colon=False)
                if at > 0:
                    user, _, password = m["rest"][:at].partition(":")
                    found.update((password, m["rest"][:at]) if password else (user,))
    return tuple(sorted((v for v in found if len(v) >= MIN_ENV_SECRET), key=len, reverse=True))


def forget_env() -> None:
    """Collect the environment's secrets again at the next scrub (tests; after the environment changed)."""
    env_secrets.cache_clear()


# ---- free text ------------------------------------------------------------------------------------------------
def _pairs(text: str) -> str:
    """Blank the value of every ``name=value`` / ``name: value`` whose name is secret (names are looked for
    in the values of other pairs too: ``401 Unauthorized: token=…``)."""
    out: list[str] = []
    pos = 0
    for m in _re("pair_name").finditer(text):
        if m.start() < pos or not _sensitive_in_text(m["name"]):
            continue
        v = _re("pair_value").match(text, m.end())
        if v is None or _re("redacted_only").fullmatch(v.group(0)):
            continue
        val = v.group(0)
        shown = {"'": f"'{REDACTED}'", '"': f'"{REDACTED}"', "[": f"[{REDACTED}]"}.get(val[0], REDACTED)
        out += [text[pos:m.end()], shown]
        pos = v.end()
    return "".join(out) + text[pos:] if out else text


def _flag_values(text: str) -> str:
    """The values after a secret flag in a command line inside free text (``… --api-key k1 k2 --port …``)."""
    parts = _re("ws").split(text)
    hiding = changed = False
    for i in range(0, len(parts), 2):
        if i and "\n" in parts[i - 1]:  # a command line ends with its line
            hiding = False
        m = _re("token").fullmatch(parts[i])
        if m is None or not m[2]:
            continue
        if _is_flag(m[2]):
            name, eq, _ = m[2].partition("=")
            hiding = not eq and sensitive(name)
        elif hiding and m[2] != REDACTED:
            parts[i], changed = m[1] + REDACTED + m[3], True
    return "".join(parts) if changed else text


def scrub(text: str) -> str:
    """``text`` with every secret this module knows how to find blanked (see the module docstring)."""
    if not text:
        return text
    for secret in env_secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = redact_url(text)
    if "earer" in text or "Basic" in text:
        text = _re("auth_scheme").sub(lambda m: f"{m['s']} {REDACTED}", text)
    if "=" in text or ":" in text:
        text = _pairs(text)
    if "-" in text and _re("has_flag").search(text):
        text = _flag_values(text)
    return text


def scrub_value(value: Any) -> Any:
    """An attribute value scrubbed: a string; a sequence of strings as a command line (``redact_argv``: a
    list is where a command line hides); anything else as it is."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return redact_argv(value)
    return value


def scrub_attributes(attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The attributes whose values change when scrubbed, with their scrubbed values."""
    changed: dict[str, Any] = {}
    for k, v in (attrs or {}).items():
        new = scrub_value(v)
        if new is not v and new != (list(v) if isinstance(v, tuple) else v):
            changed[k] = new
    return changed


def scrubbed(attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    """All of ``attrs``, the values that change when scrubbed replaced (an event's or a resource's attributes)."""
    attrs = attrs or {}
    return {**attrs, **scrub_attributes(attrs)}


# ---- JSON and command lines -------------------------------------------------------------------------------
def redact_json(value: Any, hide: bool = False) -> Any:
    """A parsed JSON value with the strings under sensitive keys blanked and every other string scrubbed."""
    if isinstance(value, dict):
        return {k: redact_json(v, hide or sensitive(str(k))) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(v, hide) for v in value]
    if isinstance(value, str):
        return REDACTED if hide else scrub(value)
    return value


def redact_value(value: str) -> str:
    """A flag's value: JSON walked by key (see ``redact_json``), anything else scrubbed."""
    stripped = value.strip()
    if stripped[:1] in ("{", "["):
        import json

        try:
            parsed = json.loads(stripped)
        except ValueError:
            return scrub(value)
        clean = redact_json(parsed)
        return value if clean == parsed else json.dumps(clean, separators=(",", ":"))
    return scrub(value)


def _is_flag(arg: str) -> bool:
    return arg.startswith("-") and len(arg) > 1 and not arg[1].isdigit() and arg[1] != "."


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line as it may be exported (see the module docstring)."""
    out: list[str] = []
    hiding = False
    for arg in argv:
        arg = str(arg)
        if _is_flag(arg):
            name, eq, value = arg.partition("=")
            hiding = sensitive(name) and not eq
            if eq:
                out.append(f"{name}={REDACTED if sensitive(name) else redact_value(value)}")
            else:
                out.append(scrub(arg))
            continue
        out.append(REDACTED if hiding else redact_value(arg))
    return out


def redact_texts(values: Iterable[Any]) -> list[str]:
    """Every value as a scrubbed string (lists of names, paths, messages)."""
    return [scrub(str(v)) for v in values]
