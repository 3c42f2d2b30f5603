"""An input's identity (pipeline/storage/identity.py): size plus the version fsspec reports."""

from __future__ import annotations

import os
import time

import fsspec

from pipeline.storage.identity import changed_inputs, input_identity, version_of


def test_a_local_file_edited_in_place_at_the_same_size_changes_version(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "abc"}\n')
    before = input_identity(str(path))
    assert before["bytes"] == 16 and before["version"].startswith("mtime_ns:")
    assert input_identity(str(path)) == before  # the same file: the same identity
    stat = os.stat(path)
    path.write_text('{"text": "xyz"}\n')
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a later write, whatever the clock tick
    after = input_identity(str(path))
    assert after["bytes"] == before["bytes"] and after["version"] != before["version"]
    assert changed_inputs([dict(before, path="a")], [dict(after, path="a")]) == ["a"]
    assert changed_inputs([dict(before, path="a")], [dict(before, path="a")]) == []
    assert changed_inputs([dict(before, path="a")], [dict(after, path="a", bytes=17)]) == []  # a size change: the plan


def test_object_store_versions_prefer_generation_then_etag():
    fs = fsspec.filesystem("memory")
    assert version_of(fs, "/x", {"size": 1, "generation": "17", "etag": "e"}) == "generation:17"
    assert version_of(fs, "/x", {"size": 1, "ETag": '"abc"', "LastModified": "t"}) == 'etag:"abc"'
    assert version_of(fs, "/x", {"size": 1}) is None


def test_a_memory_file_reports_its_creation_time():
    url = f"memory://identity-{time.time_ns()}/a.txt"
    with fsspec.open(url, "wb") as f:
        f.write(b"abc")
    identity = input_identity(url)
    assert identity["bytes"] == 3 and identity["version"].startswith("created:")
