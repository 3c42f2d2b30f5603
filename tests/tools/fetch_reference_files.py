#!/usr/bin/env python3
"""Fetch the reference files the tests compare against, from pinned PyPI source distributions, into a cache.

    python tests/tools/fetch_reference_files.py            # fills .cache/reference-files/ (git-ignored)
    python tests/tools/fetch_reference_files.py --check    # exit 1 if anything is missing, no network

The files are real vocabularies nobody on this project wrote, with their expected ids: llama.cpp's GGUF vocabulary
tests (``vendor/llama.cpp/models/ggml-vocab-*.gguf{,.inp,.out}`` in the ``llama-cpp-python`` sdist; the expected
ids come from each model's Hugging Face tokenizer) and OpenAI Whisper's rank files (``whisper/assets/*.tiktoken``
in the ``openai-whisper`` sdist). Each sdist is found by name and version through PyPI's simple index (PEP 691
JSON), checked against the sha256 recorded here, and only the listed members are extracted, each checked against
its own sha256. Idempotent: where every file is present with its sha256 nothing is downloaded. The tests read the
cache (``BEAM_BPE_REFERENCE_FILES`` overrides its place) and skip naming this command where it is empty.
Standard library only, so that it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = ROOT / ".cache" / "reference-files"
INDEX = "https://pypi.org/simple"

# package, version, sha256 of the sdist (as PyPI lists it), {member path inside the sdist: sha256}
SDISTS = {
    ("llama-cpp-python", "0.3.36"): (
        "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
        {
            "vendor/llama.cpp/LICENSE": "94f29bbed6a22c35b992c5c6ebf0e7c92f13b836b90f36f461c9cf2f0f1d010d",
            "vendor/llama.cpp/models/ggml-vocab-command-r.gguf": "a2f8cfea952ef7c391a6d92a1c309d0bd32e36384d9b9230569a7425732f27d9",
            "vendor/llama.cpp/models/ggml-vocab-command-r.gguf.inp": "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0",
            "vendor/llama.cpp/models/ggml-vocab-command-r.gguf.out": "d2a601336e422b60a264858c01b14c5d37575fe1f9adfcafc2f3b3707903903f",
            "vendor/llama.cpp/models/ggml-vocab-deepseek-coder.gguf": "91cb1379f2e33af1c4866b194622b7a0e12e8f0c9dba7ba2f10d55978730bec1",
            "vendor/llama.cpp/models/ggml-vocab-deepseek-coder.gguf.inp": "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0",
            "vendor/llama.cpp/models/ggml-vocab-deepseek-coder.gguf.out": "c2cea4584b0487e67fbd81f491bb44f89238722062126120d2c412edb3dbd853",
            "vendor/llama.cpp/models/ggml-vocab-deepseek-llm.gguf": "867f77537b54565f0d81d508c04edc41aa1d4ffc1a92745f225b4c1b02755f76",
            "vendor/llama.cpp/models/ggml-vocab-deepseek-llm.gguf.inp": "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0",
            "vendor/llama.cpp/models/ggml-vocab-deepseek-llm.gguf.out": "87cfc1a8a9a7ef25d04d28c26a67b6a620af7be938c9bd0feeb4d319b9302832",
            "vendor/llama.cpp/models/ggml-vocab-falcon.gguf": "9f0bf8b0733680398b72e652e90f260f43782f326e75545fc0e49611a5ba35ad",
            "vendor/llama.cpp/models/ggml-vocab-falcon.gguf.inp": "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0",
            "vendor/llama.cpp/models/ggml-vocab-falcon.gguf.out": "f8c80a0483582ef195c2129b69bb2e4e421b0f31ed7b35d84b63511d7ebae7cd",
            "vendor/llama.cpp/models/ggml-vocab-gpt-2.gguf": "cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac",
            "vendor/llama.cpp/models/ggml-vocab-gpt-2.gguf.inp": "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0",
            "vendor/llama.cpp/models/ggml-vocab-gpt-2.gguf.out": "48e8c4cb3ad5c37915b225f872222567c1c4dd4d66951aa53460c8d152ff6d60",
            "vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf": "97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e",
            "vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf.inp": "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0",
            "vendor/llama.cpp/models/ggml-vocab-llama-bpe.gguf.out": "118abf2034a197fc5c9dec5204dfdeee7004c7c70952ae577f66b99e212fab9b",
            "vendor/llama.cpp/models/ggml-vocab-mpt.gguf": "59dc382612866d1fc6c11ea531318d327598f3412d9c8f8600607cdf3030898f",
            "vendor/llama.cpp/models/ggml-vocab-mpt.gguf.inp": "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0",
            "vendor/llama.cpp/models/ggml-vocab-mpt.gguf.out": "9d0982a7e7950b81bc2e325fb61bb7e295d2238934ab889737494de2dc4d906b",
            "vendor/llama.cpp/models/ggml-vocab-phi-3.gguf": "967d7190d11c4842eab697079d98d56c2116e10eb617be355a2733bfc132e326",
            "vendor/llama.cpp/models/ggml-vocab-phi-3.gguf.inp": "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0",
            "vendor/llama.cpp/models/ggml-vocab-phi-3.gguf.out": "ad6905c925c49c022974fe67e030382e8a4f56eb4489a0b9481dcedb1ec73b29",
            "vendor/llama.cpp/models/ggml-vocab-gemma-4.gguf": "58b1ba0b57f3b4d7c468ba4ffd91ad85190346a3d7ad7e71d1cabaae8a14bb65",
            "vendor/llama.cpp/models/ggml-vocab-gemma-4.gguf.inp": "0528aa007b06965f980181d252b5dff7bb170a77af6157bd48bba56885374448",
            "vendor/llama.cpp/models/ggml-vocab-gemma-4.gguf.out": "ba8c596bcd05e97e62566fa994b42eeaeffd6a4e4b4a4abe7b5b689aa6b43bf3",
            "vendor/llama.cpp/models/ggml-vocab-qwen2.gguf": "44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c",
            "vendor/llama.cpp/models/ggml-vocab-qwen2.gguf.inp": "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0",
            "vendor/llama.cpp/models/ggml-vocab-qwen2.gguf.out": "de785bb305cc6fa9d43908ed5da337f853c0b79e971348fcfb9f0915a39c5363",
            "vendor/llama.cpp/models/ggml-vocab-qwen35.gguf": "63ed952ff338996cf0bdf24a7b10015124273f75c6dc9bb427356aa3f67ec62c",
            "vendor/llama.cpp/models/ggml-vocab-qwen35.gguf.inp": "0fc6547e7876cd5b2ef64a9d319c6e39040eb53986660bd4227ed7ddef017a94",
            "vendor/llama.cpp/models/ggml-vocab-qwen35.gguf.out": "5efe225820325303857d0a087a8d59216f0d1e9a9e31133e7a5b44c3c4e1e9ca",
            "vendor/llama.cpp/models/ggml-vocab-refact.gguf": "ac3ceda902fed91ccf74312b305d9b86c37e4f8e35fa9cc6ef3ce34fca7d4678",
            "vendor/llama.cpp/models/ggml-vocab-refact.gguf.inp": "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0",
            "vendor/llama.cpp/models/ggml-vocab-refact.gguf.out": "c7e5c1c5dc1dfd3e0d56576bf699d2aca0b760b80779523ea9d323aad6cd1b88",
            "vendor/llama.cpp/models/ggml-vocab-starcoder.gguf": "fedb892b4e1bd3c1f2fcdae356440b14fb458f4264d586e5c987ed93df4e174d",
            "vendor/llama.cpp/models/ggml-vocab-starcoder.gguf.inp": "be0a11f7071f0c67d3053a2d377d8f35f0dbcb77ff11a60300fb57d36b477cf0",
            "vendor/llama.cpp/models/ggml-vocab-starcoder.gguf.out": "3ef12183c57ad076f9defd8e5eb454f509f5f0865cad35646abb4c4b2d2c5764",
        },
    ),
    ("openai-whisper", "20250625"): (
        "37a91a3921809d9f44748ffc73c0a55c9f366c85a3ef5c2ae0cc09540432eb96",
        {
            "LICENSE": "b5d65a59060e68c4ff940e1eddfa6f94b2d68fdf58ed7f4dd57721c997e35e9d",
            "whisper/assets/gpt2.tiktoken": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
            "whisper/assets/multilingual.tiktoken": "b34b360dbb493e781e479794586d661700670d65564001f23024971d1f2fa126",
        },
    ),
}


def folder(cache: Path, package: str, version: str) -> Path:
    """Where the files of one sdist go: ``CACHE/{package}-{version}/{member path}``."""
    return cache / f"{package}-{version}"


def sha256_file(path: Path) -> str | None:
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def missing_members(cache: Path, package: str, version: str) -> list[str]:
    _, members = SDISTS[(package, version)]
    base = folder(cache, package, version)
    return [m for m, sha in members.items() if sha256_file(base / m) != sha]


def sdist_url(package: str, version: str, index: str) -> str:
    """The sdist's URL from the simple index (JSON form); its sha256 must be the recorded one."""
    request = urllib.request.Request(
        f"{index.rstrip('/')}/{package}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    wanted = SDISTS[(package, version)][0]
    for entry in files:
        if entry.get("hashes", {}).get("sha256") == wanted:
            return entry["url"]
    names = [e["filename"] for e in files if version in e["filename"]]
    raise SystemExit(f"{package}=={version}: no file with sha256 {wanted} on {index} (files of that version: {names})")


def download(url: str, sha256: str) -> bytes:
    with urllib.request.urlopen(url, timeout=600) as response:
        data = response.read()
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise SystemExit(f"{url}: sha256 {got}, expected {sha256}: refusing a changed or damaged download")
    return data


def extract(data: bytes, package: str, version: str, cache: Path) -> None:
    """Write the listed members (the sdist's top folder stripped), each checked, each written atomically."""
    _, members = SDISTS[(package, version)]
    base = folder(cache, package, version)
    found = set()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for info in tar:
            inner = info.name.split("/", 1)[1] if "/" in info.name else ""
            if inner not in members or not info.isfile():
                continue
            content = tar.extractfile(info).read()
            got = hashlib.sha256(content).hexdigest()
            if got != members[inner]:
                raise SystemExit(f"{package}=={version}: {inner} has sha256 {got}, expected {members[inner]}")
            target = base / inner
            target.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as tmp:
                tmp.write(content)
            os.replace(tmp.name, target)
            found.add(inner)
    absent = sorted(set(members) - found)
    if absent:
        raise SystemExit(f"{package}=={version}: the sdist has no {absent}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(os.environ.get("BEAM_BPE_REFERENCE_FILES", DEFAULT_CACHE)),
        help="the cache folder (default: $BEAM_BPE_REFERENCE_FILES or .cache/reference-files)",
    )
    parser.add_argument(
        "--index-url",
        default=os.environ.get("BEAM_BPE_PYPI_SIMPLE", INDEX),
        help="a PEP 691 simple index (default: PyPI)",
    )
    parser.add_argument("--check", action="store_true", help="only check the cache; exit 1 if anything is missing")
    args = parser.parse_args(argv)
    status = 0
    for (package, version), (sha256, members) in SDISTS.items():
        missing = missing_members(args.cache, package, version)
        where = folder(args.cache, package, version)
        if not missing:
            print(f"{package}=={version}: {len(members)} files present in {where}")
            continue
        if args.check:
            print(f"{package}=={version}: {len(missing)} of {len(members)} files missing in {where}")
            status = 1
            continue
        print(f"{package}=={version}: fetching the sdist for {len(missing)} missing files", flush=True)
        extract(download(sdist_url(package, version, args.index_url), sha256), package, version, args.cache)
        print(f"{package}=={version}: {len(members)} files in {where}")
    return status


if __name__ == "__main__":
    sys.exit(main())
