"""Boot a real systemd inside a throw-away systemd-nspawn container.

The container's root is an overlay whose lower layer is the host's ``/`` and whose upper layer
lives on a private tmpfs, so everything installed on the host (systemd, polkit, the venv in
/opt/opsbot/venv, ...) is available inside, while nothing the tests change reaches the host.
The repository checkout this module belongs to is bound read-only at ``/usr/src/opsbot``.

Commands are run inside with ``nsenter -t <container pid 1> -a``; every command line the
bench runs (on the host or inside) is logged through :mod:`logging` with :func:`shlex.join`.

Usage::

    ok, why = can_boot()
    with BootedSystemd() as ct:
        ct.systemctl("start", "foo.service")
        print(ct.journal("-u", "foo.service"))
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

__all__ = [
    "REPO_MOUNT",
    "REPO_ROOT",
    "BootError",
    "BootedSystemd",
    "CommandFailed",
    "CommandTimeout",
    "ContainerError",
    "can_boot",
    "reap_stale",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Root of the checkout this file belongs to (testbed/container.py -> repo root).
REPO_ROOT = Path(__file__).resolve().parents[1]
#: Where the checkout is visible, read-only, inside the container.
REPO_MOUNT = "/usr/src/opsbot"

TMP_PARENT = Path("/tmp")
TMP_PREFIX = "opsbot-bench-"
CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BOOT_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
_TAIL_CHARS = 3000
_NSPAWN_PROPAGATE = Path("/run/systemd/nspawn/propagate")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

Bind = tuple[str | os.PathLike[str], str]


class ContainerError(RuntimeError):
    """Something went wrong with the bench container."""


class BootError(ContainerError):
    """The container did not boot (in time)."""


class CommandFailed(ContainerError):
    """A command run by the bench exited non-zero while ``check=True``."""

    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(
            f"command failed with exit code {returncode}: {shlex.join(self.argv)}\n"
            f"--- stdout (tail) ---\n{_tail(stdout)}\n--- stderr (tail) ---\n{_tail(stderr)}"
        )


class CommandTimeout(ContainerError):
    """A command run by the bench did not finish within its timeout (it was killed)."""

    def __init__(self, argv: Sequence[str], timeout: float, stdout: str, stderr: str) -> None:
        self.argv = list(argv)
        self.timeout = timeout
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(
            f"command timed out after {timeout:g}s: {shlex.join(self.argv)}\n"
            f"--- stdout (tail) ---\n{_tail(stdout)}\n--- stderr (tail) ---\n{_tail(stderr)}"
        )


def _tail(text: str, limit: int = _TAIL_CHARS) -> str:
    text = text.rstrip("\n")
    return text if len(text) <= limit else "[...]" + text[-limit:]


def _as_text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def _exec(
    argv: Sequence[str],
    *,
    input: str | None = None,
    timeout: float = 60.0,
    check: bool = True,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (no shell) in its own process group; kill the whole group on timeout."""
    argv = list(argv)
    log.info("run: %s", shlex.join(argv))
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            raise CommandTimeout(
                argv, timeout, _as_text(exc.stdout) + stdout, _as_text(exc.stderr) + stderr
            ) from None
    result = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    if check and result.returncode != 0:
        raise CommandFailed(argv, result.returncode, stdout, stderr)
    return result


