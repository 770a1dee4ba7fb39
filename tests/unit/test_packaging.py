"""The packages as a site installs them: the spawner needs only JupyterHub, the runtimes are not a top-level `runtimes`.

spawner/ is the distribution ``tacc-hub-spawner`` (import ``tacc_spawner``) that goes into the hub's
environment, often on another host and account than the service: it must import with tacc_hub
absent and declare nothing but JupyterHub and its HTTP client. The runtime plugins live in the
folder runtimes/ and import as ``tacc_runtimes``, in the installed wheel and in the editable
install alike. Wheels are built here for real, offline (``--no-build-isolation``: hatchling comes
with the test extra), and imported in fresh interpreters (``-I``: no checkout on sys.path).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import entry_points, requires
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPAWNER = ROOT / "spawner"
# What the spawner's code may import besides the standard library and itself: JupyterHub, its HTTP
# client, and traitlets (JupyterHub's own configuration system, which JupyterHub requires).
SPAWNER_IMPORTS = {"jupyterhub", "tornado", "traitlets"}
# A meta-path finder that makes these unimportable, as in a hub's environment without tacc_hub.
BLOCK = """
import sys
class Block:
    names = {names!r}
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.split(".")[0] in cls.names:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: not in the hub's environment)", name=name)
        return None
