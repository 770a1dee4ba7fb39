"""deploy/: the production layout's files (systemd units, sudoers template, configs) checked against the code.

What a site copies must work with the code it runs: every ``c.TaccHub.x`` / ``--TaccHub.x`` named is a
setting of TaccHub; the units start our console scripts; the paths in the sudoers rule, the service's
unit and its config agree; the sudoers rule allows exactly the commands the service really runs (the
argv taken from the executors themselves), checked by real sudo with the rule installed for a probe
account; the hub's config builds the README hub's scopes and roles without tacc_hub; systemd and
visudo accept the files.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from traitlets.config.loader import PyFileConfigLoader

from tacc_hub.executors.local import LocalExecutor
from tacc_hub.executors.slurm import SlurmExecutor
from tacc_hub.launcher import cli as launcher_cli
from tacc_hub.service.app import TaccHub

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SERVICE_UNIT = DEPLOY / "systemd" / "tacc-hub.service"
HUB_UNIT = DEPLOY / "systemd" / "jupyterhub.service"
SUDOERS = DEPLOY / "sudoers.d" / "tacc-hub"
SERVICE_CONFIG = DEPLOY / "tacc_hub_config.py"
HUB_CONFIG = DEPLOY / "jupyterhub_config.py"
# Options that, in a unit running as a non-root user, make systemd set no_new_privs (systemd.exec(5),
# NoNewPrivileges=): with any of them, sudo's setuid bit is ignored and the service cannot switch users.
IMPLY_NNP = ("NoNewPrivileges", "SystemCallFilter", "SystemCallArchitectures", "RestrictAddressFamilies",
             "RestrictNamespaces", "PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules",
             "ProtectKernelLogs", "ProtectClock", "MemoryDenyWriteExecute", "RestrictRealtime", "RestrictSUIDSGID",
             "DynamicUser", "LockPersonality")
DEBIAN_SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


# --- parsing ------------------------------------------------------------------------------


def unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A systemd unit: section -> key -> every value given (Environment= may repeat); comments dropped."""
    out: dict[str, dict[str, list[str]]] = {}
    section = None
    text = path.read_text().replace("\\\n", " ")
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            out.setdefault(section, {})
            continue
        assert section is not None and "=" in line, f"{path.name}: not a unit line: {raw!r}"
        key, _, value = line.partition("=")
        out[section].setdefault(key.strip(), []).append(value.strip())
    return out


def one(u: dict[str, dict[str, list[str]]], section: str, key: str) -> str:
    values = u[section][key]
    assert len(values) == 1, f"{key}= given {len(values)} times"
    return values[0]


