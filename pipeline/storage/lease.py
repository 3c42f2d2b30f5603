"""One job per output: the lease ``_shards/lease.json`` in ``--out``.

A run takes the lease before it writes anything into ``--out``, renews it every 30 s from a thread of the launcher,
and checks before writing ``manifest.json`` and ``COMPLETED`` that it still holds it. A second run into the same
``--out`` is refused while the lease is live, ``--overwrite`` included (the message names the owner). A lease is
stale, and may be taken over, when it was not renewed for 10 minutes, when its renewal lies more than 60 s in the
future, when it cannot be read (wrong JSON, fields or types), or when its process is gone on this host (the pid and
the process's start time: a reused pid, this very run's included, is not the lease's process). A lease is also
refused while a folder above or below ``--out`` holds a live lease of another run; a several-tokenizer job takes
``OUT``'s and each ``OUT/<stem>``'s, the latter nested in the former (``group``).

How the lease is created, by filesystem:

- local: the file is written under a temporary name and hard-linked to ``lease.json`` (``os.link`` fails if the
  name exists): an exclusive create, and no reader ever sees a half-written lease;
- object stores whose fsspec driver opens ``mode="xb"`` with a conditional write (s3fs with ``If-None-Match``,
  gcsfs with ``ifGenerationMatch=0``, ``memory://``): the same promise;
- elsewhere (a driver without ``"xb"``): check, then write, then read back; two runs started within the same
  second can both believe they hold it, and the read-back before ``COMPLETED`` is what catches the loser. This
  limit is named in the message of :class:`Lease` (``exclusive``).

Renewal and takeover replace the file (write, then rename or upload); a takeover of a stale lease is itself
serialised by ``lease.json.break``, created exclusively, so two runs cannot both break one stale lease. Times are
wall-clock seconds (``time.time()``): hosts whose clocks differ by minutes see each other's leases as stale sooner
or later than 10 minutes.

>>> with Lease("out", command="encode") as lease:  # doctest: +SKIP
...     ...  # the run; before COMPLETED:
...     lease.verify()
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import posixpath
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass

import fsspec

from pipeline.errors import OutputError

LEASE_DIR = "_shards"
LEASE_FILE = "lease.json"
RENEW_SECONDS = 30.0
STALE_SECONDS = 600.0
FUTURE_SECONDS = 60.0  # a renewal further ahead than this is stale (clocks of one cluster agree within seconds)
BREAK_STALE_SECONDS = 60.0  # a breaker that died while breaking: its break file is ignored after this


class LeaseHeldError(OutputError):
    """Another run holds the output's lease: the message names it and says to stop it or wait."""


class LeaseLostError(OutputError):
    """This run no longer holds its lease (another run took the output over): it must not mark the output
    complete."""


@dataclass(frozen=True)
class LeaseRecord:
    """What ``lease.json`` holds. ``pid_started`` is the process's start time as the kernel counts it (clock ticks
    after boot, with the boot's id), so a reused pid, or a restarted container whose new process got the old
    one's pid, is told from the process that wrote the lease; ``group`` the run id of the lease this one is
    nested in (the several-tokenizer job's ``OUT`` for its ``OUT/<stem>``), "" for none."""

    run_id: str
    host: str
    pid: int
    command: str
    started: float
    renewed: float
    pid_started: str = ""
    group: str = ""

    @classmethod
    def from_json(cls, data: bytes) -> LeaseRecord:
        """The record in ``data``; ValueError for anything but an object of the right fields and types (a
        number that is not finite included)."""
        value = json.loads(data)
        if not isinstance(value, dict):
            raise ValueError("a lease is a JSON object")
        record = cls(**value)
        text = (record.run_id, record.host, record.command, record.pid_started, record.group)
        times = (record.started, record.renewed)
        if not all(isinstance(v, str) for v in text) or type(record.pid) is not int:
            raise ValueError("a lease field of the wrong type")
        if not all(type(t) in (int, float) and math.isfinite(t) for t in times):
            raise ValueError("a lease time that is not a finite number")
        return record

    def describe(self) -> str:
        age = time.time() - self.renewed
        return (
            f"run {self.run_id[:12]} ({self.command}, pid {self.pid} on {self.host}, started "
            f"{_clock(self.started)}, renewed {age:.0f} s ago)"
        )


