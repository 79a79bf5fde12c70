"""The operator's files: systemd unit, install and uninstall scripts, example configs and the
Marquez compose file, checked with the real tools (systemd-analyze, bash, the agent's CLI)."""

from __future__ import annotations

import atexit
import ctypes
import functools
import hashlib
import marshal
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from agent.config.loader import parse_config
from agent.config.model import LineageConfig
from tests.agentproc import keygen, run_agent, write_config

ROOT = Path(__file__).resolve().parents[1]
UNIT = ROOT / "systemd" / "lineage-agent.service"
INSTALL = ROOT / "deploy" / "install.sh"
UNINSTALL = ROOT / "deploy" / "uninstall.sh"
COMPOSE = ROOT / "docker-compose.marquez.yaml"
EXAMPLES = [
    "file.yaml",
    "marquez.yaml",
    "https-bearer.yaml",
    "both.yaml",
    "openlineage-client.yaml",
]
AGENT_IN_ROOT = Path("opt/lineage-agent/venv/bin/lineage-agent")
TEST_ENV = Path(sys.prefix)  # the environment running these tests, with the agent's packages

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
needs_systemd_analyze = pytest.mark.skipif(
    SYSTEMD_ANALYZE is None,
    reason="systemd-analyze is not installed (Debian/Ubuntu: apt-get install systemd)",
)


# --- the unit --------------------------------------------------------------------------------


def unit_directives(text: str) -> dict[str, list[str]]:
    """`Section.Key` -> every value it is given, in order (keys such as SystemCallFilter repeat)."""
    directives: dict[str, list[str]] = {}
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, _, value = line.partition("=")
        directives.setdefault(f"{section}.{key.strip()}", []).append(value.strip())
    return directives


