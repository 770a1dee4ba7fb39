"""Importing SING/TACC's ``tuxiv.conf`` into a TaskSpec, with TACC's meaning.

What TACC's ``tcloud`` does with the file (turingaicloud/tcloud-sdk,
``cli/tcloudcli/tuxivconfig.go``; examples and docs in turingaicloud/quickstart,
``tuxiv.conf.md`` and ``example/*/tuxiv.conf``), and what we do:

- ``entrypoint``: ``RunshFile`` writes each item followed by `` \\`` into
  ``run.sh``, so the list is ONE command continued over lines (TACC's TensorFlow
  example splits ``python mnist.py`` and its ``--batch_size=1`` ... over items).
  We join the items with spaces into one shell line, which bash reads the same.
  The two cases where bash would not (an item ending in a ``# comment``, which
  ends the command there; a ``'...'`` string running on into the next item) are
  refused with the item named. Non-string items (``- 3``) are taken as written.
- ``environment``: name, channels, dependencies (a conda spec), and
  ``cachedenvname``: set, tcloud caches the env under ``environment.name``
  (else under an md5 of the dependencies) and reuses it. Here every conda env is
  cached by its content and reused by any task with the same spec, so it is
  accepted; it names the env when ``name`` is absent.
- ``job``: ``name``; ``general``: sbatch long options, written as
  ``#SBATCH --OPTION`` (mapped in ``sbatch``); ``module``; ``env``; ``log``.
- ``${TACC_WORKDIR}`` (the task's working directory), ``${TACC_USERDIR}`` (the
  owner's persistent directory) and ``${TACC_SLURM_USERLOG}``
  (``${TACC_USERDIR}/slurm_log``) are set at run time; in log paths
  (``job.log``, ``output=``, ``error=``) they choose ``log_file`` (in the
  workdir) or ``user_log_file`` (in the persistent directory).

tacc_hub extensions, accepted beside the four parts: ``runtime``, ``outputs``,
``qos``, ``network``, ``code``, and (issue 20) ``array`` (a range, a list or a grid, as in tacc.yaml),
``depends_on`` and ``inputs``. In ``job.general``, ``array=0-15%4`` is the array and
``dependency=afterok:ID[:ID],afterany:ID,afternotok:ID`` waits for those tasks (see ``sbatch``); an
element's index and parameters are ``$TACC_ARRAY_INDEX`` and ``$TACC_PARAM_<NAME>`` in the command
(placeholders are for argv only, and a tuxiv.conf's command is a shell line).

Invariant: pure. Every error names the field (``job.general[2]``) and, when the
text came from a file, its line (``tuxiv.conf line 7: ...`` in the message).
``read_tuxiv`` gives the raw, unvalidated spec mapping (for command-line
overrides applied before validation) and validates it afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from .errors import SpecError
from .sbatch import SBATCH_OPTIONS, UNSAFE_SBATCH, log_target, parse_sbatch, parse_sbatch_located
from .tacc_yaml import normalize_document
from .task import TaskSpec
from .yamlsafe import Located, YamlPath, load_yaml_located

TOP_KEYS = {"entrypoint", "environment", "job", "datasets", "runtime", "outputs", "qos", "network", "code", "array",
            "depends_on", "inputs"}
JOB_KEYS = {"name", "general", "module", "env", "log"}
ENV_KEYS = {"name", "cachedenvname", "channels", "dependencies"}
__all__ = ["SBATCH_OPTIONS", "UNSAFE_SBATCH", "TuxivFile", "entrypoint_command", "load_tuxiv", "parse_sbatch",
           "read_tuxiv", "spec_from_tuxiv", "tuxiv_to_mapping"]

# --- entrypoint: one command, as TACC's run.sh has it ----------------------------------------


def _item_text(value: Any, raw: str | None, field: str) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""  # Go's yaml reads null into a string as ""
    if isinstance(value, bool | int | float):
        if raw is not None:
            return raw  # as written: "010", "1e-3", "yes"
        return str(value).lower() if isinstance(value, bool) else str(value)
    raise SpecError.one(field, "must be a string: words of the command (TACC joins the items into one command)")


def _shell_ends(text: str, start: tuple[str | None, bool]) -> tuple[str | None, bool]:
    """Scan ``text`` as bash would from state (open quote, in a comment); the state at its end."""
    quote, comment = start
    word_start = True
    i = 0
    while i < len(text):
        c = text[i]
        if comment:
            comment = c != "\n"
            word_start = True
        elif quote == "'":
            quote = None if c == "'" else quote
        elif quote == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                quote = None
        elif c == "\\":
            i += 1
            word_start = False
        elif c in "'\"":
            quote = c
            word_start = False
        elif c == "#" and word_start:
            comment = True
        else:
            word_start = c in " \t\n;&|()<>"
        i += 1
    return quote, comment


def entrypoint_command(items: Any, raw: Callable[[YamlPath], str | None] = lambda _: None) -> str:
    """The entrypoint items joined into the one command TACC's run.sh runs (see the module docstring)."""
    if isinstance(items, str):
        items = [items]
    if items is None or items == []:
        raise SpecError.one("entrypoint", "is empty: give the command to run, e.g. - python train.py")
    if not isinstance(items, list):
        raise SpecError.one("entrypoint", "must be a list of strings: one command, its words split over the items")
    words = [_item_text(v, raw(("entrypoint", i)), f"entrypoint[{i}]") for i, v in enumerate(items)]
    state: tuple[str | None, bool] = (None, False)
    for i, word in enumerate(words):
        state = _shell_ends(word, state)
        last = i == len(words) - 1
        if state[1] and not last:
            raise SpecError.one(
                f"entrypoint[{i}]",
                "ends in a shell comment ('# ...'): TACC's run.sh ends the command there and runs the next "
                "items as a command of their own; remove the comment (a YAML comment after the quotes is fine)",
            )
        if state[0] == "'" and not last:
            raise SpecError.one(
                f"entrypoint[{i}]",
                "a '...' string runs on into the next item, where TACC's run.sh would put ' \\' and a line "
                "break inside it; close the quote within the item",
            )
    if state[0] is not None:
        raise SpecError.one(f"entrypoint[{len(words) - 1}]", f"the command has an unclosed {state[0]} quote")
    line = " ".join(words)
    trailing = len(line) - len(line.rstrip("\\"))
    return line + " " if trailing % 2 else line  # run.sh's own " \\" after the last item: an escaped space