def _clock(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def process_start(pid: int) -> str:
    """``boot id:start ticks`` of process ``pid`` on this host (from /proc), "" where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            ticks = f.read().rsplit(b")", 1)[-1].split()[19].decode()
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f"{f.read().strip()}:{ticks}"
    except (OSError, IndexError, UnicodeDecodeError):
        return ""


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return True


def is_stale(record: LeaseRecord, *, now: float | None = None, stale_seconds: float = STALE_SECONDS) -> str | None:
    """Why ``record`` is stale (a sentence), or None while it is live."""
    now = time.time() if now is None else now
    if now - record.renewed > stale_seconds:
        return f"not renewed for {now - record.renewed:.0f} s (stale after {stale_seconds:.0f} s)"
    if record.renewed - now > FUTURE_SECONDS:  # a clock far ahead, or a forged time: it would never go stale
        return f"renewed {record.renewed - now:.0f} s in the future (more than {FUTURE_SECONDS:.0f} s: clock skew)"
    if record.host == socket.gethostname():
        if not pid_alive(record.pid):
            return f"its process {record.pid} is gone"
        if record.pid_started != process_start(record.pid) or (record.pid == os.getpid() and not record.pid_started):
            return f"its process {record.pid} is gone (that pid now belongs to another process)"
    return None


class Lease:
    """The lease of one run on one output folder: ``acquire`` (or ``with``), ``verify``, ``release``.

    ``command`` names the run in messages (``encode``, ``train``). ``renew_seconds`` and ``stale_seconds`` are the
    30 s and 10 minutes above (tests shorten them).
    """

    def __init__(
        self,
        out_dir: str,
        *,
        command: str,
        renew_seconds: float = RENEW_SECONDS,
        stale_seconds: float = STALE_SECONDS,
        group: str = "",
    ) -> None:
        self.out_dir = out_dir
        self.command = command
        self.renew_seconds = renew_seconds
        self.stale_seconds = stale_seconds
        self.fs, root = fsspec.core.url_to_fs(out_dir)
        self.path = posixpath.join(root.rstrip("/"), LEASE_DIR, LEASE_FILE)
        self.local = (self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]) in (
            "file",
            "local",
        )
        now = time.time()
        pid = os.getpid()
        self.record = LeaseRecord(uuid.uuid4().hex, socket.gethostname(), pid, command, now, now, process_start(pid),
                                  group)  # fmt: skip
        self.exclusive = True  # False where the driver has no exclusive create (see the module's notes)
        self.lost: str | None = None  # set by the renewal thread when the lease was found in other hands
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._held = False

    # ---------------------------------------------------------------- taking and giving back
    def acquire(self) -> Lease:
        """Take the lease, or raise LeaseHeldError naming the live owner; a stale lease is taken over."""
        self._refuse_relatives()
        self.fs.makedirs(posixpath.dirname(self.path), exist_ok=True)
        for _ in range(3):  # a lease released or broken between our read and our create: try again
            if self._create(self.record):
                self._held = True
                return self
            current = self.read()
            if current is None:
                continue
            reason = is_stale(current, stale_seconds=self.stale_seconds)
            if reason is None:
                raise LeaseHeldError(self._held_message(current))
            if self._break(current):
                self._held = True
                return self
        current = self.read()
        raise LeaseHeldError(self._held_message(current) if current else f"{self.path}: the lease keeps changing")

    def _refuse_relatives(self) -> None:
        """Refuse while a folder above or below ``out_dir`` (two levels) holds a live lease of another run: a run
        into ``OUT/<stem>`` while a several-tokenizer job writes ``OUT``, or the reverse."""
        root = posixpath.dirname(posixpath.dirname(self.path))
        above, parent = [], posixpath.dirname(root)
        while parent and parent != root and len(above) < 64:
            above.append(posixpath.join(parent, LEASE_DIR, LEASE_FILE))
            root, parent = parent, posixpath.dirname(parent)
        base = posixpath.dirname(posixpath.dirname(self.path))
        below = [p for depth in ("*", "*/*") for p in self._glob(posixpath.join(base, depth, LEASE_DIR, LEASE_FILE))]
        for path in above + below:
            other = self.read(path)
            if (
                other is None
                or other.run_id in (self.record.group, self.record.run_id)
                or (other.group and other.group in (self.record.run_id, self.record.group))
            ):
                continue
            if is_stale(other, stale_seconds=self.stale_seconds) is None:
                folder = posixpath.dirname(posixpath.dirname(path))
                where = "above" if path in above else "inside"
                raise LeaseHeldError(
                    f"{folder}, a folder {where} {self.out_dir}, is being written by another job: {other.describe()}; "
                    f"its lease is {path}. Two jobs must not write one output or one inside the other: stop that "
                    f"{other.command} or wait until it ends, or choose another --out"
                )

    def _glob(self, pattern: str) -> list[str]:
        try:
            return sorted(self.fs.glob(pattern))
        except (OSError, ValueError):
            return []

    def _held_message(self, owner: LeaseRecord) -> str:
        return (
            f"{self.out_dir} is being written by another job: {owner.describe()}; its lease is {self.path}. "
            f"Two jobs must not write one output (--overwrite does not stop a running job): stop that {owner.command} "
            f"or wait until it ends, or choose another --out. A lease not renewed for {self.stale_seconds / 60:.0f} "
            "minutes, or whose process is gone on its host, is taken over"
        )

    def release(self) -> None:
        """Stop renewing and remove the lease if it is still ours."""
        self.stop_renewing()
        if not self._held:
            return
        self._held = False
        current = self.read()
        if current is not None and current.run_id == self.record.run_id:
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm(self.path)
        with contextlib.suppress(OSError):  # the folder the lease made, if nothing else is in it
            if not self.fs.ls(posixpath.dirname(self.path)):
                self.fs.rmdir(posixpath.dirname(self.path))

    def __enter__(self) -> Lease:
        self.acquire()
        self.start_renewing()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    # ---------------------------------------------------------------- checking
    def read(self, path: str | None = None) -> LeaseRecord | None:
        """The lease on disk, or None if there is none (an unreadable lease reads as stale: renewed at 0)."""
        try:
            with self.fs.open(path or self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        try:
            return LeaseRecord.from_json(data)
        except (ValueError, TypeError):  # wrong JSON, wrong fields or types, a time of NaN or 1e400
            return LeaseRecord("unreadable", "", 0, "unknown job", 0.0, 0.0)

    def verify(self) -> None:
        """Raise LeaseLostError unless the lease on disk is still this run's (call before ``COMPLETED``)."""
        current = self.read()
        if self.lost is None and current is not None and current.run_id == self.record.run_id:
            return
        other = current.describe() if current is not None and current.run_id != self.record.run_id else "nobody"
        raise LeaseLostError(
            f"this run lost its lease on {self.out_dir} ({self.lost or 'the lease now belongs to ' + other}): "
            "another job may have written into it, so it is not marked complete. Make sure one job writes to it, "
            "then rerun"
        )

    # ---------------------------------------------------------------- renewal
    def renew(self) -> None:
        """Write a new renewal time if the lease is still ours; otherwise record that it was lost."""
        current = self.read()
        if current is None or current.run_id != self.record.run_id:
            self.lost = "it was taken over or removed while the run went on"
            return
        self.record = LeaseRecord(**dict(asdict(self.record), renewed=time.time()))
        self._replace(self.record)

    def start_renewing(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew_loop, name="beam-bpe-lease", daemon=True)
        self._thread.start()

    def stop_renewing(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.renew_seconds):
            try:
                self.renew()
            except OSError:  # a transient storage error: the next renewal tries again
                continue

    # ---------------------------------------------------------------- writing the file
    def _payload(self, record: LeaseRecord) -> bytes:
        return (json.dumps(asdict(record), indent=1, sort_keys=True) + "\n").encode()

    def _create(self, record: LeaseRecord, path: str | None = None) -> bool:
        """Create the lease file (or ``path``) only if there is none; False if one exists."""
        path = path or self.path
        if self.local:
            tmp = f"{path}.tmp-{uuid.uuid4().hex}"
            with open(tmp, "wb") as f:
                f.write(self._payload(record))
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
            return True
        try:
            with self.fs.open(path, "xb") as f:
                f.write(self._payload(record))
            return True
        except FileExistsError:
            return False
        except (ValueError, NotImplementedError, TypeError):
            self.exclusive = False  # no conditional write: check, then write (see the module's notes)
            if self.fs.exists(path):
                return False
            self._replace(record, path)
            current = self.read(path)
            return current is not None and current.run_id == record.run_id

    def _replace(self, record: LeaseRecord, path: str | None = None) -> None:
        path = path or self.path
        if self.local:
            tmp = f"{path}.tmp-{uuid.uuid4().hex}"
            with open(tmp, "wb") as f:
                f.write(self._payload(record))
            os.replace(tmp, path)
        else:
            with self.fs.open(path, "wb") as f:
                f.write(self._payload(record))

    def _break(self, stale: LeaseRecord) -> bool:
        """Take over ``stale``: under ``lease.json.break`` (created exclusively), re-read, and replace it only if it
        is still the same stale lease. False if another run is breaking it or took it first."""
        breaker = LeaseRecord(**dict(asdict(self.record), renewed=time.time()))
        guard = self.path + ".break"
        if not self._create(breaker, guard):
            old = self.read(guard)
            if old is None or time.time() - old.renewed <= BREAK_STALE_SECONDS:
                return False
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm(guard)  # a breaker that died mid-break
            if not self._create(breaker, guard):
                return False
        try:
            current = self.read()
            if current is not None and (
                current.run_id != stale.run_id or is_stale(current, stale_seconds=self.stale_seconds) is None
            ):
                return False
            self.record = LeaseRecord(**dict(asdict(self.record), renewed=time.time()))
            self._replace(self.record)
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                self.fs.rm(guard)