sys.meta_path.insert(0, Block)
"""


def _requirement_names(reqs: list[str]) -> set[str]:
    return {re.split(r"[\s\[<>=!~;@]", r, maxsplit=1)[0].lower().replace("_", "-") for r in reqs}


def _run(code: str, *, cwd: Path, first: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter of the test environment (``-I``: no checkout, no cwd on sys.path), with
    ``first`` (an install target) ahead of its site-packages."""
    prefix = f"import sys; sys.path.insert(0, {str(first)!r})\n" if first is not None else ""
    return subprocess.run([sys.executable, "-I", "-c", prefix + code], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def _wheel(source: Path, out: Path) -> Path:
    """Build ``source``'s wheel offline with the test environment's hatchling; the path of the .whl."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps",
         "--no-build-isolation", "--no-index", "--wheel-dir", str(out), str(source)],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    (wheel,) = out.glob("*.whl")
    return wheel


# --- the spawner -------------------------------------------------------------------------


def test_the_spawner_declares_only_jupyterhub_and_its_http_client() -> None:
    meta = tomllib.loads((SPAWNER / "pyproject.toml").read_text())["project"]
    assert meta["name"] == "tacc-hub-spawner"
    assert _requirement_names(meta["dependencies"]) == {"jupyterhub", "tornado"}
    assert meta["entry-points"]["jupyterhub.spawners"] == {"tacc": "tacc_spawner:TaccSpawner"}
    # installed (scripts/bootstrap.sh) from this very file
    assert _requirement_names(requires("tacc-hub-spawner") or []) == {"jupyterhub", "tornado"}
    # traitlets, which the spawner imports, comes with JupyterHub
    assert "traitlets" in _requirement_names(requires("jupyterhub") or [])
    # one `tacc` spawner, the package's: the main project no longer declares one
    main = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "jupyterhub.spawners" not in main.get("entry-points", {})
    found = [e for e in entry_points(group="jupyterhub.spawners") if e.name == "tacc"]
    assert [e.value for e in found] == ["tacc_spawner:TaccSpawner"]


def test_the_spawner_s_code_imports_nothing_of_tacc_hub() -> None:
    files = sorted((SPAWNER / "tacc_spawner").glob("*.py"))
    assert {p.stem for p in files} >= {"__init__", "spawner", "form", "payload", "progress", "server", "culler",
                                       "client", "fields"}
    allowed = set(sys.stdlib_module_names) | SPAWNER_IMPORTS | {"tacc_spawner"}
    bad = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            bad += [f"{path.name}:{node.lineno}: {n}" for n in names if n.split(".")[0] not in allowed]
    assert bad == []
    assert not (ROOT / "tacc_hub" / "spawner").exists()


def test_the_spawner_imports_and_loads_as_the_hub_s_entry_point_without_tacc_hub(tmp_path: Path) -> None:
    code = BLOCK.format(names={"tacc_hub", "tacc_runtimes", "runtimes", "pydantic"}) + """
import importlib, json, pkgutil
import tacc_spawner
mods = sorted(m.name for m in pkgutil.iter_modules(tacc_spawner.__path__))
for m in mods:
    importlib.import_module("tacc_spawner." + m)
from importlib.metadata import entry_points
(ep,) = [e for e in entry_points(group="jupyterhub.spawners") if e.name == "tacc"]
cls = ep.load()
cls(user=None)  # a spawner object, with its defaults
print(json.dumps({"mods": mods, "cls": cls.__module__ + "." + cls.__name__,
                  "loaded": sorted({n.split(".")[0] for n in sys.modules})}))
"""
    out = _run(code, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert {"spawner", "form", "client", "culler"} <= set(got["mods"])
    assert got["cls"] == "tacc_spawner.spawner.TaccSpawner"
    assert not {"tacc_hub", "pydantic"} & set(got["loaded"])
    # the blocker blocks: the same interpreter cannot import tacc_hub
    probe = _run(BLOCK.format(names={"tacc_hub"}) + "import tacc_hub", cwd=tmp_path)
    assert probe.returncode != 0 and "blocked" in probe.stderr


def test_the_spawner_s_wheel_holds_only_tacc_spawner_and_works_alone(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(SPAWNER, source, ignore=shutil.ignore_patterns("__pycache__"))
    wheel = _wheel(source, tmp_path / "dist")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        eps = zf.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"tacc_spawner"}
    assert _requirement_names(re.findall(r"^Requires-Dist: (.+)$", meta, re.MULTILINE)) == {"jupyterhub", "tornado"}
    assert "[jupyterhub.spawners]\ntacc = tacc_spawner:TaccSpawner" in eps
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           "--no-deps", "--no-index", "--target", str(target), str(wheel)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    # the installed wheel first on the path, then JupyterHub's environment; tacc_hub unimportable
    out = _run(BLOCK.format(names={"tacc_hub", "pydantic"}) + """
import tacc_spawner, tacc_spawner.spawner, tacc_spawner.culler
print(tacc_spawner.__file__)
""", cwd=tmp_path, first=target)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).is_relative_to(target)


# --- the runtime plugins ----------------------------------------------------------------


def test_the_installed_runtimes_import_as_tacc_runtimes_and_never_as_runtimes(tmp_path: Path) -> None:
    """The editable install of this checkout (scripts/bootstrap.sh), from a fresh interpreter elsewhere."""
    out = _run("""
import json, importlib
import tacc_runtimes.plain, tacc_runtimes.horovod
from importlib.metadata import entry_points
eps = {e.name: e.value for e in entry_points(group="tacc_hub.runtimes")}
found = {}
for name in ("runtimes", "tests", "benchmarks", "spawner"):
    try:
        importlib.import_module(name)
        found[name] = True
    except ModuleNotFoundError:
        found[name] = False
print(json.dumps({"file": tacc_runtimes.plain.__file__, "eps": eps, "found": found,
                  "doc": tacc_runtimes.__doc__}))
""", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert Path(got["file"]) == ROOT / "runtimes" / "plain.py"  # the checkout's file: edits take effect
    assert got["found"] == {"runtimes": False, "tests": False, "benchmarks": False, "spawner": False}
    assert got["doc"] == (ROOT / "runtimes" / "__init__.py").read_text().strip().strip('"')
    assert set(got["eps"]) >= {"plain", "torchrun", "deepspeed", "horovod", "mpi", "byteps"}
    assert all(v.startswith("tacc_runtimes.") for v in got["eps"].values())
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["tacc_hub.runtimes"]
    assert got["eps"] == declared


def test_the_main_wheel_ships_tacc_runtimes_not_runtimes_and_not_the_spawner(tmp_path: Path) -> None:
    wheel = _wheel(ROOT, tmp_path / "dist")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        eps = zf.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    top = {n.split("/")[0] for n in names if ".dist-info/" not in n and ".data/" not in n}
    assert top == {"tacc_hub", "tacc_runtimes"}
    shipped = {p.name for p in (ROOT / "runtimes").glob("*.py")}
    assert {n.split("/", 1)[1] for n in names if n.startswith("tacc_runtimes/")} == shipped
    assert not any(n.startswith(("tacc_hub/spawner/", "tacc_spawner/")) for n in names)
    assert "jupyterhub.spawners" not in eps and "= runtimes." not in eps
    assert "plain = tacc_runtimes.plain:PlainRuntime" in eps
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target, [n for n in names if n.startswith("tacc_runtimes/")])
    out = _run("""
import tacc_runtimes.plain
print(tacc_runtimes.plain.__file__)
try:
    import runtimes
except ModuleNotFoundError:
    print("no runtimes")
""", cwd=tmp_path, first=target)
    assert out.returncode == 0, out.stderr
    file, last = out.stdout.split()[0], out.stdout.strip().splitlines()[-1]
    assert Path(file).is_relative_to(target) and last == "no runtimes"


def test_bootstrap_installs_the_spawner_beside_tacc_hub() -> None:
    script = (ROOT / "scripts" / "bootstrap.sh").read_text()
    installs = [line.strip() for line in script.splitlines() if line.strip().startswith("pip_install -e ")]
    assert installs == ['pip_install -e ".[$extras]" -e ./spawner']
    assert "spawner/pyproject.toml -nt" in script  # a change to the spawner's metadata reinstalls


def test_the_hub_settings_take_the_culler_from_the_spawner_package() -> None:
    from tacc_hub.hub import config

    assert config.idle_culler.__module__ == "tacc_spawner.culler"
