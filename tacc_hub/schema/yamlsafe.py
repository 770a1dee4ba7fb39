"""YAML reading that cannot be abused.

Invariant: documents are size-limited, aliases and merge keys are refused
(no "billion laughs"), nesting is depth-limited (PyYAML composes
recursively), only plain data types are built (SafeLoader), a key may appear
once per mapping, and exactly one document is accepted. Every failure is a
``SpecError``.
"""

from __future__ import annotations

from typing import Any

import yaml

from .errors import SpecError

MAX_YAML_BYTES = 1024 * 1024
MAX_YAML_DEPTH = 64


class _StrictLoader(yaml.SafeLoader):
    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
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


def load_yaml(text: str | bytes, source: str = "document") -> Any:
    if isinstance(text, bytes):
        if len(text) > MAX_YAML_BYTES:
            raise SpecError.one("", f"{source} is larger than {MAX_YAML_BYTES} bytes")
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SpecError.one("", f"{source} is not UTF-8: {exc}") from None
    if len(text) > MAX_YAML_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_YAML_BYTES:
        raise SpecError.one("", f"{source} is larger than {MAX_YAML_BYTES} bytes")
    try:
        docs = list(yaml.load_all(text, Loader=_StrictLoader))  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise SpecError.one("", f"{source} is not valid YAML: {_short(exc)}") from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer of more than 4300 digits
        raise SpecError.one("", f"{source} holds a value that cannot be read: {_short(exc)}") from None
    if len(docs) != 1:
        raise SpecError.one("", f"{source} must hold exactly one YAML document, found {len(docs)}")
    return docs[0]


def _short(exc: Exception) -> str:
    return " ".join(str(exc).split())[:500]
