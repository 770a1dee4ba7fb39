"""YAML reading that cannot be abused.

Invariant: documents are size-limited, aliases and merge keys are refused
(no "billion laughs"), nesting is depth-limited (PyYAML composes
recursively), only plain data types are built (SafeLoader), a key may appear
once per mapping, and exactly one document is accepted. Every failure is a
``SpecError``.

The number of nodes (scalars, keys included, sequences and mappings) is capped at ``MAX_YAML_NODES``,
counted while composing, so a hostile document stops early instead of costing seconds of CPU (60k keys:
several seconds). The largest legitimate spec is about 9,000 nodes, by the schema's own max_length limits:
entrypoint 4,096 lines; environment 2,048 requirements (or a conda spec of 64 channels and 1,024
dependencies), 1,024 variables (2 nodes each) and 256 modules; 64 datasets; 256 outputs; 64 runtime
options (2 each); and some 150 for the other fields and their keys. The cap is twice that.

Events come from libyaml (``yaml.CParser``) when PyYAML was built with it, else from PyYAML's Python
parser; composing (with the refusals above) and constructing are PyYAML's Python code either way.

``load_yaml_located`` also returns where each value was written (its line, from
the composed node tree's ``start_mark``) and the raw text of each scalar, so
that importers can name the line of a bad entry and read ``- 010`` as the
characters written rather than YAML 1.1's octal 8. It goes through the same
loader: the same limits and refusals hold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from .errors import SpecError

MAX_YAML_BYTES = 1024 * 1024
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 20_000


class _Strict(yaml.composer.Composer, yaml.constructor.SafeConstructor):
    """The refusals: PyYAML's Composer and SafeConstructor, checked; the events come from a parser mixed in."""

    _depth = 0
    _nodes = 0

    if TYPE_CHECKING:  # from the parser mixed in (Parser or CParser)
        def __init__(self, stream: str) -> None: ...
        def check_event(self, *choices: Any) -> bool: ...
        def peek_event(self) -> Any: ...
        def dispose(self) -> None: ...

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            raise yaml.composer.ComposerError(
                None, None, f"more than {MAX_YAML_NODES} values (the largest task is far smaller)",
                self.peek_event().start_mark,
            )
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases (*name) are not allowed in task files", event.start_mark
            )
        if self._depth >= MAX_YAML_DEPTH:
            raise yaml.composer.ComposerError(
                None, None, f"nested deeper than {MAX_YAML_DEPTH} levels", self.peek_event().start_mark
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise yaml.constructor.ConstructorError(
                    None, None, "merge keys (<<) are not allowed in task files", key_node.start_mark
                )
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # unhashable: SafeConstructor reports it
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {str(key)[:80]!r}", key_node.start_mark
                )
        return super().construct_mapping(node, deep=deep)


class _StrictLoader(_Strict, yaml.SafeLoader):
    """PyYAML's Python reader, scanner and parser."""


_LOADER: type[_Strict] = _StrictLoader
try:
    from yaml._yaml import CParser as _CParser
except ImportError:  # PyYAML without libyaml
    pass
else:

    class _StrictCLoader(_Strict, _CParser, yaml.resolver.Resolver):
        """libyaml's parser for the events; PyYAML's Python Composer (with the refusals) on top of it."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    _LOADER = _StrictCLoader


# A place in a document: mapping keys and sequence indexes from the root, e.g. ("job", "general", 1).
YamlPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Located:
    """A document with, for each place in it, its 1-based line and (for scalars) its text as written."""

    value: Any
    lines: dict[YamlPath, int] = field(default_factory=dict)
    raw: dict[YamlPath, str] = field(default_factory=dict)

    def line(self, path: YamlPath) -> int | None:
        """The line of ``path``, else of its nearest enclosing place that has one."""
        for end in range(len(path), -1, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return None


def load_yaml(text: str | bytes, source: str = "document") -> Any:
    return _load(text, source, locate=False).value


def load_yaml_located(text: str | bytes, source: str = "document") -> Located:
    return _load(text, source, locate=True)


def _load(text: str | bytes, source: str, *, locate: bool) -> Located:
    if isinstance(text, bytes):
        if len(text) > MAX_YAML_BYTES:
            raise SpecError.one("", f"{source} is larger than {MAX_YAML_BYTES} bytes")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SpecError.one("", f"{source} is not UTF-8: {exc}") from None
    if len(text) > MAX_YAML_BYTES:
        raise SpecError.one("", f"{source} is larger than {MAX_YAML_BYTES} bytes")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8 text holds one (libyaml would raise on it)
        raise SpecError.one("", f"{source} is not UTF-8 text: it holds a lone surrogate") from None
    if size > MAX_YAML_BYTES:
        raise SpecError.one("", f"{source} is larger than {MAX_YAML_BYTES} bytes")
    try:
        # The Python reader checks the characters when it is made: inside the try, so that is a SpecError too.
        loader = _LOADER(text)  # SafeLoader's composer and constructor, with the refusals
    except yaml.YAMLError as exc:
        raise SpecError.one("", f"{source} is not valid YAML: {_short(exc)}") from None
    nodes: list[yaml.Node] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                nodes.append(node)
        doc = loader.construct_document(nodes[0]) if len(nodes) == 1 else None
    except yaml.YAMLError as exc:
        if "exceeded maximum nesting depth" in str(exc):  # libyaml's own limit (1,000), before ours could see it
            raise SpecError.one("", f"{source} is not valid YAML: nested deeper than {MAX_YAML_DEPTH} levels") \
                from None
        raise SpecError.one("", f"{source} is not valid YAML: {_short(exc)}") from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer of more than 4300 digits
        raise SpecError.one("", f"{source} holds a value that cannot be read: {_short(exc)}") from None
    finally:
        loader.dispose()
    if len(nodes) != 1:
        raise SpecError.one("", f"{source} must hold exactly one YAML document, found {len(nodes)}")
    if not locate:
        return Located(doc)
    lines, raw = _positions(nodes[0])
    return Located(doc, lines, raw)


def _positions(root: yaml.Node) -> tuple[dict[YamlPath, int], dict[YamlPath, str]]:
    """Lines and raw scalar texts of every place below ``root`` (iterative: no recursion limit)."""
    lines: dict[YamlPath, int] = {}
    raw: dict[YamlPath, str] = {}
    stack: list[tuple[YamlPath, yaml.Node]] = [((), root)]
    while stack:
        path, node = stack.pop()
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.ScalarNode):
            raw[path] = node.value
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(((*path, i), item) for i, item in enumerate(node.value))
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    lines.setdefault((*path, key.value), key.start_mark.line + 1)  # the key's line
                    stack.append(((*path, key.value), value))
    return lines, raw


def _short(exc: Exception) -> str:
    return " ".join(str(exc).split())[:500]
