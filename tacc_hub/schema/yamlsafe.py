"""YAML reading that cannot be abused.

Invariant: documents are size-limited, aliases/anchors are refused (no
"billion laughs"), only plain data types are built (SafeLoader), and exactly
one document is read.
"""

from __future__ import annotations

from typing import Any

import yaml

from .errors import SpecError

MAX_YAML_BYTES = 1024 * 1024


class _NoAliasLoader(yaml.SafeLoader):
    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: ANN401
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.constructor.ConstructorError(
                None, None, "YAML aliases (*name) are not allowed in task files", event.start_mark
            )
        return super().compose_node(parent, index)

    def compose_document(self) -> Any:  # noqa: ANN401
        node = super().compose_document()
        return node


def load_yaml(text: str | bytes, source: str = "document") -> Any:  # noqa: ANN401
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
        docs = list(yaml.load_all(text, Loader=_NoAliasLoader))  # noqa: S506 - SafeLoader subclass
    except yaml.YAMLError as exc:
        raise SpecError.one("", f"{source} is not valid YAML: {_short(exc)}") from None
    if len(docs) != 1:
        raise SpecError.one("", f"{source} must hold exactly one YAML document, found {len(docs)}")
    return docs[0]


def _short(exc: yaml.YAMLError) -> str:
    return " ".join(str(exc).split())[:500]
