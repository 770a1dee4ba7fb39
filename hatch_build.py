"""Hatchling build hook: in an editable install, the runtime plugins import as ``tacc_runtimes``.

The wheel gets the folder ``runtimes/`` as the package ``tacc_runtimes`` (pyproject.toml's
force-include), never as a top-level ``runtimes``. An editable install cannot do that with
hatchling's own options (``sources`` may only strip a prefix in dev mode), so this hook gives it
a one-file package ``tacc_runtimes`` whose ``__path__`` is the checkout's ``runtimes/``: edits
there take effect at once, and nothing named ``runtimes`` is importable.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

STUB = '''"""The runtime plugins of an editable tacc_hub install: this package is the checkout's runtimes/ folder."""

__path__ = [{path!r}]
__file__ = {init!r}
with open(__file__, encoding="utf-8") as _f:
    exec(compile(_f.read(), __file__, "exec"))
del _f
'''


class EditableRuntimesHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        self._stub_dir: str | None = None
        if self.target_name != "wheel" or version != "editable":
            return
        source = os.path.join(self.root, "runtimes")
        self._stub_dir = tempfile.mkdtemp(prefix="tacc-runtimes-")
        stub = os.path.join(self._stub_dir, "__init__.py")
        with open(stub, "w", encoding="utf-8") as f:
            f.write(STUB.format(path=source, init=os.path.join(source, "__init__.py")))
        # (replaces the force-include of pyproject.toml, which would copy runtimes/ into site-packages)
        build_data["force_include_editable"][stub] = "tacc_runtimes/__init__.py"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if getattr(self, "_stub_dir", None):
            shutil.rmtree(self._stub_dir or "", ignore_errors=True)
