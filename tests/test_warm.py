"""The warm process of ``lingyi verify`` (lingyi._warm): a call through it is a fresh call.

Real processes and real sockets: each call is ``python -m lingyi`` in a subprocess, with the
warm process switched on (``LINGYI_DAEMON=1``, which tests/conftest.py turns off for every
other test) and a socket folder of this module's own (``LINGYI_WARM_DIR``). Each test compares
a call handed to the warm process with the same call run in-process (``LINGYI_DAEMON=0``):
stdout, stderr and exit code, record ids aside. That a call really went through the warm
process is read from its call counter (``lingyi daemon status --json``). Every warm process
started is stopped at teardown (``lingyi daemon stop``). No timing is asserted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lingyi._warm import place, wire
from lingyi.log import read_log
from tests.conftest import SHIPPED_POLICIES

pytestmark = pytest.mark.skipif(not place.supported(), reason="POSIX only (fork, SCM_RIGHTS)")

ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
MEDICAL = ["--tool", "search_knowledge", "--args", '{"query": "失眠吃什么药"}']
# (name, arguments, exit code): approved, rejected, fallback, bad input, and JSON, zh and en.
CALLS = [
    ("approved zh", ["--member", "lingzhi", "--content", "庄子的逍遥游讲的是自由"], 0),
    ("approved en", ["--member", "lingzhi", "--content", "Zhuangzi wrote about freedom"], 0),
    ("rejected zh", ["--member", "lingzhi", *MEDICAL], 1),
    ("rejected en", ["--member", "lingyi", "--type", "communication",
                     "--content", "LingFlow told me the v0.16 audit is done"], 1),
    ("fallback zh", ["--member", "lingzhi", "--content", "基于数据趋势，灵通下周一会上线"], 0),
    ("fallback en", ["--member", "lingzhi", "--content",
                     "Based on the trend, LingFlow will ship on Monday"], 0),
    ("bad input", ["--member", "lingzhi"], 2),
    ("bad json", ["--member", "lingzhi", "--tool", "search_knowledge", "--args", "{", "--json"], 2),
    ("unknown option", ["--member", "lingzhi", "--no-such-option"], 2),
    ("json zh", ["--member", "lingzhi", *MEDICAL, "--json"], 1),
    ("json en", ["--member", "lingzhi", "--content", "Zhuangzi wrote about freedom", "--json"], 0),
]  # fmt: skip


@dataclass
class World:
    """A deployment (zh and en configs over a copy of the shipped policies), one log, and the
    environment of a call with the warm process on."""

    root: Path
    warm_dir: Path
    policies: Path
    log: Path
    configs: dict[str, Path]

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(LINGYI_DAEMON="1", LINGYI_WARM_DIR=str(self.warm_dir), LINGYI_LOG=str(self.log))
        env.update(LINGYI_DAEMON_IDLE="120")  # one a test left behind is gone soon anyway
        env.update(extra)
        return env

    def lingyi(
        self, *args: str, warm: bool = True, stdin: str | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """``lingyi ARGS`` in a fresh process from this world's folder."""
        environ = self.env(**env) if warm else self.env(LINGYI_DAEMON="0", **env)
        return subprocess.run(
            [sys.executable, "-m", "lingyi", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=environ,
            cwd=self.root,
            timeout=120,
        )

    def verify(self, language: str, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return self.lingyi("--config", str(self.configs[language]), "verify", *args, **kw)

    def start(self, language: str, *args: str, **env: str) -> subprocess.Popen[str]:
        """``lingyi verify ARGS`` started, not waited for."""
        return subprocess.Popen(
            [sys.executable, "-m", "lingyi", "--config", str(self.configs[language]), "verify",
             *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=self.env(**env), cwd=self.root,
        )  # fmt: skip

    def status(self, **env: str) -> dict[str, Any]:
        done = self.lingyi("daemon", "status", "--json", **env)
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    def current(self, **env: str) -> dict[str, Any] | None:
        """The warm process a verify from here would use, if it runs."""
        return next((s for s in self.status(**env)["running"] if s["current"]), None)

    def calls(self, **env: str) -> int:
        running = self.current(**env)
        return -1 if running is None else int(running["calls"])

    def up(self, **env: str) -> dict[str, Any]:
        """Start the warm process (a first call) and wait until it answers with the policies
        warm; a readiness wait, not a timing assertion."""
        if (running := self.current(**env)) is None:
            self.verify("zh", "--member", "lingzhi", "--content", "庄子", **env)
        for _ in range(600):
            running = self.current(**env)
            if running is not None and running["warm_policies"]:
                return running
            time.sleep(0.1)
        raise AssertionError(f"no warm process answered in {self.warm_dir}")

    def stop(self) -> None:
        self.lingyi("daemon", "stop")


def _config(root: Path, language: str, policies: Path) -> Path:
    path = root / f"lingyi-{language}.toml"
    path.write_text(
        f'language = "{language}"\n[paths]\nvalidators = "{policies.as_posix()}"\n',
        encoding="utf-8",
    )
    return path


def make_world(root: Path) -> World:
    """zh and en configs over a copy of the shipped policies, a log and a socket folder."""
    warm_dir = root / "sockets"
    warm_dir.mkdir(mode=0o700)
    policies = root / "validators"
    shutil.copytree(SHIPPED_POLICIES, policies)
    configs = {lang: _config(root, lang, policies) for lang in ("zh", "en")}
    return World(root, warm_dir, policies, root / "log.jsonl", configs)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    found = make_world(tmp_path_factory.mktemp("warm"))
    yield found
    found.stop()


def same(text: str) -> str:
    """Output with the record ids (ULIDs) masked: they differ from call to call."""
    return ULID.sub("<id>", text)


@pytest.mark.parametrize(("name", "args", "code"), CALLS, ids=[c[0] for c in CALLS])
def test_a_call_through_the_warm_process_prints_what_a_fresh_one_prints(
    world: World, name: str, args: list[str], code: int
) -> None:
    """Approved, rejected, fallback, bad input (exit 2), a usage error and ``--json``, zh and
    en: stdout, stderr and exit code through the warm process are those of an in-process run,
    and the call did go through it (its counter moved by one)."""
    language = "en" if name.endswith("en") else "zh"
    before = world.up()["calls"]
    warm = world.verify(language, *args)
    fresh = world.verify(language, *args, warm=False)
    assert world.calls() == before + 1
    assert (warm.returncode, same(warm.stdout), same(warm.stderr)) == (
        code,
        same(fresh.stdout),
        same(fresh.stderr),
    )


def test_stdin_reaches_the_child(world: World) -> None:
    """``--stdin``: the assertion read from the caller's stdin, passed to the child as fd 0,
    zh and en; the same verdict as in-process."""
    before = world.up()["calls"]
    for content in ("灵通说v0.16审计已经完成", "LingFlow told me the v0.16 audit is done"):
        given = json.dumps({"member": "lingyi", "type": "communication", "content": content})
        warm = world.verify("zh", "--stdin", "--json", stdin=given)
        fresh = world.verify("zh", "--stdin", "--json", stdin=given, warm=False)
        assert warm.returncode == fresh.returncode == 1
        assert same(warm.stdout) == same(fresh.stdout)
        assert json.loads(warm.stdout)["decision"] == "rejected"
    assert world.calls() == before + 2


def test_records_keep_their_shape_and_the_chain_holds_across_writers(world: World) -> None:
    """Records written by the warm process's children and by in-process runs, interleaved in
    one log, have the same fields and one valid hash chain (``lingyi log verify``)."""
    log = world.root / "interleaved.jsonl"
    world.up()
    for i in range(6):
        done = world.verify("zh", "--member", "lingzhi", "--content", f"庄子第{i}篇讲自由",
                            warm=i % 2 == 0, LINGYI_LOG=str(log))  # fmt: skip
        assert done.returncode == 0, done.stderr
    records = [line.record for line in read_log(log) if line.record]
    assert len(records) == 6
    assert len({tuple(sorted(r)) for r in records}) == 1
    assert {r["member"] for r in records} == {"lingzhi"}
    checked = world.lingyi("log", "verify", str(log), LINGYI_LOG=str(log))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_callers_environment_decides_where_the_record_goes(world: World) -> None:
    """``LINGYI_LOG`` of each call, not of the call that started the warm process: two calls
    with two logs each write to their own."""
    world.up()
    logs = [world.root / "env-a.jsonl", world.root / "env-b.jsonl"]
    for log in logs:
        done = world.verify(
            "en", "--member", "lingzhi", "--content", "Zhuangzi", LINGYI_LOG=str(log)
        )
        assert done.returncode == 0, done.stderr
    assert [len([r for r in read_log(log) if r.record]) for log in logs] == [1, 1]


@pytest.mark.parametrize(
    ("language", "old", "new"),
    [
        ("zh", "请咨询执业医师；灵知只提供文化与历史层面的知识", "请去医院挂号（已改）"),
        ("en", "consult a licensed physician; this member only covers cultural and historical "
               "knowledge", "see a doctor (edited)"),
    ],
    ids=["zh", "en"],
)  # fmt: skip
def test_an_edited_policy_is_honoured_on_the_very_next_call(
    world: World, language: str, old: str, new: str
) -> None:
    """A policy file edited after the warm process loaded it: the next call through it says
    what the edited file says (the warm set's fingerprint no longer matches), as a fresh
    process does; and the edit back is honoured too."""
    world.up()
    path = world.policies / "lingzhi.toml"
    text = path.read_text(encoding="utf-8")
    args = ["--member", "lingzhi", *MEDICAL]
    assert old in world.verify(language, *args).stdout
    try:
        path.write_text(text.replace(old, new), encoding="utf-8")
        warm, fresh = world.verify(language, *args), world.verify(language, *args, warm=False)
        assert new in warm.stdout and old not in warm.stdout
        assert same(warm.stdout) == same(fresh.stdout)
    finally:
        path.write_text(text, encoding="utf-8")
    assert old in world.verify(language, *args).stdout


def _fresh_world(world: World, name: str) -> World:
    """The same deployment with a socket folder of its own (not yet made)."""
    return World(world.root, world.root / name, world.policies, world.log, world.configs)


@pytest.mark.parametrize("unsafe", ["group bits", "other bits", "symlink"])
def test_an_unsafe_socket_folder_is_refused_and_the_call_runs_in_process(
    world: World, unsafe: str
) -> None:
    """A socket folder that others may enter, or a link to one: no warm process is used or
    started there (nothing listens in it afterwards), the call still answers as in-process,
    and stderr says why."""
    other = _fresh_world(world, f"unsafe-{unsafe.replace(' ', '-')}")
    target = world.root / f"target-{unsafe.replace(' ', '-')}"
    target.mkdir(mode=0o700)
    if unsafe == "symlink":
        other.warm_dir.symlink_to(target)
    else:
        other.warm_dir.mkdir()
        other.warm_dir.chmod(0o770 if unsafe == "group bits" else 0o705)
    args = ["--member", "lingzhi", "--content", "庄子的逍遥游讲的是自由"]
    for _ in range(2):
        done = other.verify("zh", *args)
        fresh = other.verify("zh", *args, warm=False)
        assert (done.returncode, same(done.stdout)) == (0, same(fresh.stdout))
        assert "unsafe socket folder" in done.stderr
    assert list(target.iterdir()) == []
    if unsafe != "symlink":
        assert [p for p in other.warm_dir.iterdir() if p.suffix == ".sock"] == []


def test_a_stale_socket_file_is_replaced(world: World) -> None:
    """A socket file nobody listens on (a crashed warm process): the call runs in-process,
    and the warm process it starts removes the file and listens there."""
    other = _fresh_world(world, "stale")
    other.warm_dir.mkdir(mode=0o700)
    path = other.status()["socket"]
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)
    stale.close()  # the file stays, nothing listens
    try:
        done = other.verify("zh", "--member", "lingzhi", "--content", "庄子的逍遥游讲的是自由")
        assert done.returncode == 0, done.stderr
        running = other.up()
        assert running["socket"] == path
        before = running["calls"]
        assert other.verify("en", "--member", "lingzhi", "--content", "Zhuangzi").returncode == 0
        assert other.calls() == before + 1
    finally:
        other.stop()


def test_a_killed_warm_process_leaves_the_next_call_correct(world: World) -> None:
    """SIGKILL to the warm process (its socket file left behind): the next call answers as
    in-process, and a new warm process takes over the socket."""
    other = _fresh_world(world, "killed")
    other.warm_dir.mkdir(mode=0o700)
    pid = other.up()["pid"]
    os.kill(pid, signal.SIGKILL)
    args = ["--member", "lingzhi", *MEDICAL]
    try:
        done, fresh = other.verify("zh", *args), other.verify("zh", *args, warm=False)
        assert (done.returncode, same(done.stdout), same(done.stderr)) == (
            1,
            same(fresh.stdout),
            same(fresh.stderr),
        )
        assert other.up()["pid"] != pid
    finally:
        other.stop()


def test_the_switch_and_unusual_flags_keep_the_call_in_process(world: World) -> None:
    """``LINGYI_DAEMON=0``, and an interpreter flag a warm process would not honour (-X
    importtime): the call runs in-process and starts no warm process."""
    other = _fresh_world(world, "off")
    other.warm_dir.mkdir(mode=0o700)
    args = ["--config", str(world.configs["zh"]), "verify", "--member", "lingzhi",
            "--content", "庄子"]  # fmt: skip
    assert other.lingyi(*args, warm=False).returncode == 0
    flagged = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "lingyi", *args],
        capture_output=True, text=True, env=other.env(), cwd=other.root, timeout=120,
    )  # fmt: skip
    assert flagged.returncode == 0
    time.sleep(1.0)  # a warm process started by mistake would have made its socket by now
    assert [p for p in other.warm_dir.iterdir() if p.suffix == ".sock"] == []


