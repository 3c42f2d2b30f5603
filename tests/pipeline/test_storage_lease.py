"""The output lease (pipeline/storage/lease.py): one job per --out, stale leases taken over, renewal, loss."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time

import pytest

from pipeline.storage.lease import (
    LEASE_DIR,
    LEASE_FILE,
    Lease,
    LeaseHeldError,
    LeaseLostError,
    LeaseRecord,
    is_stale,
    pid_alive,
)


def _lease_file(out) -> str:
    return os.path.join(str(out), LEASE_DIR, LEASE_FILE)


def test_a_second_lease_on_a_live_output_is_refused_naming_the_owner(tmp_path):
    first = Lease(str(tmp_path), command="encode").acquire()
    on_disk = json.loads(open(_lease_file(tmp_path)).read())
    assert on_disk["run_id"] == first.record.run_id
    assert on_disk["pid"] == os.getpid() and on_disk["host"] == socket.gethostname()
    assert set(on_disk) == {"run_id", "host", "pid", "command", "started", "renewed", "pid_started", "group"}
    with pytest.raises(LeaseHeldError) as err:
        Lease(str(tmp_path), command="train").acquire()
    message = str(err.value)
    assert first.record.run_id[:12] in message and f"pid {os.getpid()}" in message
    assert "stop that encode or wait" in message and "--overwrite does not stop" in message
    first.release()
    assert not os.path.exists(_lease_file(tmp_path))
    Lease(str(tmp_path), command="train").acquire().release()  # free again once released


def test_a_lease_whose_process_is_gone_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    assert not pid_alive(pid)
    os.makedirs(os.path.dirname(_lease_file(tmp_path)))
    now = time.time()
    record = {"run_id": "a" * 32, "host": socket.gethostname(), "pid": pid, "command": "encode", "started": now,
              "renewed": now}  # fmt: skip
    open(_lease_file(tmp_path), "w").write(json.dumps(record))
    lease = Lease(str(tmp_path), command="encode").acquire()
    assert json.loads(open(_lease_file(tmp_path)).read())["run_id"] == lease.record.run_id
    assert not os.path.exists(_lease_file(tmp_path) + ".break")
    lease.release()


def test_a_lease_not_renewed_for_the_stale_time_is_taken_over_even_from_another_host(tmp_path):
    os.makedirs(os.path.dirname(_lease_file(tmp_path)))
    old = time.time() - 601
    record = {"run_id": "b" * 32, "host": "another-host", "pid": 1, "command": "train", "started": old,
              "renewed": old}  # fmt: skip
    open(_lease_file(tmp_path), "w").write(json.dumps(record))
    assert "not renewed" in is_stale(LeaseRecord(**record))
    recent = dict(record, renewed=time.time() - 30)
    assert is_stale(LeaseRecord(**recent)) is None  # another host's live pid cannot be checked: the time decides
    Lease(str(tmp_path), command="encode").acquire().release()
    assert not os.path.exists(os.path.dirname(_lease_file(tmp_path)))  # the folder the lease made goes with it
    os.makedirs(os.path.dirname(_lease_file(tmp_path)))
    open(_lease_file(tmp_path), "w").write(json.dumps(recent))
    with pytest.raises(LeaseHeldError, match="another-host"):
        Lease(str(tmp_path), command="encode").acquire()


def test_renewal_moves_the_time_and_a_lost_lease_fails_verification(tmp_path):
    lease = Lease(str(tmp_path), command="encode", renew_seconds=0.05)
    with lease:
        first = json.loads(open(_lease_file(tmp_path)).read())["renewed"]
        deadline = time.time() + 10
        while json.loads(open(_lease_file(tmp_path)).read())["renewed"] == first:
            assert time.time() < deadline, "the lease was not renewed"
            time.sleep(0.02)
        lease.verify()  # still ours
        other = dict(json.loads(open(_lease_file(tmp_path)).read()), run_id="c" * 32, pid=12345678)
        open(_lease_file(tmp_path), "w").write(json.dumps(other))  # another job took the output over
        with pytest.raises(LeaseLostError, match="not marked complete"):
            lease.verify()
    assert json.loads(open(_lease_file(tmp_path)).read())["run_id"] == "c" * 32  # release leaves theirs alone


def test_a_removed_lease_fails_verification(tmp_path):
    with Lease(str(tmp_path), command="encode") as lease:
        os.remove(_lease_file(tmp_path))
        with pytest.raises(LeaseLostError):
            lease.verify()


def _try(out: str, queue, done) -> None:
    try:
        lease = Lease(out, command="encode").acquire()
    except LeaseHeldError:
        queue.put("refused")
        return
    queue.put("held")
    done.wait(60)  # held until every racer has answered: a slow start (a loaded machine) cannot come after release
    lease.release()


def test_of_processes_racing_for_one_output_exactly_one_holds_it(tmp_path):
    ctx = multiprocessing.get_context("fork")
    queue, done = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_try, args=(str(tmp_path), queue, done)) for _ in range(6)]
    for p in procs:
        p.start()
    try:
        results = [queue.get(timeout=60) for _ in procs]
    finally:
        done.set()
    for p in procs:
        p.join(30)
    assert sorted(results) == ["held"] + ["refused"] * 5


def test_racing_takeovers_of_one_stale_lease_leave_one_holder(tmp_path):
    os.makedirs(os.path.dirname(_lease_file(tmp_path)))
    old = time.time() - 3600
    record = {"run_id": "d" * 32, "host": "h", "pid": 1, "command": "encode", "started": old, "renewed": old}
    open(_lease_file(tmp_path), "w").write(json.dumps(record))
    ctx = multiprocessing.get_context("fork")
    queue, done = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_try, args=(str(tmp_path), queue, done)) for _ in range(6)]
    for p in procs:
        p.start()
    try:
        results = [queue.get(timeout=60) for _ in procs]
    finally:
        done.set()
    for p in procs:
        p.join(30)
    # the holder keeps the lease until every racer has answered: two "held" would be two holders at once
    assert results.count("held") == 1, results


def test_the_lease_works_on_an_fsspec_store_with_exclusive_create():
    out = f"memory://lease-{time.time_ns()}/out"
    first = Lease(out, command="encode").acquire()
    assert first.exclusive
    with pytest.raises(LeaseHeldError):
        Lease(out, command="encode").acquire()
    first.verify()
    first.release()
    Lease(out, command="encode").acquire().release()