def seconds(value: str) -> float:
    """A systemd time span such as `20s`, `1min 30s` or `500ms`, in seconds."""
    units = {"ms": 0.001, "s": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*(ms|min|s|m|h)?", value):
        total += float(number) * units[unit or "s"]
    return total


def test_unit_has_the_lifecycle_directives() -> None:
    """The unit runs the agent as Type=notify with watchdog, reload, restart and stop policy."""
    d = unit_directives(UNIT.read_text())
    assert d["Service.Type"] == ["notify"]
    assert d["Service.NotifyAccess"] == ["main"]
    assert d["Service.WatchdogSec"] == ["30s"]
    assert d["Service.ExecStart"] == [
        "/opt/lineage-agent/venv/bin/lineage-agent run --config /etc/lineage-agent/config.yaml"
    ]
    assert d["Service.ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert d["Service.Restart"] == ["on-failure"]
    assert d["Service.RestartPreventExitStatus"] == ["78"]
    assert d["Service.EnvironmentFile"] == ["-/etc/lineage-agent/environment"]
    assert d["Install.WantedBy"] == ["multi-user.target"]
    assert "Type=notify-reload" in UNIT.read_text()  # documented as the systemd >= 253 option


def test_unit_stop_timeout_outlasts_the_drain() -> None:
    """TimeoutStopSec leaves the default drain_timeout time to finish, twice over at least."""
    (timeout,) = unit_directives(UNIT.read_text())["Service.TimeoutStopSec"]
    assert seconds(timeout) >= 2 * LineageConfig().drain_timeout + 10


def test_unit_identity_and_directories() -> None:
    """The agent runs as lineage-agent with the spark group and systemd-managed directories."""
    d = unit_directives(UNIT.read_text())
    assert d["Service.User"] == ["lineage-agent"]
    assert d["Service.Group"] == ["lineage-agent"]
    assert d["Service.SupplementaryGroups"] == ["spark"]
    assert d["Service.UMask"] == ["0027"]
    for kind in ("State", "Runtime", "Configuration"):
        assert d[f"Service.{kind}Directory"] == ["lineage-agent"]
        assert d[f"Service.{kind}DirectoryMode"] == ["0750"]
    # With ProtectSystem=strict nothing else is writable; the defaults live in the state dir.
    defaults = parse_config("lineage: {}\n", "defaults.yaml")
    assert defaults.state_dir == "/var/lib/lineage-agent"
    assert Path(defaults.lineage.file.path).parent == Path("/var/lib/lineage-agent")
    assert Path(defaults.control_socket).parent == Path("/run/lineage-agent")
    assert "Service.ReadWritePaths" not in d


def test_unit_hardening() -> None:
    """The sandbox directives are all set, with no capabilities at all."""
    d = unit_directives(UNIT.read_text())
    expected = {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "PrivateMounts": "yes",
        "ProtectKernelTunables": "yes",
        "ProtectKernelModules": "yes",
        "ProtectKernelLogs": "yes",
        "ProtectControlGroups": "yes",
        "ProtectClock": "yes",
        "ProtectHostname": "yes",
        "RestrictNamespaces": "yes",
        "RestrictRealtime": "yes",
        "RestrictSUIDSGID": "yes",
        "LockPersonality": "yes",
        "MemoryDenyWriteExecute": "yes",
        "SystemCallArchitectures": "native",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
        "CapabilityBoundingSet": "",
        "AmbientCapabilities": "",
    }
    for key, value in expected.items():
        assert d[f"Service.{key}"] == [value], key
    assert d["Service.SystemCallFilter"][0] == "@system-service"


def size(value: str) -> int:
    """A systemd size such as `512M`, in bytes."""
    number, unit = re.fullmatch(r"(\d+)([KMG]?)", value).groups()  # type: ignore[union-attr]
    return int(number) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[unit]


def test_unit_bounds_the_agents_memory() -> None:
    """MemoryHigh and MemoryMax are set, High below Max, both well above the measured peak
    (103 MiB replaying 5,000 logs), which the comment above them gives as the reason."""
    text = UNIT.read_text()
    d = unit_directives(text)
    (high,), (most,) = d["Service.MemoryHigh"], d["Service.MemoryMax"]
    peak = 103 * 1024**2
    assert 3 * peak <= size(high) < size(most) <= 8 * peak
    comment = text[: text.index("MemoryHigh=")].rsplit("\n\n", 1)[1]
    assert "103 MiB at the peak of a first start replaying 5,000 event logs" in comment
    assert "spark.max_line_bytes" in comment


def test_unit_leaves_other_users_processes_visible() -> None:
    """ProtectProc stays default: the Spark drivers of another user must stay visible."""
    d = unit_directives(UNIT.read_text())
    assert "Service.ProtectProc" not in d
    assert "Service.ProcSubset" not in d


def copy_systemd_units(root: Path) -> None:
    """The host's unit files and /bin/kill inside `root`, so that `verify --root` resolves the
    targets the unit orders against and the commands it runs, as on a real node."""
    units = root / "usr/lib/systemd/system"
    units.parent.mkdir(parents=True, exist_ok=True)
    # dirs_exist_ok: a staged tree already holds the agent's own unit there.
    shutil.copytree("/usr/lib/systemd/system", units, symlinks=True, dirs_exist_ok=True)
    (root / "usr/bin").mkdir(parents=True, exist_ok=True)
    kill = shutil.which("kill", path="/usr/bin:/bin")
    if kill is not None:
        shutil.copy2(kill, root / "usr/bin/kill")
    else:  # a minimal container without procps; every real node has kill(1)
        (root / "usr/bin/kill").write_text("#!/bin/sh\nexit 0\n")
        (root / "usr/bin/kill").chmod(0o755)
    if not (root / "bin").exists():
        (root / "bin").symlink_to("usr/bin")


@pytest.fixture
def unit_root(tmp_path: Path) -> Path:
    """A root with the unit installed, the host's systemd units and a stand-in executable at the
    ExecStart path (the real one is checked in
    test_install_builds_a_real_virtualenv_with_the_extras_the_config_needs)."""
    root = tmp_path / "root"
    (root / "etc/systemd/system").mkdir(parents=True)
    shutil.copy(UNIT, root / "etc/systemd/system/lineage-agent.service")
    agent = root / AGENT_IN_ROOT
    agent.parent.mkdir(parents=True)
    agent.write_text("#!/bin/sh\nexit 0\n")
    agent.chmod(0o755)
    copy_systemd_units(root)
    return root


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    assert SYSTEMD_ANALYZE is not None
    return subprocess.run(
        [SYSTEMD_ANALYZE, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0", "SYSTEMD_PAGER": "cat"},
    )


@needs_systemd_analyze
def test_unit_passes_systemd_analyze_verify(unit_root: Path) -> None:
    """`systemd-analyze verify` accepts the unit without a single warning."""
    result = analyze("verify", f"--root={unit_root}", "lineage-agent.service")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@needs_systemd_analyze
def test_verify_reports_a_misspelled_directive(unit_root: Path) -> None:
    """The verify check can fail: an unknown directive is reported with its line."""
    unit = unit_root / "etc/systemd/system/lineage-agent.service"
    lines = unit.read_text().splitlines()
    at = lines.index("ProtectClock=yes")
    lines.insert(at + 1, "ProtectClocks=yes")
    unit.write_text("\n".join(lines) + "\n")
    result = analyze("verify", f"--root={unit_root}", "lineage-agent.service")
    assert result.stderr == (
        f"{unit}:{at + 2}: Unknown key 'ProtectClocks' in section [Service], ignoring.\n"
    )


@needs_systemd_analyze
def test_verify_reports_a_missing_executable(unit_root: Path) -> None:
    """Without the installed agent, verify names the missing ExecStart binary."""
    (unit_root / AGENT_IN_ROOT).unlink()
    result = analyze("verify", f"--root={unit_root}", "lineage-agent.service")
    assert (
        "lineage-agent.service: Command /opt/lineage-agent/venv/bin/lineage-agent is not "
        "executable: No such file or directory" in result.stderr
    )


def exposure(output: str) -> float:
    match = re.search(r"Overall exposure level for lineage-agent\.service: (\d+\.\d+)", output)
    assert match is not None, output
    return float(match.group(1))


@needs_systemd_analyze
def test_unit_security_exposure_is_low(unit_root: Path) -> None:
    """`systemd-analyze security` rates the unit's exposure at most 2.0 (of 10; 'OK')."""
    result = analyze(
        "security",
        "--offline=yes",
        f"--root={unit_root}",
        "--threshold=20",
        "--no-pager",
        "lineage-agent.service",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert exposure(result.stdout) <= 2.0
    passed = {line.split()[1] for line in result.stdout.splitlines() if line.startswith("✓")}
    for item in (
        "MemoryDenyWriteExecute=",
        "NoNewPrivileges=",
        "CapabilityBoundingSet=~CAP_KILL",
        "SystemCallFilter=~@privileged",
        "ProtectSystem=",
        "User=/DynamicUser=",
    ):
        assert item in passed, item


# --- MemoryDenyWriteExecute ------------------------------------------------------------------
# systemd implements MemoryDenyWriteExecute=yes with a seccomp filter that fails with EPERM:
# mmap with PROT_WRITE|PROT_EXEC, mprotect/pkey_mprotect adding PROT_EXEC, shmat with
# SHM_EXEC. The same filter, installed in a child before exec, shows that the agent's native
# parts (PyNaCl, zstandard, lz4, cramjam, orjson, PyYAML, sqlite3, ssl) need no W+X memory.


class SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint32),
    ]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def mdwe_filter() -> Callable[[], None]:
    """A preexec_fn that installs systemd's MemoryDenyWriteExecute seccomp rules (x86-64)."""
    ld_abs, jeq, and_k, ret = 0x20, 0x15, 0x54, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, ALU|AND|K, RET|K
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    prot_write, prot_exec, shm_exec = 0x2, 0x4, 0o100000
    # seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8 * i (low word first on x86-64)
    rules = [(9, prot_write | prot_exec), (10, prot_exec), (329, prot_exec), (30, shm_exec)]
    program = [(ld_abs, 0, 0, 4), (jeq, 1, 0, 0xC000003E), (ret, 0, 0, allow)]
    for number, mask in rules:
        program += [
            (ld_abs, 0, 0, 0),
            (jeq, 0, 4, number),  # another syscall: next rule
            (ld_abs, 0, 0, 32),
            (and_k, 0, 0, mask),
            (jeq, 0, 1, mask),
            (ret, 0, 0, deny),
        ]
    program.append((ret, 0, 0, allow))
    instructions = (SockFilter * len(program))(*(SockFilter(*i) for i in program))
    prog = SockFprog(len(program), instructions)
    libc = ctypes.CDLL(None, use_errno=True)

    def install() -> None:
        # Runs in the forked child; PR_SET_NO_NEW_PRIVS (38) as systemd's NoNewPrivileges=yes.
        if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl: cannot install the seccomp filter")

    install.keep = (instructions, prog)  # type: ignore[attr-defined]
    return install


needs_x86_64 = pytest.mark.skipif(
    platform.machine() != "x86_64" or not sys.platform.startswith("linux"),
    reason="the seccomp filter here is written for Linux x86-64 system call numbers",
)

PROBE = """
import mmap, sqlite3, ssl, sys, tempfile
import cramjam, httpx, ijson, lz4.block, nacl.signing, orjson, yaml, zstandard
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
except PermissionError:
    pass
else:
    sys.exit("a writable and executable mapping was allowed: no filter")
key = nacl.signing.SigningKey.generate()
key.verify_key.verify(key.sign(b"event"))
reader = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
log = reader.decompress(open(sys.argv[1], "rb").read())
assert log.count(b"SparkListenerApplicationStart") == 1
block = lz4.block.compress(log)
assert lz4.block.decompress(block) == log
assert bytes(cramjam.snappy.decompress_raw(cramjam.snappy.compress_raw(log))) == log
assert orjson.loads(orjson.dumps({"a": [1, 2]})) == {"a": [1, 2]}
assert ijson.backend == "yajl2_c"
assert list(ijson.basic_parse(b'{"a": 1}')) == [
    ("start_map", None), ("map_key", "a"), ("number", 1), ("end_map", None)
]
assert yaml.load("a: 1", Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) == {"a": 1}
with tempfile.TemporaryDirectory() as folder:
    db = sqlite3.connect(folder + "/state.db")
    db.execute("pragma journal_mode=wal")
    db.execute("create table t (x)")
    db.execute("insert into t values (1)")
    db.commit()
ssl.create_default_context()
httpx.Client(timeout=1).close()
print("ok")
"""


MPROTECT_EXEC = """
import ctypes, mmap
libc = ctypes.CDLL(None, use_errno=True)
page = mmap.mmap(-1, mmap.PAGESIZE)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
status = libc.mprotect(ctypes.c_void_p(address), mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_EXEC)
print(status, ctypes.get_errno())
"""


@needs_x86_64
def test_mdwe_filter_refuses_writable_executable_memory() -> None:
    """Under the MemoryDenyWriteExecute rules W+X mappings and mprotect(PROT_EXEC) fail with
    EPERM, and without them both succeed: the filter is what makes the difference."""
    wx_map = (
        "import mmap\nmmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", wx_map],
        capture_output=True,
        text=True,
        preexec_fn=mdwe_filter(),
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == "PermissionError: [Errno 1] Operation not permitted"
    unfiltered = subprocess.run([sys.executable, "-c", wx_map], capture_output=True, timeout=60)
    assert unfiltered.returncode == 0
    for install, expected in ((mdwe_filter(), "-1 1\n"), (None, "0 0\n")):
        result = subprocess.run(
            [sys.executable, "-c", MPROTECT_EXEC],
            capture_output=True,
            text=True,
            preexec_fn=install,
            timeout=60,
        )
        assert (result.stdout, result.stderr) == (expected, "")


@needs_x86_64
def test_native_dependencies_work_under_mdwe() -> None:
    """Signing, every codec, YAML, streamed JSON, SQLite and TLS work without writable
    executable memory."""
    golden = ROOT / "tests/golden/catalog.jsonl.zst"
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(golden)],
        capture_output=True,
        text=True,
        preexec_fn=mdwe_filter(),
        timeout=120,
        cwd=ROOT,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "ok\n", "")