def test_daemon_status_and_stop(world: World) -> None:
    """``lingyi daemon status --json`` names the running warm process (the one a verify from
    here uses is current) and ``stop --json`` stops it: status then lists none."""
    other = _fresh_world(world, "status")
    other.warm_dir.mkdir(mode=0o700)
    assert other.status()["running"] == []
    running = other.up()
    assert running["current"] and running["idle_timeout_s"] == 120
    stopped = other.lingyi("daemon", "stop", "--json")
    assert json.loads(stopped.stdout)["stopped"][0]["pid"] == running["pid"]
    for _ in range(100):
        if not other.status()["running"]:
            break
        time.sleep(0.1)
    assert other.status()["running"] == []
    human = other.lingyi("daemon", "status")
    assert "no warm process running" in human.stdout


def _ask_until_warm(folder: Path) -> dict[str, Any]:
    """The status of the warm process in ``folder``, asked over its socket (a status asked
    while it is still loading is answered when it is done), once its policies are warm."""
    for _ in range(1200):
        for path in folder.glob("*.sock"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                try:
                    sock.connect(str(path))
                    wire.send(sock, {"op": "status"})
                    answer = wire.receive(sock)[0]
                except (OSError, ValueError):
                    continue
            if answer is not None and answer["warm_policies"]:
                return answer
        time.sleep(0.05)
    raise AssertionError(f"no warm process became ready in {folder}")


def _children(pid: int) -> list[int]:
    """The children of ``pid`` (Linux's /proc)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the child in /proc")
def test_a_child_that_dies_mid_call_is_an_error_and_the_call_is_not_repeated(
    world: World,
) -> None:
    """The child running a call is killed while it waits for stdin: the caller says so on
    stderr and exits 70, and the call is not run again (nothing is logged for it)."""
    other = _fresh_world(world, "lost")
    other.warm_dir.mkdir(mode=0o700)
    log = world.root / "lost.jsonl"
    pid = other.up()["pid"]
    caller = other.start("zh", "--stdin", LINGYI_LOG=str(log))
    try:
        for _ in range(600):  # the child is forked when the call arrives
            if children := _children(pid):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("no child was forked for the call")
        os.kill(children[0], signal.SIGKILL)
        given = json.dumps({"member": "lingzhi", "type": "fact", "content": "庄子"})
        out, err = caller.communicate(given, timeout=120)
    finally:
        caller.kill()
        other.stop()
    assert caller.returncode == 70
    assert "ended this call without an exit code" in err and "not repeated" in err
    assert out == ""
    assert not log.exists() or [r for r in read_log(log) if r.record] == []


def _wait_for_child(pid: int) -> int:
    for _ in range(600):  # the child is forked when the call arrives
        if children := _children(pid):
            return children[0]
        time.sleep(0.05)
    raise AssertionError("no child was forked for the call")


def _gone(pid: int) -> bool:
    """``pid`` has ended within 10 s (the warm process ignores SIGCHLD: the kernel reaps it)."""
    for _ in range(200):
        if not Path(f"/proc/{pid}").exists():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds the child in /proc")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_to_the_caller_ends_the_child_and_the_caller_as_a_fresh_process(
    world: World, signum: int
) -> None:
    """``kill`` of a caller whose call waits for stdin in a warm child (a timeout wrapper, a
    closed terminal): the child gets the signal too and ends, the caller ends of the same
    signal (as a fresh process would), and nothing is logged for the call."""
    other = _fresh_world(world, f"signal-{signum}")
    other.warm_dir.mkdir(mode=0o700)
    log = world.root / f"signal-{signum}.jsonl"
    pid = other.up()["pid"]
    caller = other.start("zh", "--stdin", LINGYI_LOG=str(log))
    try:
        child = _wait_for_child(pid)
        time.sleep(0.5)  # the caller installs its forwarding once it has the child's pid
        caller.send_signal(signum)
        caller.wait(timeout=120)
        ended = _gone(child)  # stdin is still open: only the signal can have ended it
        out, _ = caller.communicate(timeout=120)
    finally:
        caller.kill()
        other.stop()
    assert caller.returncode == -signum
    assert ended, f"the child {child} outlived its caller"
    assert out == ""
    assert not log.exists() or [r for r in read_log(log) if r.record] == []


def test_two_first_calls_at_once_start_one_warm_process_and_both_answer(world: World) -> None:
    """Two calls with no warm process yet, at once: both answer as in-process (zh and en),
    each starts a warm process, one of those wins the socket and the other exits."""
    other = _fresh_world(world, "race")
    other.warm_dir.mkdir(mode=0o700)
    cases = [("zh", "庄子的逍遥游讲的是自由"), ("en", "Zhuangzi wrote about freedom")]
    try:
        callers = [other.start(lang, "--member", "lingzhi", "--content", t) for lang, t in cases]
        outs = [c.communicate(timeout=120) for c in callers]
        for (lang, text), caller, (out, _) in zip(cases, callers, outs, strict=True):
            fresh = other.verify(lang, "--member", "lingzhi", "--content", text, warm=False)
            assert (caller.returncode, same(out)) == (0, same(fresh.stdout))
        other.up()
        assert len(other.status()["running"]) == 1
    finally:
        other.stop()


def test_an_idle_warm_process_removes_its_socket_and_exits(world: World) -> None:
    """``LINGYI_DAEMON_IDLE=1``: a second after its last call the warm process removes its
    socket and exits; the next call runs in-process and starts another."""
    other = _fresh_world(world, "idle")
    other.warm_dir.mkdir(mode=0o700)
    started = other.verify("zh", "--member", "lingzhi", "--content", "庄子", LINGYI_DAEMON_IDLE="2")
    assert started.returncode == 0
    pid = _ask_until_warm(other.warm_dir)["pid"]
    for _ in range(600):  # a readiness wait: the socket goes when the process idles out
        if not any(p.suffix == ".sock" for p in other.warm_dir.iterdir()):
            break
        time.sleep(0.1)
    assert not any(p.suffix == ".sock" for p in other.warm_dir.iterdir())
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    done = other.verify("zh", "--member", "lingzhi", "--content", "庄子的逍遥游讲的是自由")
    assert done.returncode == 0
    other.stop()


@pytest.mark.parametrize("language", ["zh", "en"])
def test_a_config_that_says_warm_false_starts_none_and_stops_the_one_serving_it(
    world: World, language: str
) -> None:
    """``[cli] warm = false``: with no warm process, the call runs in-process and starts
    none; a warm process (started by another config) that serves such a call answers it as
    in-process and then exits."""
    other = _fresh_world(world, f"declined-{language}")
    other.warm_dir.mkdir(mode=0o700)
    config = world.root / f"cold-{language}.toml"
    config.write_text(
        world.configs[language].read_text(encoding="utf-8") + "[cli]\nwarm = false\n",
        encoding="utf-8",
    )
    args = ["--config", str(config), "verify", "--member", "lingzhi", *MEDICAL]
    try:
        assert other.lingyi(*args).returncode == 1
        time.sleep(1.0)  # a warm process started by mistake would have made its socket by now
        assert not any(p.suffix == ".sock" for p in other.warm_dir.iterdir())
        pid = other.up()["pid"]  # started by the usual config
        warm, fresh = other.lingyi(*args), other.lingyi(*args, warm=False)
        assert (warm.returncode, same(warm.stdout)) == (1, same(fresh.stdout))
        for _ in range(100):  # it exits once the call is answered
            if not other.status()["running"]:
                break
            time.sleep(0.1)
        assert other.status()["running"] == []
        with pytest.raises(ProcessLookupError):
            for _ in range(100):
                os.kill(pid, 0)
                time.sleep(0.1)
    finally:
        other.stop()


@pytest.mark.parametrize("umask", [0o077, 0o022])
def test_files_a_call_creates_get_the_callers_umask(world: World, umask: int) -> None:
    """The log a call creates has the mode the caller's umask gives it, through the warm
    process as in-process (the warm process was started with another umask)."""
    world.up()
    modes = []
    for warm in (True, False):
        log = world.root / f"umask-{umask:o}-{warm}.jsonl"
        done = subprocess.run(
            [sys.executable, "-m", "lingyi", "--config", str(world.configs["en"]), "verify",
             "--member", "lingzhi", "--content", "Zhuangzi"],
            capture_output=True, text=True, cwd=world.root, timeout=120, umask=umask,
            env=world.env(LINGYI_LOG=str(log)) if warm else world.env(LINGYI_DAEMON="0",
                                                                       LINGYI_LOG=str(log)),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        modes.append(log.stat().st_mode & 0o777)
    assert modes[0] == modes[1]
    assert modes[0] & umask == 0


def test_a_warm_process_started_under_a_limit_never_serves_a_call_without_it(
    world: World,
) -> None:
    """A first call under ``ulimit -f`` (its log cannot grow: exit 2) starts a warm process
    that has that limit; a later call without the limit is not served by it (a child cannot
    raise a hard limit back) and writes its record, zh and en."""
    import resource

    other = _fresh_world(world, "limits")
    other.warm_dir.mkdir(mode=0o700)
    log = world.root / "limits.jsonl"
    log.write_bytes(b"")

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    args = ["--config", str(world.configs["zh"]), "verify", "--member", "lingzhi"]
    try:
        limited = subprocess.run(
            [sys.executable, "-m", "lingyi", *args, "--content", "庄子的逍遥游讲的是自由"],
            capture_output=True, text=True, cwd=other.root, timeout=120,
            env=other.env(LINGYI_LOG=str(log)), preexec_fn=small_files,
        )  # fmt: skip
        assert limited.returncode == 2 and "File too large" in limited.stderr
        _ask_until_warm(other.warm_dir)  # the warm process it started, with the limit
        for content in ("庄子的逍遥游讲的是自由", "Zhuangzi wrote about freedom"):
            done = other.lingyi(*args, "--content", content, LINGYI_LOG=str(log))
            assert done.returncode == 0, done.stderr
        assert len([r for r in read_log(log) if r.record]) == 2
    finally:
        other.stop()


# In a fresh interpreter: what the warm process imports and warms, then one verify as a
# child runs it; prints the modules the verify imported on top (one per line).
_PROBE = """
import sys
from lingyi._warm import policies, server
from lingyi.config import load_config
server.preload()
raw = load_config(sys.argv[1]).raw.policies
warm = policies.Warm()
warm.want((str(load_config(sys.argv[1]).validators_dir), raw.require_shared, raw.cache))
warm.load_next()
before = set(sys.modules)
warm.serve()
from lingyi.cli import run
run(["--config", sys.argv[1], "verify", *sys.argv[2:]])
sys.stderr.write("\\n".join(sorted(set(sys.modules) - before)))
"""


@pytest.mark.parametrize(("name", "args", "code"), CALLS[:6], ids=[c[0] for c in CALLS[:6]])
def test_a_warm_child_imports_nothing_the_warm_process_has_not(
    world: World, name: str, args: list[str], code: int
) -> None:
    """What a child imports for a verify, it imports on every call (a fork throws it away):
    the warm process preloads everything the approved, rejected and fallback paths use."""
    language = "en" if name.endswith("en") else "zh"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(world.configs[language]), *args],
        capture_output=True, text=True, env=world.env(LINGYI_DAEMON="0"), cwd=world.root,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "", f"imported per call: {done.stderr}"


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_the_warm_process_keeps_none_of_its_first_callers_secrets(world: World) -> None:
    """The first call's environment holds tokens and keys: the warm process it starts keeps
    none of them (only what finds its socket, caches and interpreter), and a call through it
    still runs with its own caller's environment (its log is where that caller says)."""
    other = _fresh_world(world, "secrets")
    other.warm_dir.mkdir(mode=0o700)
    secrets = {"ANTHROPIC_API_KEY": "sk-ant-test-0123456789", "LINGYI_TOKEN_DESKTOP": "tok-1",
               "GITHUB_TOKEN": "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"}  # fmt: skip
    try:
        pid = other.up(**secrets)["pid"]
        raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        names = {item.split(b"=", 1)[0].decode() for item in raw if item}
        log = world.root / "secrets.jsonl"
        done = other.verify(
            "en", "--member", "lingzhi", "--content", "Zhuangzi", LINGYI_LOG=str(log)
        )
        assert other.calls() == 1
    finally:
        other.stop()
    assert names.isdisjoint(secrets)
    assert {"PATH", "LINGYI_WARM_DIR", "LINGYI_DAEMON_IDLE"} <= names
    assert done.returncode == 0 and log.exists()


def test_the_socket_name_depends_on_the_control_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes in different control groups (a service under ``MemoryMax=`` and a
    shell) get different sockets, so a warm process never runs a call outside the caller's
    limits; the same groups, the same socket. (Moving a process between real cgroups needs
    privileges a CI machine may not give, so the groups file is a stand-in here; the reader
    itself is run on a real file and on a missing one.)"""
    groups = tmp_path / "cgroup"
    groups.write_text("0::/system.slice/lingyi.service\n", encoding="utf-8")
    assert place.control_groups(str(groups)) == "0::/system.slice/lingyi.service\n"
    assert place.control_groups(str(tmp_path / "missing")) == ""
    keys = {}
    for name in ("service", "shell", "service again"):
        text = "0::/user.slice/session-1.scope\n" if name == "shell" else groups.read_text()
        monkeypatch.setattr(place, "control_groups", lambda text=text: text)
        keys[name] = place.key()
    assert keys["service"] != keys["shell"]
    assert keys["service"] == keys["service again"]