# --- the rest ------------------------------------------------------------------------------


def _list_of_str(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return value
    raise SpecError.one(field, "must be a string or a list of strings")


def _env_value(name: str, value: Any, raw: str | None, field: str) -> str:
    """A ``job.env`` value as the string the task sees: scalars only.

    Strings as given; booleans and numbers as written in the file (``A: 010`` is "010", ``B: yes`` is
    "yes"), else as ``str`` (``1`` -> "1", ``true`` -> "true"); null is "" (as Go's yaml, which tcloud
    uses, reads it into a string). Lists and mappings are refused: they would become "[1, 2]".
    """
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool | int | float):
        if raw is not None:
            return raw
        return str(value).lower() if isinstance(value, bool) else str(value)
    raise SpecError.one(field, f"the value of {name[:80]} must be a string, a number or a boolean, "
                               f"not a {'list' if isinstance(value, list) else 'mapping'}")


def _env(value: Any, raw: Callable[[YamlPath], str | None] = lambda _: None) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise SpecError.one(f"job.env.{k!s:.80}", "a variable name must be a string (letters, digits, '_')")
            out[k] = _env_value(k, v, raw(("job", "env", k)), f"job.env.{k}")
        return out
    if isinstance(value, list):
        out = {}
        for i, item in enumerate(value):
            if not isinstance(item, str) or "=" not in item:
                raise SpecError.one(f"job.env[{i}]", "must be KEY=VALUE")
            k, _, v = item.partition("=")
            out[k.strip()] = v
        return out
    raise SpecError.one("job.env", "must be a mapping or a list of KEY=VALUE")