@needs_x86_64
def test_agent_runs_and_signs_under_mdwe(tmp_path: Path) -> None:
    """The real daemon signs and ships events to a file under MemoryDenyWriteExecute rules."""
    keygen(tmp_path)
    events = tmp_path / "events.jsonl"
    config = write_config(
        tmp_path,
        {"transport": "file", "file": {"path": str(events)}},
    )
    with run_agent(config, events=20, args=["--exit-when-done"], preexec_fn=mdwe_filter()) as agent:
        assert agent.proc.wait(60) == 0, agent.raw_output()
        assert "Operation not permitted" not in agent.raw_output()
    lines = events.read_text().splitlines()
    assert len(lines) == 20
    verify = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent",
            "verify",
            str(events),
            "--public-key",
            pubkey_text(tmp_path / "ed25519.key"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert verify.stdout.splitlines()[-1] == "20 events checked, 20 verified, 0 failed"


def pubkey_text(key: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "agent", "pubkey", "--key", str(key)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stdout.splitlines()[0]


# --- install.sh and uninstall.sh -------------------------------------------------------------


def run_script(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(script), *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


@functools.cache
def checkout_env() -> Path:
    """An environment whose `agent` is this checkout's, on the test environment's packages.

    install.sh runs the agent with -I (never the working directory's agent/), and the test
    environment's own agent may be another checkout's (an editable install), so linking the
    test environment would run that one. This one puts the checkout first on the path.
    """
    env = Path(tempfile.mkdtemp(prefix="lineage-env-"))
    atexit.register(shutil.rmtree, env, True)
    (env / "bin").mkdir()
    (env / "bin/python").symlink_to(TEST_ENV / "bin/python")
    (env / "pyvenv.cfg").write_text(
        f"home = {Path(sys.base_prefix) / 'bin'}\ninclude-system-site-packages = false\n"
    )
    site = env / f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"
    site.mkdir(parents=True)
    # The checkout first, then the test environment's packages (and what their .pth add).
    packages = sysconfig.get_paths()["purelib"]
    (site / "checkout.pth").write_text(f"{ROOT}\nimport site; site.addsitedir({packages!r})\n")
    script = env / "bin/lineage-agent"
    script.write_text(
        f"#!{env}/bin/python\nimport sys\nfrom agent.commands.cli import main\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    return env


def install(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """install.sh into `root`, linking an environment with the agent (fast; no pip)."""
    result = run_script(INSTALL, "--root", str(root), "--python-env", str(checkout_env()), *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Every path below `root` with its type, mode, times and content digest."""
    state: dict[str, tuple[object, ...]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            state[str(path)] = ("link", os.readlink(path), info.st_mtime_ns)
        elif stat.S_ISDIR(info.st_mode):
            state[str(path)] = ("dir", stat.S_IMODE(info.st_mode), info.st_mtime_ns)
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            state[str(path)] = ("file", stat.S_IMODE(info.st_mode), info.st_mtime_ns, digest)
    return state


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


def test_install_stages_the_tree(root: Path) -> None:
    """install.sh --root writes unit (in /usr/lib/systemd/system, where a package's units
    go), config, sysusers and tmpfiles entries and the env, and no signing key: each node's
    agent makes its own at its first start."""
    result = install(root)
    unit = root / "usr/lib/systemd/system/lineage-agent.service"
    assert not (root / "etc/systemd").exists()
    config = root / "etc/lineage-agent/config.yaml"
    assert unit.read_text() == UNIT.read_text()
    assert mode(unit) == 0o644
    assert config.read_text() == (ROOT / "config/file.yaml").read_text()
    assert mode(config) == 0o640
    assert mode(root / "etc/lineage-agent") == 0o750
    assert [p for p in root.rglob("*") if "key" in p.name] == []
    assert not (root / "var/lib/lineage-agent").exists()
    assert os.readlink(root / "opt/lineage-agent/venv") == str(checkout_env().resolve())
    assert os.access(root / AGENT_IN_ROOT, os.X_OK)
    assert (root / "usr/lib/sysusers.d/lineage-agent.conf").read_text() == (
        "# The system user of lineage-agent.service (created by deploy/install.sh).\n"
        'u lineage-agent - "OpenLineage lineage agent" /var/lib/lineage-agent /usr/sbin/nologin\n'
    )
    assert (root / "usr/lib/tmpfiles.d/lineage-agent.conf").read_text() == (
        "# Owner and mode of lineage-agent's files (written by deploy/install.sh).\n"
        "z /etc/lineage-agent 0750 root lineage-agent -\n"
        "z /etc/lineage-agent/config.yaml 0640 root lineage-agent -\n"
    )
    out = result.stdout.splitlines()
    assert (
        f"install: staging into {root}: no user created (systemd-sysusers creates it from "
        f"{root}/usr/lib/sysusers.d/lineage-agent.conf)" in out
    )
    assert f"install: staging into {root}: not running systemctl" in out
    assert [line for line in out if "warning" in line] == []  # the staged tree passes the check
    assert out[-1] == "install: done"
    assert (
        f"install: note: signing.key_path: {root}/var/lib/lineage-agent/ed25519.key: no key "
        "yet; the agent makes one (mode 0600) at its first start and logs its key id "
        "(signing_key_created)" in out
    )


def test_install_twice_changes_nothing(root: Path) -> None:
    """A second install.sh run leaves every file, mode and timestamp as it was."""
    install(root)
    before = snapshot(root)
    result = install(root)
    assert snapshot(root) == before
    config = root / "etc/lineage-agent/config.yaml"
    out = result.stdout.splitlines()
    assert f"install: keeping existing config {config}" in out
    assert f"install: {root}/usr/lib/systemd/system/lineage-agent.service is up to date" in out
    assert f"install: {root}/opt/lineage-agent/venv links to {checkout_env().resolve()}" in out


def agents_key(root: Path) -> Path:
    """The key a node's agent made at its first start, where file.yaml puts it."""
    (root / "var/lib/lineage-agent").mkdir(parents=True, exist_ok=True)
    return keygen(root / "var/lib/lineage-agent")


def test_install_never_clobbers_config_or_key(root: Path) -> None:
    """An edited config and the key the agent made survive a reinstall byte for byte."""
    install(root)
    config, key = root / "etc/lineage-agent/config.yaml", agents_key(root)
    edited = config.read_text().replace("queue_size: 1024", "queue_size: 4096")
    assert edited != config.read_text()
    config.write_text(edited)
    key_bytes = key.read_bytes()
    install(root)
    assert config.read_text() == edited
    assert key.read_bytes() == key_bytes
    assert mode(key) == 0o600


def test_install_warns_about_a_config_that_fails_the_check(root: Path) -> None:
    """A kept config that does not pass `config check` is named in a warning, not replaced."""
    (root / "etc/lineage-agent").mkdir(parents=True)
    config = root / "etc/lineage-agent/config.yaml"
    config.write_text("lineage:\n  queue_sise: 10\n")
    result = install(root)
    assert config.read_text() == "lineage:\n  queue_sise: 10\n"
    assert (
        f"install: warning: {config} does not pass 'lineage-agent config check'; the "
        "service will refuse to start (exit 78) until it is fixed" in result.stdout.splitlines()
    )
    assert result.stderr == (
        f"lineage-agent: {config}:2: lineage.queue_sise: unknown key (did you mean 'queue_size'?)\n"
    )


def test_install_unit_dir_chooses_where_the_unit_goes(root: Path) -> None:
    """--unit-dir puts the unit there (as the target sees it), and uninstall.sh --unit-dir
    removes it from there; a relative --unit-dir is refused by name."""
    install(root, "--unit-dir", "/etc/systemd/system")
    unit = root / "etc/systemd/system/lineage-agent.service"
    assert unit.read_text() == UNIT.read_text()
    assert not (root / "usr/lib/systemd").exists()
    result = run_script(INSTALL, "--root", str(root), "--unit-dir", "lib/systemd")
    assert (result.returncode, result.stderr) == (
        1,
        "install: error: --unit-dir lib/systemd: expected an absolute path (as the target "
        "system sees it)\n",
    )
    removed = run_script(UNINSTALL, "--root", str(root))
    assert removed.returncode == 0, removed.stderr
    assert f"uninstall: removed {unit}" in removed.stdout.splitlines()
    assert not unit.exists()


def test_install_rejects_bad_arguments(root: Path) -> None:
    """Unknown options, a missing root and an env without the agent are refused by name."""
    result = run_script(INSTALL, "--rooot", str(root))
    assert (result.returncode, result.stderr.splitlines()[0]) == (
        2,
        "install: error: unknown argument: --rooot",
    )
    result = run_script(INSTALL, "--root", str(root / "missing"))
    assert (result.returncode, result.stderr) == (
        1,
        f"install: error: --root {root / 'missing'}: no such directory\n",
    )
    result = run_script(INSTALL, "--root", str(root), "--python-env", str(root))
    assert (result.returncode, result.stderr) == (
        1,
        f"install: error: --python-env {root}: no bin/lineage-agent in it "
        "(pip install the project there first)\n",
    )


def test_uninstall_keeps_config_key_and_state(root: Path) -> None:
    """uninstall.sh removes unit and env but keeps config, key and state; twice is fine."""
    install(root)
    key = agents_key(root)
    state = root / "var/lib/lineage-agent/state.db"
    state.write_bytes(b"ledger")
    config = root / "etc/lineage-agent/config.yaml"
    key_bytes = key.read_bytes()
    result = run_script(UNINSTALL, "--root", str(root))
    assert result.returncode == 0, result.stderr
    assert not (root / "usr/lib/systemd/system/lineage-agent.service").exists()
    assert not (root / "opt/lineage-agent").exists()
    assert (checkout_env() / "bin/lineage-agent").exists()  # the linked one is untouched
    assert key.read_bytes() == key_bytes
    assert config.read_text() == (ROOT / "config/file.yaml").read_text()
    assert state.read_bytes() == b"ledger"
    assert (
        f"uninstall: keeping {root}/etc/lineage-agent (--purge removes it)"
        in result.stdout.splitlines()
    )
    before = snapshot(root)
    again = run_script(UNINSTALL, "--root", str(root))
    assert again.returncode == 0, again.stderr
    assert snapshot(root) == before
    assert f"uninstall: {root}/opt/lineage-agent is already gone" in again.stdout.splitlines()


def test_reinstall_after_uninstall_reuses_the_key(root: Path) -> None:
    """Install, uninstall, install: the node keeps its signing key and its config."""
    install(root)
    key = agents_key(root)
    key_bytes = key.read_bytes()
    assert run_script(UNINSTALL, "--root", str(root)).returncode == 0
    install(root)
    assert key.read_bytes() == key_bytes


def test_uninstall_purge_removes_everything(root: Path) -> None:
    """--purge leaves no file of the agent in the root; running it again still exits 0."""
    install(root)
    (root / "var/lib/lineage-agent").mkdir(parents=True)
    (root / "var/lib/lineage-agent/events.jsonl").write_text("{}\n")
    result = run_script(UNINSTALL, "--root", str(root), "--purge")
    assert result.returncode == 0, result.stderr
    assert [p for p in root.rglob("*") if not p.is_dir()] == []
    assert not (root / "etc/lineage-agent").exists()
    assert not (root / "var/lib/lineage-agent").exists()
    again = run_script(UNINSTALL, "--root", str(root), "--purge")
    assert again.returncode == 0, again.stderr
    assert f"uninstall: {root}/etc/lineage-agent is already gone" in again.stdout.splitlines()


def distribution_python() -> Path | None:
    """This machine's /usr/bin/python3 when it can make a virtual environment for the agent
    (3.11 or newer, with venv and ensurepip); it stands in for an image's own interpreter."""
    python = Path("/usr/bin/python3")
    if not python.exists():
        return None
    check = "import ensurepip, sys, venv; sys.exit(sys.version_info < (3, 11))"
    usable = subprocess.run([str(python), "-c", check], capture_output=True, timeout=60)
    return python if usable.returncode == 0 else None


needs_distribution_python = pytest.mark.skipif(
    distribution_python() is None,
    reason="no /usr/bin/python3 (3.11 or newer, with venv) to stand in for an image's Python",
)


def image_source(root: Path, tmp_path: Path) -> Path:
    """A frozen copy of the project (the checkout may change while a test runs), and in
    `root` the image's interpreter: on this machine the same path holds the same one, so the
    staged environment can be run here as the image will run it."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "agent", source / "agent", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/python3").symlink_to(Path("/usr/bin/python3").resolve())
    return source


EXAMPLE = ROOT / "config" / "file.yaml"
LOCAL_DIRS = "event_log_dirs: [/var/log/spark-events]"


def config_with(path: Path, *directories: str) -> Path:
    """The example config following `directories` instead of its own, written at `path`."""
    text = EXAMPLE.read_text()
    assert LOCAL_DIRS in text
    listed = ", ".join(f'"{d}"' for d in directories)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace(LOCAL_DIRS, f"event_log_dirs: [{listed}]"))
    return path


@needs_systemd_analyze
@needs_distribution_python
def test_install_builds_a_real_virtualenv_with_the_extras_the_config_needs(
    root: Path, tmp_path: Path
) -> None:
    """Without --python-env, install.sh --root pip-installs the project into an environment
    made with the image's own Python (the tree's /usr/bin/python3): its links, pyvenv.cfg,
    scripts and byte code name paths in the image, never the staging directory or the build
    host's interpreter; systemd-analyze accepts it as ExecStart. With a config kept in the
    tree that follows s3a:// and no --extras, it asks the agent what the config needs and
    adds the [s3] extra: s3fs imports there, gcsfs does not; a second run changes nothing;
    --extras '' installs none. One environment for all of it, as each real install costs
    tens of seconds of CPU (needs pip's package index)."""
    source = image_source(root, tmp_path)
    kept = config_with(root / "etc/lineage-agent/config.yaml", "s3a://spark-logs/events")
    result = run_script(INSTALL, "--root", str(root), "--source", str(source))
    assert result.returncode == 0, result.stdout + result.stderr
    venv = root / "opt/lineage-agent/venv"
    assert not venv.is_symlink()
    out = result.stdout.splitlines()
    assert (
        f"install: {venv} runs the image's /usr/bin/python3 (made with {root}/usr/bin/python3)"
        in out
    )
    assert f"install: {kept} names stores that need the extras [s3]: installing them" in out
    assert (venv / ".lineage-agent-source").read_text().endswith(" [s3]\n")
    assert os.readlink(venv / "bin/python3") == "/usr/bin/python3"
    config = (venv / "pyvenv.cfg").read_text()
    assert "home = /usr/bin\n" in config
    assert "command = /usr/bin/python3 -m venv /opt/lineage-agent/venv\n" in config
    assert sys.base_prefix not in config
    # Nothing in it names the staging directory (scripts, byte code, metadata).
    staged = str(root).encode()
    assert [p for p in venv.rglob("*") if p.is_file() and staged in p.read_bytes()] == []

    def run_staged(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(venv / "bin/python"), "-I", *args], capture_output=True, text=True, timeout=60
        )

    version = run_staged("-m", "agent", "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("lineage-agent ")
    assert f"install: installed {version.stdout.strip()} from {source} into {venv}" in out
    # The environment is isolated: the agent runs from its own site-packages.
    where = Path(run_staged("-c", "import agent; print(agent.__file__)").stdout.strip())
    assert where.is_relative_to(venv.resolve())
    assert run_staged("-c", "import s3fs").returncode == 0
    assert run_staged("-c", "import gcsfs").returncode != 0
    first_line = (root / AGENT_IN_ROOT).read_text().splitlines()[0]
    assert first_line == "#!/opt/lineage-agent/venv/bin/python"
    commands = where.parent / "commands"
    (cached,) = (commands / "__pycache__").glob("cli.*.pyc")
    code = marshal.loads(cached.read_bytes()[16:])
    assert code.co_filename == "/" + str(commands.relative_to(root) / "cli.py")
    before = snapshot(root)
    again = run_script(INSTALL, "--root", str(root), "--source", str(source))
    assert f"install: {venv} is up to date with {source}" in again.stdout.splitlines()
    assert "installing them" not in again.stdout
    assert snapshot(root) == before  # checked without touching the staged environment
    copy_systemd_units(root)
    verify = analyze("verify", f"--root={root}", "lineage-agent.service")
    assert (verify.returncode, verify.stdout, verify.stderr) == (0, "", "")
    none = run_script(INSTALL, "--root", str(root), "--source", str(source), "--extras", "")
    assert none.returncode == 0, none.stdout + none.stderr
    assert "installing them" not in none.stdout
    assert not (venv / ".lineage-agent-source").read_text().endswith("]\n")


def test_install_refuses_to_stage_an_environment_on_the_build_hosts_python(root: Path) -> None:
    """--root with no Python in the tree, or --python outside it, is refused by name before
    an environment is made: a staged one must not run the build host's interpreter."""
    result = run_script(INSTALL, "--root", str(root))
    assert (result.returncode, result.stderr) == (
        1,
        f"install: error: --root {root}: no {root}/usr/bin/python3: a staged environment runs "
        "the image's own Python at the same path, and this tree has none. Stage into the "
        "image's root file system (with Python 3.11 or newer), give --python an interpreter "
        f"inside {root}, or run install.sh inside the image build without --root\n",
    )
    host = Path(sys.executable).parent.resolve() / Path(sys.executable).name
    result = run_script(INSTALL, "--root", str(root), "--python", sys.executable)
    assert (result.returncode, result.stderr) == (
        1,
        f"install: error: --python {host} is not inside --root {root}: the staged environment "
        "would run this build host's interpreter, which the image does not have (the service "
        "would fail with status 203/EXEC). Give --python the image's own interpreter, inside "
        f"{root}\n",
    )
    assert not (root / "opt").exists()


# --- example configs -------------------------------------------------------------------------


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_config_passes_config_check(name: str, root: Path) -> None:
    """Every example passes `lineage-agent config check` run as a command, in a freshly
    staged tree: the key the agent makes at its first start, a token variable the shell
    lacks and the event-log directory Spark has not made yet are notes."""
    command = [sys.executable, "-m", "agent", "config", "check", str(ROOT / "config" / name)]
    env = {k: v for k, v in os.environ.items() if k != "OPENLINEAGE_TOKEN"}
    result = subprocess.run(
        [*command, "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )
    notes = (
        f"note: signing.key_path: {root}/var/lib/lineage-agent/ed25519.key: no key yet; the "
        "agent makes one (mode 0600) at its first start and logs its key id "
        "(signing_key_created)\n"
    )
    if name == "openlineage-client.yaml":  # where its client-shaped settings were written
        notes = (
            "".join(
                f"from: {key}: {ROOT / 'config' / name}:{line}\n"
                for key, line in [
                    ("lineage.transport", 15),
                    ("lineage.http.endpoint", 21),
                    ("lineage.http.timeout", 23),
                    ("lineage.file.path", 28),
                ]
            )
            + "differs: lineage.queue_size: events wait in a queue of 1024 per transport and are "
            "dropped when it is full (at-most-once); the client sends each event inside emit()\n"
            "differs: signing.key_path: every event carries the agent's Ed25519 signature facet; "
            "the client's carry none\n"
            "differs: lineage.transport: composite: each member has its own queue and gets every "
            "event whatever the others do (continue_on_failure and continue_on_success both "
            "true)\n" + notes
        )
    if name == "https-bearer.yaml":
        notes += (
            "note: lineage.http.auth.token_env: environment variable OPENLINEAGE_TOKEN is not "
            "set here; the service refuses to start unless its environment sets it\n"
        )
    notes += (
        f"note: spark.event_log_dirs: {root}/var/log/spark-events: no such directory here; "
        "the agent waits for it to appear (check spark.eventLog.dir of the cluster)\n"
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "ok\n" + notes, "")


def leaf_keys(node: Node, prefix: str = "") -> Iterator[tuple[str, ScalarNode, Node]]:
    assert isinstance(node, MappingNode)
    for key, value in node.value:
        dotted = f"{prefix}.{key.value}" if prefix else str(key.value)
        if isinstance(value, MappingNode):
            yield from leaf_keys(value, dotted)
        else:
            yield dotted, key, value


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_config_explains_every_key(name: str) -> None:
    """Every key an example sets has a comment on the line above or at the end of its line."""
    text = (ROOT / "config" / name).read_text()
    lines = text.splitlines()
    unexplained = []
    document = yaml.compose(text)
    assert document is not None
    for dotted, key, value in leaf_keys(document):
        line = key.start_mark.line
        above = line > 0 and lines[line - 1].lstrip().startswith("#")
        tail = lines[value.end_mark.line][value.end_mark.column :]
        if not above and "#" not in tail:
            unexplained.append(dotted)
    assert unexplained == []


def test_https_example_sends_its_token_only_over_https(tmp_path: Path) -> None:
    """The bearer example uses https; the same file with http is refused by config check."""
    source = ROOT / "config/https-bearer.yaml"
    config = parse_config(source.read_text(), str(source))
    http = config.lineage.http
    assert http is not None and http.auth is not None
    assert (http.auth.type, http.auth.token_env) == ("bearer", "OPENLINEAGE_TOKEN")
    assert urlsplit(http.endpoint).scheme == "https"
    assert "# ca_file: /etc/lineage-agent/collector-ca.pem" in source.read_text()
    plain = tmp_path / "plain.yaml"
    text = source.read_text().replace("endpoint: https://", "endpoint: http://")
    plain.write_text(text)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "endpoint: http://" in t)
    result = subprocess.run(
        [sys.executable, "-m", "agent", "config", "check", str(plain)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert (result.returncode, result.stderr) == (
        78,
        f"lineage-agent: {plain}:{line}: lineage.http.endpoint: bearer auth needs an "
        "https:// endpoint; refusing to send a token over http\n",
    )


def test_example_transports() -> None:
    """file.yaml writes files, marquez.yaml and https-bearer.yaml post, both.yaml and
    openlineage-client.yaml (the client's composite) do both."""
    transports = {
        name: parse_config((ROOT / "config" / name).read_text(), name).lineage.transport
        for name in EXAMPLES
    }
    assert transports == {
        "file.yaml": ("file",),
        "marquez.yaml": ("http",),
        "https-bearer.yaml": ("http",),
        "both.yaml": ("http", "file"),
        "openlineage-client.yaml": ("http", "file"),
    }


# --- docker-compose.marquez.yaml -------------------------------------------------------------
# Docker cannot run in the test environment, so these tests check the compose file's
# structure; they do not start the containers.


def compose() -> dict[str, object]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def services() -> dict[str, dict[str, object]]:
    found = compose()["services"]
    assert isinstance(found, dict)
    return found


def test_compose_pins_the_upstream_images() -> None:
    """PostgreSQL 14, Marquez API and web at the same explicit release tag, never latest."""
    images = {name: str(service["image"]) for name, service in services().items()}
    assert images == {
        "db": "postgres:14",
        "api": "marquezproject/marquez:0.51.1",
        "web": "marquezproject/marquez-web:0.51.1",
    }
    for image in images.values():
        name, _, tag = image.rpartition(":")
        assert name and tag and tag != "latest" and "$" not in image


def test_compose_has_healthchecks_and_waits_on_them() -> None:
    """Each service has a healthcheck; the API waits for the database, the UI for the API."""
    found = services()
    for name, service in found.items():
        check = service["healthcheck"]
        assert isinstance(check, dict) and check["test"][0] in ("CMD", "CMD-SHELL"), name
    assert found["api"]["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert found["web"]["depends_on"] == {"api": {"condition": "service_healthy"}}
    api_check = found["api"]["healthcheck"]
    assert isinstance(api_check, dict)
    assert "http://127.0.0.1:5001/healthcheck" in api_check["test"]


def published_ports(service: dict[str, object]) -> list[tuple[str, int, int]]:
    """(host address, host port, container port) of each `ports` entry."""
    ports = []
    for entry in service.get("ports", []):  # type: ignore[attr-defined]
        host, host_port, container_port = str(entry).rsplit(":", 2)
        ports.append((host, int(host_port), int(container_port)))
    return ports


def test_compose_publishes_only_on_loopback() -> None:
    """Ports 5000, 5001 and 3000 are published on 127.0.0.1; the database is not published."""
    found = services()
    published = {name: published_ports(service) for name, service in found.items()}
    assert published == {
        "db": [],
        "api": [("127.0.0.1", 5000, 5000), ("127.0.0.1", 5001, 5001)],
        "web": [("127.0.0.1", 3000, 3000)],
    }


def test_compose_keeps_the_database_in_a_volume() -> None:
    """The PostgreSQL data directory is a named volume declared in the file."""
    volumes = compose()["volumes"]
    assert isinstance(volumes, dict)
    db = services()["db"]
    assert db["volumes"] == ["marquez-db:/var/lib/postgresql/data"]
    assert "marquez-db" in volumes


@pytest.mark.parametrize("name", ["marquez.yaml", "both.yaml"])
def test_marquez_endpoint_matches_the_compose_api_port(name: str) -> None:
    """The example's endpoint reaches the API port that the compose file publishes."""
    http = parse_config((ROOT / "config" / name).read_text(), name).lineage.http
    assert http is not None
    url = urlsplit(http.endpoint)
    api = services()["api"]
    environment = api["environment"]
    assert isinstance(environment, dict)
    api_port = int(environment["MARQUEZ_PORT"])
    assert (url.hostname, url.port, url.path) == ("localhost", 5000, "/api/v1/lineage")
    assert ("127.0.0.1", url.port, api_port) in published_ports(api)


def test_install_refuses_unknown_extras_and_extras_with_a_linked_environment(
    tmp_path: Path,
) -> None:
    """--extras takes the store extras pyproject.toml defines, named back in the error when
    another is given, and refuses to be combined with --python-env (an environment
    install.sh does not make), before anything is staged."""
    root = tmp_path / "root"
    root.mkdir()
    unknown = run_script(INSTALL, "--root", str(root), "--extras", "s3,hdfs")
    assert unknown.returncode == 1
    assert unknown.stderr == (
        "install: error: --extras s3,hdfs: unknown extra 'hdfs' (known: s3, gcs, azure)\n"
    )
    refused = run_script(
        INSTALL, "--root", str(root), "--extras", "gcs", "--python-env", str(tmp_path)
    )
    assert refused.returncode == 1 and "pip install 'edge-lineage-agent[gcs]'" in refused.stderr
    assert list(root.iterdir()) == []
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert {"s3", "gcs", "azure"} <= set(project["optional-dependencies"])