def _mount_overlay(base: Path) -> Path:
    """Mount a tmpfs on ``base`` and an overlay (lower: host ``/``) on ``base/root``."""
    _exec(["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(base)])
    for sub in ("upper", "work", "root"):
        (base / sub).mkdir()
    root = base / "root"
    opts = f"lowerdir=/,upperdir={base / 'upper'},workdir={base / 'work'}"
    _exec(["mount", "-t", "overlay", "overlay", "-o", opts, str(root)])
    return root


def _unmount(path: Path) -> None:
    """Unmount ``path`` if it is a mount point, falling back to a lazy unmount."""
    if not os.path.ismount(path):
        return
    result = _exec(["umount", str(path)], check=False, timeout=30)
    if result.returncode != 0 and os.path.ismount(path):
        log.warning("umount %s failed (%s); detaching lazily", path, result.stderr.strip())
        _exec(["umount", "-l", str(path)], timeout=30)


#: inotify instances root may hold, at least, while containers run. Every booted
#: systemd takes one per path a path unit watches (opsbot's alone watch eight), and more
#: for journald, logind, polkit and D-Bus; all the containers' root is the host's root, and
#: the kernel's default of 128 a uid is spent with five or six booted at once: the next
#: path unit to start fails ("Job failed"), whichever test it belongs to.
INOTIFY_INSTANCES = 1024
INOTIFY_LIMIT = Path("/proc/sys/fs/inotify/max_user_instances")


@functools.cache
def enough_inotify() -> None:
    """Raise root's inotify instance limit to INOTIFY_INSTANCES if it is lower (once a
    run; a host setting, as ``sysctl fs.inotify.max_user_instances`` would)."""
    try:
        current = int(INOTIFY_LIMIT.read_text())
        if current < INOTIFY_INSTANCES:
            INOTIFY_LIMIT.write_text(f"{INOTIFY_INSTANCES}\n")
            log.warning(
                "fs.inotify.max_user_instances raised from %d to %d for the containers",
                current,
                INOTIFY_INSTANCES,
            )
    except (OSError, ValueError) as exc:
        log.warning("cannot raise fs.inotify.max_user_instances: %s", exc)


@functools.cache
def can_boot() -> tuple[bool, str]:
    """Tell whether this machine can run :class:`BootedSystemd`, and if not, why not."""
    if os.geteuid() != 0:
        return False, "the systemd container bench needs root"
    for tool in ("systemd-nspawn", "nsenter", "mount", "umount"):
        if shutil.which(tool) is None:
            return False, f"{tool} is not installed (apt-get install systemd-container util-linux)"
    if not any(Path(p).is_file() for p in ("/usr/lib/systemd/systemd", "/lib/systemd/systemd")):
        return False, "systemd is not installed on the host (the container boots the host's /)"
    filesystems = Path("/proc/filesystems").read_text()
    if "overlay" not in filesystems.split():
        with contextlib.suppress(OSError):  # it may be a module that is not loaded yet
            _exec(["modprobe", "overlay"], check=False, timeout=30)
    base = Path(tempfile.mkdtemp(prefix=TMP_PREFIX + "probe-", dir=TMP_PARENT))
    try:
        _mount_overlay(base)
    except ContainerError as exc:
        return False, f"cannot mount tmpfs + overlayfs over / here: {exc}"
    finally:
        for mnt in (base / "root", base):
            with contextlib.suppress(ContainerError):
                _unmount(mnt)
        if not os.path.ismount(base):
            shutil.rmtree(base, ignore_errors=True)
    return True, "ok"


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                kids.extend(int(k) for k in (task / "children").read_text().split())
    return kids


def _is_container_init(pid: int) -> bool:
    """True if ``pid`` is a ``systemd`` process that is PID 1 of a nested pid namespace."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            nspids = line.split()[1:]
            return comm == "systemd" and len(nspids) > 1 and nspids[-1] == "1"
    return False


def _find_container_init(nspawn_pid: int) -> int | None:
    todo = [nspawn_pid]
    while todo:
        pid = todo.pop()
        for kid in _children(pid):
            if _is_container_init(kid):
                return kid
            todo.append(kid)
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_ACTIVE: set[BootedSystemd] = set()


class BootedSystemd:
    """A systemd booted in a systemd-nspawn container, for integration tests.

    Use as a context manager (or call :meth:`start` and :meth:`close`).  ``bind`` and
    ``bind_ro`` take extra ``(host_path, container_path)`` pairs, passed to nspawn as
    ``--bind=``/``--bind-ro=``; the repository root is bound read-only at
    :data:`REPO_MOUNT` (not with ``mount_repo=False``: a test of what a package alone
    installs).  ``network_namespace`` (a path such as ``/run/netns/NAME``) puts the
    container in a network namespace the test made, instead of a private one with only
    loopback; ``hostname`` is written to its /etc/hostname before it boots.
    """

    def __init__(
        self,
        *,
        bind: Sequence[Bind] = (),
        bind_ro: Sequence[Bind] = (),
        boot_timeout: float = BOOT_TIMEOUT,
        machine: str | None = None,
        network_namespace: str | os.PathLike[str] | None = None,
        hostname: str | None = None,
        mount_repo: bool = True,
    ) -> None:
        self.machine = machine or f"opsbot-bench-{uuid.uuid4().hex[:8]}"
        #: A network namespace the test made (``/run/netns/NAME``) instead of a private one.
        self.network_namespace = network_namespace
        #: Written to the container's /etc/hostname before it boots.
        self.hostname = hostname
        self.boot_timeout = boot_timeout
        self._binds = [("--bind-ro", str(REPO_ROOT), REPO_MOUNT)] if mount_repo else []
        self._binds += [("--bind", str(h), c) for h, c in bind]
        self._binds += [("--bind-ro", str(h), c) for h, c in bind_ro]
        self._tmp: Path | None = None
        self._root: Path | None = None
        self._pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._closed = False
        #: Seconds from starting nspawn until the system was running/degraded.
        self.boot_seconds: float | None = None
        #: "running" or "degraded", as reported at the end of the boot.
        self.boot_state: str | None = None

    # -- life cycle ----------------------------------------------------------------------

    def __enter__(self) -> BootedSystemd:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def pid(self) -> int:
        """Host PID of the container's PID 1 (systemd)."""
        if self._pid is None:
            raise ContainerError("the container is not running")
        return self._pid

    @property
    def root(self) -> Path:
        """Host path of the container's root file system (the merged overlay)."""
        if self._root is None:
            raise ContainerError("the container is not running")
        return self._root

    @property
    def console_log(self) -> Path:
        """Host path of the file that receives the container's console output."""
        if self._tmp is None:
            raise ContainerError("the container was not started")
        return self._tmp / "console.log"

    def console_tail(self, limit: int = _TAIL_CHARS) -> str:
        """The last ``limit`` characters of the console log ('' if there is none)."""
        try:
            raw = self.console_log.read_bytes().decode(errors="replace")
        except (OSError, ContainerError):
            return ""
        return _tail(_ANSI.sub("", re.sub(r"\r+\n?", "\n", raw)), limit)

    def start(self) -> None:
        """Mount the overlay, boot the container and wait until systemd is up."""
        if self._closed or self._tmp is not None:
            raise ContainerError("a BootedSystemd can be started only once")
        reap_stale()
        enough_inotify()
        self._tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=TMP_PARENT))
        _ACTIVE.add(self)
        (self._tmp / "owner.pid").write_text(f"{os.getpid()}\n")
        (self._tmp / "machine").write_text(f"{self.machine}\n")
        try:
            fs = self._tmp / "fs"
            fs.mkdir()
            self._root = _mount_overlay(fs)
            if self.hostname is not None:
                (self._root / "etc" / "hostname").write_text(f"{self.hostname}\n")
            self._boot()
        except BaseException:
            self.close()
            raise

    def _boot(self) -> None:
        argv = [
            "systemd-nspawn",
            "--register=no",
            "--keep-unit",
            (
                f"--network-namespace-path={self.network_namespace}"
                if self.network_namespace is not None
                else "--private-network"
            ),
            # Without this, `date -s` inside would set the host's clock: the container
            # shares the host's kernel clock. Time logic is tested with injected clocks.
            "--drop-capability=CAP_SYS_TIME",
            "--console=read-only",
            f"--machine={self.machine}",
            f"--directory={self.root}",
            *(f"{opt}={host}:{dest}" for opt, host, dest in self._binds),
            "--boot",
        ]
        log.info("run: %s", shlex.join(argv))
        started = time.monotonic()
        cgroups = _make_cgroups(self.machine)
        with open(self.console_log, "wb") as console:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # nspawn puts its payload in <its cgroup>/payload: without a cgroup of its
                # own, every container on this (non-systemd) host would share /payload, and
                # `systemctl kill` in one would signal processes of another.
                preexec_fn=lambda: _join_cgroups(cgroups),
            )
        (self._tmp_dir / "nspawn.pid").write_text(f"{self._proc.pid}\n")
        deadline = started + self.boot_timeout

        while self._pid is None:
            self._check_nspawn_alive()
            self._pid = _find_container_init(self._proc.pid)
            if self._pid is None:
                if time.monotonic() > deadline:
                    raise self._boot_error("systemd did not start in the container")
                time.sleep(0.05)

        while True:
            self._check_nspawn_alive()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._boot_error("the container did not finish booting")
            try:
                result = self.run(
                    ["systemctl", "is-system-running", "--wait"],
                    check=False,
                    timeout=remaining,
                )
            except CommandTimeout:
                raise self._boot_error("the container did not finish booting") from None
            state = result.stdout.strip()
            if state in ("running", "degraded"):
                break
            if state in ("maintenance", "stopping"):
                raise self._boot_error(f"the container's system state is {state!r}")
            time.sleep(0.2)  # PID 1 is not listening yet ("offline"), try again
        self.boot_seconds = time.monotonic() - started
        self.boot_state = state
        log.info("container %s booted (%s) in %.1fs", self.machine, state, self.boot_seconds)

    @property
    def _tmp_dir(self) -> Path:
        assert self._tmp is not None
        return self._tmp

    def _check_nspawn_alive(self) -> None:
        assert self._proc is not None
        code = self._proc.poll()
        if code is not None:
            raise self._boot_error(f"systemd-nspawn exited with code {code}")

    def _boot_error(self, what: str) -> BootError:
        return BootError(
            f"{what} within {self.boot_timeout:g}s (machine {self.machine}, root {self._root})\n"
            f"--- console log (tail) ---\n{self.console_tail()}"
        )

    def close(self) -> None:
        """Power the container off and remove every trace of it; safe to call repeatedly."""
        if self._closed:
            return
        self._closed = True
        try:
            self._stop()
        finally:
            try:
                if self._tmp is not None:
                    _cleanup_dir(self._tmp, self.machine)
            finally:
                _ACTIVE.discard(self)
                self._pid = None
                self._root = None

    def _stop(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None and self._pid is not None:
            try:
                self.run(["systemctl", "poweroff"], check=False, timeout=STOP_TIMEOUT)
            except ContainerError as exc:
                log.warning("systemctl poweroff in %s failed: %s", self.machine, exc)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            log.warning("container %s still running; sending SIGTERM", self.machine)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                log.warning("container %s still running; sending SIGKILL", self.machine)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        # If nspawn had to be killed, its payload (PID 1 of its own namespace) may survive it;
        # killing a namespace's PID 1 kills everything in that namespace.
        if self._pid is not None and _is_container_init(self._pid):
            log.warning("killing leftover container init %d", self._pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
        log.info("container %s stopped (nspawn exit code %s)", self.machine, proc.returncode)

    # -- running things inside ---------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        user: str | None = None,
        input: str | None = None,
        timeout: float = 60,
        check: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside the container (as root, or as ``user`` via runuser).

        The command gets a clean environment (PATH, LANG) plus ``env``.  With ``check``, a
        non-zero exit raises :class:`CommandFailed`; a timeout always raises
        :class:`CommandTimeout`.
        """
        if isinstance(argv, str | bytes):
            raise TypeError("argv must be a sequence of strings, not a string")
        full = ["nsenter", "-t", str(self.pid), "-a"]
        if user is not None:
            full += ["runuser", "-u", user, "--"]
        full += list(argv)
        environ = {"PATH": CONTAINER_PATH, "LANG": "C.UTF-8", "SYSTEMD_COLORS": "0"}
        environ.update(env or {})
        return _exec(full, input=input, timeout=timeout, check=check, env=environ)

    def systemctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``systemctl ARGS...`` inside the container as root."""
        return self.run(["systemctl", *args], check=check)

    def journal(self, *args: str) -> str:
        """Output of ``journalctl --no-pager ARGS...`` inside the container."""
        return self.run(["journalctl", "--no-pager", *args]).stdout

    def wait_for(
        self,
        predicate: Callable[[], T],
        timeout: float = 30.0,
        interval: float = 0.25,
        what: str | None = None,
    ) -> T:
        """Call ``predicate`` until it returns something truthy, and return that.

        Raises :class:`TimeoutError` if that does not happen within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            result = predicate()
            if result:
                return result
            if time.monotonic() >= deadline:
                name = what or getattr(predicate, "__name__", repr(predicate))
                raise TimeoutError(f"condition {name} not met within {timeout:g}s")
            time.sleep(interval)

    def write_file(self, path: str, text: str, mode: int = 0o644) -> None:
        """Write ``text`` to the absolute container path ``path`` (parents are created).

        Goes through the overlay's merged directory on the host, which the container sees
        directly.  Paths on one of the container's own mounts (``/run``, ``/tmp``, binds, ...)
        or below a symlink (which must resolve inside the container, not on the host) are
        written from inside instead, with ``tee``.
        """
        if not path.startswith("/"):
            raise ValueError(f"container path must be absolute: {path!r}")
        path = os.path.normpath(path)
        host_path = self.root / path.lstrip("/")
        if self._mount_point_of(path) == "/" and not self._crosses_symlink(host_path):
            log.info("write (host side): %s (mode %o)", host_path, mode)
            host_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(host_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
            with open(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(host_path, mode)
            return
        self.run(["mkdir", "-p", os.path.dirname(path)])
        self.run(["tee", path], input=text)
        self.run(["chmod", f"{mode:o}", path])

    def _mount_point_of(self, path: str) -> str:
        """The container mount point that ``path`` lies on (as seen from inside)."""
        best = "/"
        for line in Path(f"/proc/{self.pid}/mountinfo").read_text().splitlines():
            # Mount points are octal-escaped (\040 for space, ...).
            mnt = line.split()[4].encode().decode("unicode_escape")
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                best = mnt
        return best

    def _crosses_symlink(self, host_path: Path) -> bool:
        probe = host_path
        while probe != self.root:
            if probe.is_symlink():
                return True
            probe = probe.parent
        return False


_CGROUP_ROOTS = (Path("/sys/fs/cgroup/systemd"), Path("/sys/fs/cgroup/unified"))


def _make_cgroups(machine: str) -> list[Path]:
    """A cgroup named after the container in each hierarchy nspawn and systemd use."""
    made = []
    for root in _CGROUP_ROOTS:
        if (root / "cgroup.procs").exists():
            path = root / machine
            path.mkdir(exist_ok=True)
            made.append(path)
    return made


def _join_cgroups(cgroups: list[Path]) -> None:
    """In the child, before exec: move into the container's own cgroups."""
    for path in cgroups:
        with open(path / "cgroup.procs", "w") as procs:
            procs.write("0")


def _remove_cgroups(machine: str) -> None:
    """Remove the container's cgroup trees, deepest first (they are empty once it is off)."""
    for root in _CGROUP_ROOTS:
        top = root / machine
        if not top.is_dir():
            continue
        for dirpath, _, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
            with contextlib.suppress(OSError):
                os.rmdir(dirpath)


def _cleanup_dir(tmp: Path, machine: str | None) -> None:
    """Unmount the overlay and tmpfs below ``tmp`` and remove it."""
    fs = tmp / "fs"
    for mnt in (fs / "root", fs):
        _unmount(mnt)
    if os.path.ismount(fs):
        raise ContainerError(f"{fs} is still mounted; not removing {tmp}")
    shutil.rmtree(tmp, ignore_errors=True)
    if machine:  # nspawn leaves this behind when /run is not a tmpfs
        with contextlib.suppress(OSError):
            (_NSPAWN_PROPAGATE / machine).rmdir()
        _remove_cgroups(machine)
    log.info("removed %s", tmp)


def reap_stale() -> None:
    """Clean up bench containers left behind by test runs that were killed."""
    for tmp in sorted(TMP_PARENT.glob(TMP_PREFIX + "*")):
        try:
            owner = int((tmp / "owner.pid").read_text())
        except (OSError, ValueError):
            continue  # not a bench directory, or still being set up
        if _pid_alive(owner):
            continue
        log.warning("reaping stale bench directory %s (owner %d is gone)", tmp, owner)
        machine = None
        with contextlib.suppress(OSError, ValueError):
            machine = (tmp / "machine").read_text().strip() or None
            nspawn = int((tmp / "nspawn.pid").read_text())
            cmdline = Path(f"/proc/{nspawn}/cmdline").read_bytes()
            if f"--directory={tmp}/".encode() in cmdline:  # still that bench's nspawn
                init = _find_container_init(nspawn)
                for pid in (nspawn, init):
                    if pid is not None:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                time.sleep(0.5)
        try:
            _cleanup_dir(tmp, machine)
        except ContainerError as exc:
            log.warning("could not reap %s: %s", tmp, exc)


@atexit.register
def _close_all() -> None:
    for ct in list(_ACTIVE):
        try:
            ct.close()
        except Exception:  # best effort at interpreter exit
            log.exception("cleaning up container %s failed", ct.machine)