def _conda(conda: Any) -> dict[str, Any]:
    if not isinstance(conda, dict):
        raise SpecError.one("environment", "must be a mapping with name, channels, dependencies")
    extra = sorted(set(map(str, conda)) - ENV_KEYS)
    if extra:
        raise SpecError.one(f"environment.{extra[0]}", f"unknown field (known: {', '.join(sorted(ENV_KEYS))})")
    cached = conda.get("cachedenvname")
    if cached is not None and not isinstance(cached, str | bool):
        raise SpecError.one("environment.cachedenvname", "must be a name (the env is cached under it) or true")
    name = conda.get("name") or (cached if isinstance(cached, str) and cached else None)
    return {
        **({"name": name} if name else {}),
        "channels": _list_of_str(conda.get("channels"), "environment.channels"),
        "dependencies": _list_of_str(conda.get("dependencies"), "environment.dependencies"),
    }


def _put(data: dict[str, Any], dotted: str, value: Any) -> None:
    target = data
    *parents, leaf = dotted.split(".")
    for p in parents:
        target = target.setdefault(p, {})
    target[leaf] = value


def _build(doc: Any, default_name: str, raw: Callable[[YamlPath], str | None]) -> tuple[dict[str, Any], dict[str, str]]:
    """(spec mapping, spec field -> the tuxiv field it came from)."""
    if not isinstance(doc, dict):
        raise SpecError.one("", "tuxiv.conf must be a mapping with entrypoint, environment, job, datasets")
    unknown = sorted(set(map(str, doc)) - TOP_KEYS)
    if unknown:
        raise SpecError.one(unknown[0], f"unknown tuxiv.conf section (known: {', '.join(sorted(TOP_KEYS))})")
    job = doc.get("job") or {}
    if not isinstance(job, dict):
        raise SpecError.one("job", "must be a mapping with name, general, module, env, log")
    bad = sorted(set(map(str, job)) - JOB_KEYS)
    if bad:
        raise SpecError.one(f"job.{bad[0]}", f"unknown job field (known: {', '.join(sorted(JOB_KEYS))})")

    origin = {"name": "job.name", "entrypoint": "entrypoint", "datasets": "datasets",
              "environment.variables": "job.env", "environment.modules": "job.module",
              "environment.conda": "environment", "environment.conda.channels": "environment.channels",
              "environment.conda.dependencies": "environment.dependencies",
              "environment.conda.name": "environment.name", "log_file": "job.log", "user_log_file": "job.log"}
    data: dict[str, Any] = {
        "name": job.get("name") or default_name,
        "code": doc.get("code", {"kind": "local", "path": "."}),
        "entrypoint": {"shell": [entrypoint_command(doc.get("entrypoint"), raw)]},
        "datasets": _list_of_str(doc.get("datasets"), "datasets"),
    }
    for key in ("runtime", "outputs", "qos", "network", "code", "array", "depends_on", "inputs"):
        origin[key] = key
        if key in doc:
            data[key] = doc[key]
    env: dict[str, Any] = {"variables": _env(job.get("env"), raw),
                           "modules": _list_of_str(job.get("module"), "job.module")}
    if doc.get("environment") is not None:
        env["conda"] = _conda(doc["environment"])
        if not doc["environment"].get("name") and doc["environment"].get("cachedenvname"):
            origin["environment.conda.name"] = "environment.cachedenvname"
    data["environment"] = env
    if job.get("log") is not None:
        if not isinstance(job["log"], str):
            raise SpecError.one("job.log", "must be a path such as ${TACC_USERDIR}/logs/run.log")
        try:
            key, path = log_target("log", job["log"])
        except ValueError as exc:
            raise SpecError.one("job.log", str(exc)) from None
        data[key] = path

    options, where = parse_sbatch_located(job.get("general"))
    for key in ("array", "depends_on"):
        if key in options and key in doc:
            raise SpecError.one(where[key], f"give {key} once: here or as the file's {key}, not both")
    for dotted, value in options.items():
        _put(data, dotted, value)
    origin.update(where)
    return data, origin