def environment(u: dict[str, dict[str, list[str]]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for value in u["Service"].get("Environment", []):
        for word in shlex.split(value):
            k, _, v = word.partition("=")
            env[k] = v
    return env


def sudoers() -> tuple[dict[str, list[str]], list[tuple[str, str, str, str]]]:
    """(Cmnd_Alias name -> commands, [(user, host, runas, command list)]) of the template."""
    text = SUDOERS.read_text().replace("\\\n", " ")
    aliases: dict[str, list[str]] = {}
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line.startswith("Defaults"):
            continue
        m = re.fullmatch(r"Cmnd_Alias\s+(\w+)\s*=\s*(.+)", line)
        if m:
            aliases[m.group(1)] = [c.strip() for c in m.group(2).split(",")]
            continue
        m = re.fullmatch(r"(\S+)\s+(\S+)\s*=\s*\(([^)]*)\)\s*NOPASSWD:\s*(.+)", line)
        assert m, f"not a rule this test understands: {raw!r}"
        rules.append((m.group(1), m.group(2), m.group(3).strip(), m.group(4).strip()))
    return aliases, rules


def allowed(argv: list[str], runas: str) -> bool:
    """Whether a rule of the template lets the account tacc run ``argv`` as ``runas``: "root", or "member" (an
    account of a group the rule names). sudoers' matching: the command path exactly, the arguments as one
    string against the rule's wildcards (* matching spaces too). Real sudo is asked below as well."""
    aliases, rules = sudoers()
    for user, _host, who, cmds in rules:
        items = [w.strip() for w in who.split(",")]
        if user != "tacc" or not ("root" in items if runas == "root" else any(i.startswith("%") for i in items)):
            continue
        for cmd in aliases.get(cmds, [cmds]):
            path, _, args = cmd.partition(" ")
            if path != argv[0]:
                continue
            if not args or fnmatch.fnmatchcase(" ".join(argv[1:]), args):
                return True
    return False


def load_config(path: Path) -> Any:
    saved = os.environ.get("TACC_SERVICE_API_TOKEN")
    os.environ["TACC_SERVICE_API_TOKEN"] = "t0k"  # what the hub's unit gives its config, from its env file
    try:
        return PyFileConfigLoader(path.name, path=str(path.parent)).load_config()
    finally:
        if saved is None:
            del os.environ["TACC_SERVICE_API_TOKEN"]
        else:
            os.environ["TACC_SERVICE_API_TOKEN"] = saved


def service_app() -> TaccHub:
    return TaccHub(config=load_config(SERVICE_CONFIG))


def service_venv() -> Path:
    """The venv whose tacc-hub the service's unit starts (/opt/tacc-hub/venv)."""
    return Path(shlex.split(one(unit(SERVICE_UNIT), "Service", "ExecStart"))[0]).parent.parent


def scripts() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]


# --- the service's unit and config ----------------------------------------------------------


def test_every_tacc_hub_setting_named_in_deploy_is_a_setting_of_tacc_hub() -> None:
    known = set(TaccHub.class_trait_names(config=True))
    named: dict[str, set[str]] = {}
    for path in DEPLOY.rglob("*"):
        if path.is_file():
            for name in re.findall(r"(?:c\.|--)TaccHub\.(\w+)", path.read_text()):
                named.setdefault(name, set()).add(path.name)
    assert {"task_identity", "data_dir", "state_dir", "db_url", "config_file", "slurm_account_map"} <= set(named)
    assert {n: sorted(f) for n, f in named.items() if n not in known} == {}
    # what the config file sets when loaded is what its uncommented lines say
    loaded = load_config(SERVICE_CONFIG)["TaccHub"]
    assert set(loaded) == set(re.findall(r"^c\.TaccHub\.(\w+)", SERVICE_CONFIG.read_text(), re.MULTILINE))


def test_the_service_config_is_owner_identity_on_postgresql_with_data_apart_from_state() -> None:
    from sqlalchemy.engine import make_url

    app = service_app()
    assert app.task_identity == "owner" and app.auth == "hub" and not app.launcher_command
    url = make_url(app.db_url)
    assert url.drivername == "postgresql+psycopg" and url.database == "tacc" and url.username == "tacc"
    import psycopg  # the postgres extra, which the unit's install line names

    assert psycopg and "[postgres" in SERVICE_UNIT.read_text()
    state, data = Path(app.state_dir), Path(app.data_dir)
    assert state.is_absolute() and data.is_absolute() and not data.is_relative_to(state)
    u = unit(SERVICE_UNIT)
    var = Path("/var/lib") / one(u, "Service", "StateDirectory")
    assert state.parent == var and data.parent == var and one(u, "Service", "WorkingDirectory") == str(var)
    assert one(u, "Service", "StateDirectoryMode") == "0711"  # users reach data_dir below it


def test_the_service_unit_runs_tacc_hub_serve_as_tacc_with_the_config_and_the_token_from_a_file() -> None:
    from tacc_hub.cli.admin import cli

    u = unit(SERVICE_UNIT)
    argv = shlex.split(one(u, "Service", "ExecStart"))
    assert Path(argv[0]).name == "tacc-hub" and "tacc-hub" in scripts() and argv[1] == "serve" and "serve" in \
        cli.commands  # type: ignore[attr-defined]
    assert argv[2:] == ["--TaccHub.config_file=/etc/tacc-hub/tacc_hub_config.py"]
    assert one(u, "Service", "User") == "tacc" != one(unit(HUB_UNIT), "Service", "User")
    assert one(u, "Service", "EnvironmentFile") == "/etc/tacc-hub/tacc-hub.env"
    env = environment(u)
    assert "JUPYTERHUB_API_TOKEN" not in env  # a secret: only in the 0600 file
    assert "JUPYTERHUB_API_TOKEN=" in SERVICE_UNIT.read_text()  # the header says what the file holds
    app = service_app()
    assert env["JUPYTERHUB_SERVICE_URL"] == f"http://{app.ip}:{app.port}"
    assert env["JUPYTERHUB_SERVICE_NAME"] == "tacc" and env["JUPYTERHUB_CLIENT_ID"] == "service-tacc"
    assert env["JUPYTERHUB_SERVICE_PREFIX"] == "/services/tacc/"
    assert env["JUPYTERHUB_OAUTH_CALLBACK_URL"] == "/services/tacc/oauth_callback"
    assert one(u, "Service", "KillMode") == "process"  # tasks outlive a restart of the service


def test_the_service_unit_sets_no_option_that_would_break_sudo() -> None:
    u = unit(SERVICE_UNIT)["Service"]
    assert [k for k in IMPLY_NNP if k in u] == []
    assert "ProtectHome" not in u and "PrivateTmp" not in u and "PrivateDevices" not in u
    assert u["ProtectSystem"] == ["full"]
    text = SERVICE_UNIT.read_text()
    assert re.search(r"NoNewPrivileges is NOT set: it makes the kernel ignore sudo's setuid bit", text)
    # the hub, which uses no sudo, gets all of them
    hub = unit(HUB_UNIT)["Service"]
    assert hub["NoNewPrivileges"] == ["yes"] and hub["ProtectSystem"] == ["strict"] and hub["ProtectHome"] == ["yes"]


def test_the_hub_unit_runs_jupyterhub_from_its_own_venv_with_the_deploy_config() -> None:
    u = unit(HUB_UNIT)
    argv = shlex.split(one(u, "Service", "ExecStart"))
    (ep,) = [e for e in entry_points(group="console_scripts") if e.name == "jupyterhub"]
    assert Path(argv[0]).name == ep.name and ep.dist is not None and ep.dist.name.lower() == "jupyterhub"
    assert argv[1:] == ["--config=/etc/jupyterhub/jupyterhub_config.py"]
    hub_venv = Path(argv[0]).parent.parent
    assert hub_venv != service_venv()  # the hub's environment is not the service's
    text = HUB_UNIT.read_text()
    assert f"{hub_venv}/bin/pip install jupyterhub jupyterhub-idle-culler /opt/tacc-hub/src/spawner" in text
    proxy = load_config(HUB_CONFIG)["ConfigurableHTTPProxy"]["command"][0]
    assert str(Path(proxy).parent) in environment(u)["PATH"].split(":")


def test_the_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    tool = shutil.which("systemd-analyze")
    for path in (SERVICE_UNIT, HUB_UNIT):
        u = unit(path)
        assert set(u) == {"Unit", "Service", "Install"} and u["Install"]["WantedBy"] == ["multi-user.target"]
        if tool is None:
            continue  # parsed above; systemd-analyze checks the keys and values themselves where it is installed
        # the binaries are not installed here: the same unit with ExecStart on a stub
        stub = tmp_path / "bin" / Path(shlex.split(one(u, "Service", "ExecStart"))[0]).name
        stub.parent.mkdir(exist_ok=True)
        stub.write_text("#!/bin/sh\n")
        stub.chmod(0o755)
        text = re.sub(r"^ExecStart=\S+", f"ExecStart={stub}", path.read_text(), flags=re.MULTILINE)
        copy = tmp_path / path.name
        copy.write_text(text)
        out = subprocess.run([tool, "verify", str(copy)], capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0 and path.name not in out.stderr + out.stdout, out.stderr + out.stdout


# --- sudoers ------------------------------------------------------------------------------


def test_visudo_accepts_the_sudoers_template() -> None:
    visudo = shutil.which("visudo") or next((p for p in ("/usr/sbin/visudo", "/sbin/visudo") if os.path.exists(p)),
                                             None)
    assert visudo, ("visudo is not installed: the sudoers template cannot be checked (Debian: apt-get install sudo; "
                    "CI installs it)")
    out = subprocess.run([visudo, "-cf", str(SUDOERS)], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0 and "parsed OK" in out.stdout, out.stdout + out.stderr


@pytest.fixture
def as_service_account(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The service as it runs in production: not root, its interpreter the unit's venv's."""
    python = service_venv() / "bin" / "python"
    monkeypatch.setattr(os, "geteuid", lambda: 4242)
    monkeypatch.setattr(sys, "executable", str(python))
    yield python


def _launcher_argv(tmp_path: Path, verbs: tuple[str, ...]) -> tuple[list[str], dict[str, list[str]]]:
    """(the launcher command of the executor the deploy config makes, argv of each verb as it runs them)."""
    app = service_app()
    real_state = Path(app.state_dir)
    app.state_dir, app.data_dir = str(tmp_path / "state"), str(tmp_path / "data")  # made here, not in /var/lib
    executor = app.make_executor()
    assert isinstance(executor, LocalExecutor)
    seen: list[list[str]] = []

    class Proc:
        returncode = 0

        async def communicate(self) -> tuple[bytes, bytes]:
            return b"", b""

    async def fake_exec(*argv: str, **kw: Any) -> Proc:
        seen.append(list(argv))
        return Proc()

    import tacc_hub.executors.local as local

    orig = local.asyncio.create_subprocess_exec
    local.asyncio.create_subprocess_exec = fake_exec  # type: ignore[assignment]
    try:
        for verb in verbs:
            asyncio.run(executor._call(verb, 42))
    finally:
        local.asyncio.create_subprocess_exec = orig
    here = str(Path(app.state_dir).resolve())
    out = {}
    for verb, argv in zip(verbs, seen, strict=True):
        out[verb] = [str(real_state) + a[len(here):] if a.startswith(here + "/") else a for a in argv]
    return list(executor.launcher), out


def test_the_sudoers_rule_allows_the_launcher_exactly_as_the_service_runs_it(as_service_account: Path,
                                                                             tmp_path: Path) -> None:
    verbs = ("start", "prepare", "cancel", "kill", "signal")
    launcher, argvs = _launcher_argv(tmp_path, ("cancel", "kill", "signal"))
    assert launcher == ["sudo", "-n", str(as_service_account.parent / "tacc-launcher")]
    assert Path(launcher[2]).name in scripts()
    run_dir = argvs["cancel"][3]
    assert run_dir == str(Path(service_app().state_dir) / "run")
    for verb in verbs:  # start and prepare as the executor builds cancel and kill: RUN_DIR VERB ID
        argv = [launcher[2], run_dir, verb, "42"]
        if verb in argvs:
            assert argvs[verb] == ["sudo", "-n", *argv]
        assert allowed(argv, "root"), argv
        # ... and the launcher takes these verbs (a wrong one is a usage error, 2)
        assert launcher_cli.main([str(tmp_path / "nowhere"), verb, "42"]) == 1
    assert launcher_cli.main([str(tmp_path / "nowhere"), "shell", "42"]) == 2
    # exec: the executor's own argv (tcloud exec and shell), with and without a terminal
    ex = service_app().make_executor()
    for tty in (False, True):
        argv = ex.exec_argv(42, {}, None, ["sh", "-c", "echo $CUDA_VISIBLE_DEVICES"], tty=tty)
        assert argv[:2] == ["sudo", "-n"] and allowed(argv[2:], "root"), argv
    assert not allowed([launcher[2], run_dir, "exec", "x"], "root")
    for bad in ([launcher[2], "/tmp/run", "start", "42"], [launcher[2], run_dir, "shell", "42"],
                [launcher[2], run_dir, "start", "x"], ["/tmp/tacc-launcher", run_dir, "start", "42"],
                ["/bin/sh", "-c", "id"]):
        assert not allowed(bad, "root"), bad
    assert not allowed([launcher[2], run_dir, "start", "42"], "member")  # the launcher only as root


def test_the_sudoers_rule_allows_the_slurm_commands_the_executor_runs_as_owners(as_service_account: Path) -> None:
    ex = SlurmExecutor.__new__(SlurmExecutor)
    ex.bin_dir = None
    sbatch = ex._argv("sbatch", "--parsable", "job.sbatch", user="alice")
    scancel = ex._argv("scancel", "--signal=TERM", "123", user="alice")
    srun = ex._argv("srun", "--jobid=123", "--overlap", "--nodes=1", "--", "true", user="alice")
    for argv, cmd in ((sbatch, "sbatch"), (scancel, "scancel"), (srun, "srun")):
        assert Path(argv[0]).name == "sudo" and argv[1:6] == ["-n", "-u", "alice", "--", cmd]
        # sudo finds a bare name through its secure_path: the path the rule must name
        secure = _secure_path()
        found = next((f"{d}/{cmd}" for d in secure.split(":") if os.path.exists(f"{d}/{cmd}")), f"/usr/bin/{cmd}")
        assert allowed([found, *argv[6:]], "member"), found
        assert not allowed([found, *argv[6:]], "root")
    assert not allowed(["/usr/bin/srun", "id"], "member")  # srun only as a step of an existing job
    assert not allowed(["/usr/bin/srun", "-N1", "--jobid=5", "--overlap", "id"], "member")


def _secure_path() -> str:
    try:
        m = re.search(r'^Defaults\s+secure_path\s*=\s*"?([^"\n]+)"?', Path("/etc/sudoers").read_text(), re.MULTILINE)
    except OSError:
        m = None
    return m.group(1) if m else DEBIAN_SECURE_PATH


PROBE, PROBE_GROUP, MEMBER = "tacc-sudo-probe", "tacc-sudo-users", "tacc-sudo-member"


def test_real_sudo_with_the_rule_installed_runs_exactly_these_commands() -> None:
    """The template installed in /etc/sudoers.d for a probe account (its paths pointed at stubs that print what
    they got): sudo runs the launcher as root and sbatch as a member of the group, with a clean environment and
    without staying their parent; everything else is refused."""
    sudo = shutil.which("sudo")
    assert sudo, "sudo is not installed (Debian: apt-get install sudo; CI installs it)"
    assert os.geteuid() == 0, "this test installs a sudoers file for a probe account: run the tests as root"
    runuser = shutil.which("runuser", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    assert runuser, "runuser (util-linux) is not installed"
    _ensure_probe_accounts()
    stubs = Path(tempfile.mkdtemp(prefix="tacc-sudo-stubs-"))  # the member runs one: not in pytest's 0700 dirs
    stubs.chmod(0o755)
    (stubs / "venv" / "bin").mkdir(parents=True)
    stub = '#!/bin/sh\necho "pid=$$ uid=$(id -u) args=$* secret=${SECRET:-none} conf=${SLURM_CONF:-none}"\n'
    for name in ("venv/bin/tacc-launcher", "sbatch", "scancel"):
        (stubs / name).write_text(stub)
        (stubs / name).chmod(0o755)
    venv_bin = str(service_venv() / "bin")
    text = SUDOERS.read_text()
    assert f"{venv_bin}/tacc-launcher" in text and "/usr/bin/sbatch" in text
    text = (text.replace(venv_bin + "/", f"{stubs}/venv/bin/").replace("/usr/bin/sbatch", f"{stubs}/sbatch")
            .replace("/usr/bin/scancel", f"{stubs}/scancel").replace("%tacc-users", f"%{PROBE_GROUP}"))
    text = re.sub(r"^Defaults:tacc ", f"Defaults:{PROBE} ", text, flags=re.MULTILINE)
    text = re.sub(r"^tacc ", f"{PROBE} ", text, flags=re.MULTILINE)
    installed = Path(f"/etc/sudoers.d/zz-tacc-deploy-test-{os.getpid()}")
    installed.write_text(text)
    installed.chmod(0o440)
    try:
        visudo = shutil.which("visudo", path="/usr/sbin:/sbin:/usr/bin") or "visudo"
        check = subprocess.run([visudo, "-c"], capture_output=True, text=True, timeout=60, check=False)
        assert check.returncode == 0, check.stdout + check.stderr

        def as_probe(*argv: str) -> subprocess.CompletedProcess[str]:
            script = 'echo "sh=$$"; exec "$@"'
            return subprocess.run([runuser, "-u", PROBE, "--", "sh", "-c", script, "sh", *argv], cwd="/",
                                  env={"PATH": "/usr/bin:/bin", "SECRET": "s3", "SLURM_CONF": "/etc/x.conf"},
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False)

        run_dir = str(Path(service_app().state_dir) / "run")
        out = as_probe(sudo, "-n", f"{stubs}/venv/bin/tacc-launcher", run_dir, "start", "42")
        assert out.returncode == 0, out.stderr
        sh, got = out.stdout.split("\n")[:2]
        assert got == f"{sh.replace('sh=', 'pid=')} uid=0 args={run_dir} start 42 secret=none conf=none"
        out = as_probe(sudo, "-n", "-u", MEMBER, "--", f"{stubs}/sbatch", "--parsable", "job.sbatch")
        assert out.returncode == 0, out.stderr
        member_uid = int(subprocess.run(["id", "-u", MEMBER], capture_output=True, text=True, check=True).stdout)
        assert out.stdout.split("\n")[1].split(" ", 1)[1] == (f"uid={member_uid} args=--parsable job.sbatch "
                                                             "secret=none conf=/etc/x.conf")
        for argv in ([f"{stubs}/venv/bin/tacc-launcher", "/tmp/run", "start", "42"],
                     [f"{stubs}/venv/bin/tacc-launcher", run_dir, "shell", "42"],
                     [f"{stubs}/venv/bin/tacc-launcher", run_dir, "start", "x"],
                     ["-u", "root", "--", f"{stubs}/sbatch", "x"], ["-u", "nobody", "--", f"{stubs}/sbatch", "x"],
                     ["-u", MEMBER, "--", f"{stubs}/venv/bin/tacc-launcher", run_dir, "start", "42"],
                     ["/bin/sh", "-c", "id"], ["-u", MEMBER, "--", "/bin/sh", "-c", "id"]):
            out = as_probe(sudo, "-n", *argv)
            assert out.returncode != 0 and "pid=" not in out.stdout, (argv, out.stdout)
    finally:
        installed.unlink()
        shutil.rmtree(stubs)


def _ensure_probe_accounts() -> None:
    """The probe account (as tacc), a group (as tacc-users) and a member: made once, kept (like tests/accounts.py)."""
    def exists(db: str, name: str) -> bool:
        return subprocess.run(["getent", db, name], capture_output=True, check=False).returncode == 0

    if not exists("group", PROBE_GROUP):
        subprocess.run(["groupadd", "--system", PROBE_GROUP], check=True, capture_output=True)
    for name, extra in ((PROBE, []), (MEMBER, ["-G", PROBE_GROUP])):
        if not exists("passwd", name):
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", *extra, name],
                           check=True, capture_output=True)


# --- the hub's config ---------------------------------------------------------------------


def test_the_hub_config_loads_without_tacc_hub_and_builds_the_readme_hub_s_scopes_and_roles(tmp_path: Path) -> None:
    from tacc_hub.hub.config import CUSTOM_SCOPES, SERVER_TOKEN_SCOPES, SERVICE, hub_settings

    code = f"""
import json, sys
class Block:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.split(".")[0] in ("tacc_hub", "tacc_runtimes", "pydantic"):
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
sys.meta_path.insert(0, Block)
from traitlets.config.loader import PyFileConfigLoader
cfg = PyFileConfigLoader({HUB_CONFIG.name!r}, path={str(HUB_CONFIG.parent)!r}).load_config()
print(json.dumps({{k: dict(v) for k, v in cfg.items()}}, default=sorted))
"""
    out = subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, check=False, env={**os.environ, "TACC_SERVICE_API_TOKEN": "t0k"})
    assert out.returncode == 0, out.stderr
    cfg = json.loads(out.stdout)
    ref = hub_settings(repo=ROOT, python=sys.executable, hub_port=8000, service_port=8765, state_dir=tmp_path / "s",
                       users="alice", admins="admin", password=None, executor="local", spawner="tacc")
    hub, ref_hub = cfg["JupyterHub"], ref["JupyterHub"]
    assert hub["custom_scopes"] == ref_hub["custom_scopes"] == CUSTOM_SCOPES
    assert hub["spawner_class"] == "tacc" and hub["cleanup_servers"] is ref_hub["cleanup_servers"] is False
    roles = {r["name"]: r["scopes"] for r in hub["load_roles"]}
    assert roles == {r["name"]: r["scopes"] for r in ref_hub["load_roles"]}  # user, tacc-admins, idle-culler
    (tacc,) = [s for s in hub["services"] if s["name"] == SERVICE]
    (ref_tacc,) = [s for s in ref_hub["services"] if s["name"] == SERVICE]
    assert "command" not in tacc and tacc["api_token"] == "t0k"  # external: the hub starts nothing
    for key in ("display", "info", "oauth_no_confirm", "oauth_client_allowed_scopes"):
        assert tacc[key] == ref_tacc[key], key
    app = service_app()
    assert tacc["url"] == f"http://{app.ip}:{app.port}" == environment(unit(SERVICE_UNIT))["JUPYTERHUB_SERVICE_URL"]
    assert cfg["TaccSpawner"]["tacc_url"] == f"{tacc['url']}/services/{SERVICE}"
    assert cfg["Spawner"]["server_token_scopes"] == SERVER_TOKEN_SCOPES == ref["Spawner"]["server_token_scopes"]
    assert cfg["Spawner"]["default_url"] == ref["Spawner"]["default_url"]
    culler = [s for s in hub["services"] if s["name"] == "idle-culler"]
    assert culler and culler[0]["command"][0] == sys.executable  # the hub's own interpreter (its venv)
    # the service's unit points at this hub's API
    hub_api = environment(unit(SERVICE_UNIT))["JUPYTERHUB_API_URL"]
    assert hub_api == hub["hub_bind_url"] + "/hub/api"
    # every setting named is one of its class's
    from jupyterhub.app import JupyterHub
    from jupyterhub.auth import Authenticator
    from jupyterhub.proxy import ConfigurableHTTPProxy
    from jupyterhub.spawner import Spawner

    from tacc_spawner import TaccSpawner

    classes = {"JupyterHub": JupyterHub, "Spawner": Spawner, "TaccSpawner": TaccSpawner,
               "Authenticator": Authenticator, "ConfigurableHTTPProxy": ConfigurableHTTPProxy}
    named = {m for m in re.findall(r"c\.(\w+)\.(\w+)", HUB_CONFIG.read_text()) if m[0] != "TaccHub"}  # (the
    # service's settings it mentions are checked with the others above)
    assert {(k, n) for k, n in named if k not in classes or n not in classes[k].class_trait_names(config=True)} \
        == set()
    # the `tacc` spawner the config names is the spawner package's
    (ep,) = [e for e in entry_points(group="jupyterhub.spawners") if e.name == hub["spawner_class"]]
    assert ep.load() is TaccSpawner


def test_the_launcher_floor_file_is_what_the_launcher_reads() -> None:
    assert launcher_cli.FLOOR_FILE == "/etc/tacc-hub/launcher.json"
    floor = json.loads((DEPLOY / "launcher.json").read_text())
    assert set(floor) == {"min_uid"} and floor["min_uid"] == service_app().min_task_uid == launcher_cli.DEFAULT_FLOOR