# --- errors with their line ------------------------------------------------------------------

_STEP_RE = re.compile(r"\[([0-9]+)\]|\.?([^.\[]+)")


def _yaml_path(field: str) -> YamlPath:
    """``job.general[1]`` -> ``("job", "general", 1)``."""
    return tuple(int(m.group(1)) if m.group(1) else m.group(2) for m in _STEP_RE.finditer(field))


@dataclass(frozen=True)
class TuxivFile:
    """A tuxiv.conf read into an unvalidated spec mapping (``data``) that remembers where each part came from."""

    data: dict[str, Any]
    source: str = "tuxiv.conf"
    origin: dict[str, str] = field(default_factory=dict)  # spec field -> tuxiv field
    located: Located | None = None

    def validate(self, data: dict[str, Any] | None = None, overridden: Collection[str] = ()) -> TaskSpec:
        """``data`` (default: ``self.data``, e.g. with overrides applied) as a TaskSpec; errors name their line.

        ``overridden``: spec fields (dotted) that no longer come from the file, so get no line.
        """
        try:
            return TaskSpec.model_validate(normalize_document(self.data if data is None else data))
        except ValidationError as exc:
            err = SpecError.from_validation(exc, "", TaskSpec)
        raise SpecError([(f, self._locate_spec(f, m, overridden)) for f, m in err.errors]) from None

    def _locate_spec(self, spec_field: str, message: str, overridden: Collection[str]) -> str:
        if any(spec_field == o or spec_field.startswith((o + ".", o + "[")) for o in overridden):
            return message
        best = ""
        for prefix in self.origin:
            under = spec_field == prefix or spec_field.startswith((prefix + ".", prefix + "["))
            if under and len(prefix) > len(best):
                best = prefix
        if not best:
            return message
        return self.at(self.origin[best] + spec_field[len(best):], message)

    def at(self, tuxiv_field: str, message: str) -> str:
        """``message`` prefixed with ``SOURCE line N: `` for the line of ``tuxiv_field`` when it is known."""
        line = self.located.line(_yaml_path(tuxiv_field)) if self.located else None
        if line is None or not tuxiv_field:
            return message
        return f"{self.source} line {line}: {message}"


def read_tuxiv(text: str | bytes, source: str = "tuxiv.conf", default_name: str = "tacc-task") -> TuxivFile:
    """Parse and map a tuxiv.conf, without validating the result (see ``TuxivFile.validate``)."""
    located = load_yaml_located(text, source)
    base = TuxivFile({}, source, {}, located)
    try:
        data, origin = _build(located.value, default_name, lambda path: located.raw.get(path))
    except SpecError as exc:
        raise SpecError([(f, base.at(f, m)) for f, m in exc.errors]) from None
    return TuxivFile(data, source, origin, located)


def tuxiv_to_mapping(text: str | bytes, source: str = "tuxiv.conf", default_name: str = "tacc-task") -> dict[str, Any]:
    """The raw, unvalidated spec mapping of a tuxiv.conf (for overrides before validation)."""
    return read_tuxiv(text, source, default_name).data


def load_tuxiv(text: str | bytes, source: str = "tuxiv.conf", default_name: str = "tacc-task") -> TaskSpec:
    return read_tuxiv(text, source, default_name).validate()


def spec_from_tuxiv(doc: Any, default_name: str = "tacc-task") -> TaskSpec:
    """A tuxiv.conf already parsed (no lines to name)."""
    data, origin = _build(doc, default_name, lambda _: None)
    return TuxivFile(data, "tuxiv.conf", origin).validate()
