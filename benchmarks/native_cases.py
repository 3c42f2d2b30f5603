"""The measured side of bench_native.py: one case a process, printed as one JSON line.

An encoding case loads the documents, builds the library's tokenizer for one vocabulary (untimed), times the first
call on all of them (lazily built tables, caches filled from empty: what a fresh worker pays) and then --warm more
calls in the same process (the median of these is the warm figure), and reports CPU and wall seconds, peak memory
(VmHWM above the resident size once the text is loaded) and a CRC32 per document of the ids it produced (or of the
piece boundaries, for a split), which the parent compares with the reference's (tiktoken's; GigaToken's for the
vocabularies tiktoken cannot run). A fresh process per run means that no first call profits from a cache filled by
an earlier run: ours, gigatoken and tokenizers cache pieces, tiktoken does not.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np
from benchlib import OPENAI, ROOT, data_file, load_docs, memory, text_mb, tiktoken_encoding, timed

# Vocabularies: the OpenAI rank files, and Llama 3 from llama.cpp's vocab-only GGUF (shared data).
GGUF = {"llama3": "ggml-vocab-llama-bpe.gguf"}
# The vocabularies of issues 21/22 that tiktoken cannot run, compared with GigaToken (ids checked against its):
# qwen35 from the llama-cpp-python sdist's GGUF (make's reference-files fetch; GigaToken on our rank-file export of
# it), deepseek-v3: cl100k's ranks with llama.cpp's deepseek-v3 pre-tokenizer.
GIGA_REFERENCE = ("qwen35", "deepseek-v3")
PRESETS = (*OPENAI, *GGUF, *GIGA_REFERENCE)
GIGATOKEN_PRETOKENIZER = {"qwen35": "qwen35", "deepseek-v3": "deepseek_v3"}
# The reference files (tests/tools/fetch_reference_files.py): llama.cpp's GGUF test vocabularies with expected ids.
REFERENCE_FILES = Path(os.environ.get("BEAM_BPE_REFERENCE_FILES") or ROOT / ".cache" / "reference-files")
LLAMACPP_MODELS = REFERENCE_FILES / "llama-cpp-python-0.3.36" / "vendor" / "llama.cpp" / "models"
# The 11 byte-level GGUF vocabularies of that sdist with a tokenizer.ggml.pre name and expected ids (issue 22).
LLAMACPP_VOCABS = ("gpt-2", "llama-bpe", "qwen2", "mpt", "qwen35", "starcoder", "refact", "command-r", "falcon",
                   "deepseek-coder", "deepseek-llm")  # fmt: skip
LLAMACPP_SEPARATOR = "\n__ggml_vocab_test__\n"
# The Llama 3 regex as Meta's tokenizer.json spells it (llama.cpp's spelling, (?:'[sS]|...), matches the same).
HF_SPELLING = {
    "llama3": (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
        r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    )
}
TIKTOKEN_DEFAULT_THREADS = 8  # tiktoken's encode_ordinary_batch default
CPU = time.process_time


def reference_gguf(name: str) -> Path:
    """llama.cpp's ggml-vocab-<name>.gguf from the reference files; a clear exit naming the fetch where absent."""
    path = LLAMACPP_MODELS / f"ggml-vocab-{name}.gguf"
    if not path.exists():
        raise SystemExit(
            f"reference vocabulary not found: {path} (run `make bench-native`, which fetches it, or "
            "`python tests/tools/fetch_reference_files.py`; BEAM_BPE_REFERENCE_FILES names another cache)"
        )
    return path


def load_ours(preset: str, backend: str = "native"):
    import bpe_core

    if preset == "qwen35":
        return bpe_core.Tokenizer.from_file(str(reference_gguf("qwen35")), backend=backend)
    if preset == "deepseek-v3":
        path = str(data_file("tiktoken", "cl100k_base.tiktoken"))
        return bpe_core.Tokenizer.from_tiktoken(path, pretokenizer="deepseek-v3", backend=backend)
    if preset in GGUF:
        return bpe_core.Tokenizer.from_gguf(str(data_file("llamacpp", GGUF[preset])), backend=backend)
    entry = json.loads(data_file("tiktoken", "encodings.json").read_text())[OPENAI[preset]]
    path = str(data_file("tiktoken", entry["rank_file"]))
    return bpe_core.Tokenizer.from_tiktoken(
        path, pretokenizer=preset, special_tokens=entry["special_tokens"], backend=backend
    )


def load_tiktoken(preset: str):
    """tiktoken on the same vocabulary: the OpenAI encodings as published; Llama 3 (a tiktoken vocabulary: id =
    rank for its 128,000 ordinary tokens) from the GGUF's token bytes and the llama3 regex."""
    if preset not in GGUF:
        return tiktoken_encoding(preset)
    import tiktoken

    ours = load_ours(preset)
    ranks = {ours.token_bytes(i): i for i in range(ours.n_vocab) if not ours.is_special(i)}
    return tiktoken.Encoding(preset, pat_str=ours.pretokenizer.patterns[0], mergeable_ranks=ranks, special_tokens={})


def load_gigatoken(preset: str, work: Path):
    """gigatoken on the same vocabulary: the OpenAI rank files; Llama 3 from our tokenizer.json export with the
    regex spelled as in Meta's tokenizer.json (gigatoken refuses a Split regex it has no fast path for, and its
    from_tiktoken panics on Llama 3's ranks: some tokens are not a merge of two)."""
    import gigatoken

    if preset in GIGA_REFERENCE:
        path = data_file("tiktoken", "cl100k_base.tiktoken") if preset == "deepseek-v3" else rank_export(preset, work)
        return gigatoken.Tokenizer.from_tiktoken(str(path), pretokenizer=GIGATOKEN_PRETOKENIZER[preset])
    if preset in GGUF:
        exported = hf_json(preset, work)
        pattern = json.dumps(load_ours(preset).pretokenizer.patterns[0])[1:-1]
        return gigatoken.Tokenizer.from_json(exported.replace(pattern, json.dumps(HF_SPELLING[preset])[1:-1]))
    entry = json.loads(data_file("tiktoken", "encodings.json").read_text())[OPENAI[preset]]
    path = data_file("tiktoken", entry["rank_file"])
    return gigatoken.Tokenizer.from_tiktoken(str(path), pretokenizer=preset, special_tokens=entry["special_tokens"])


def hf_json(preset: str, work: Path) -> str:
    """Our tokenizer.json export of the vocabulary (written once per benchmark run, in ``work``)."""
    path = work / f"{preset}.tokenizer.json"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        load_ours(preset).to_huggingface(str(tmp))
        tmp.rename(path)
    return path.read_text(encoding="utf-8")


def rank_export(preset: str, work: Path) -> Path:
    """Our to_tiktoken export of the vocabulary (written once per benchmark run, in ``work``)."""
    path = work / f"{preset}.tiktoken"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        load_ours(preset).to_tiktoken(str(tmp))
        tmp.rename(path)
    return path


def load_tokenizers(preset: str, work: Path):
    """Hugging Face tokenizers on our tokenizer.json export (the ids check makes sure it is the same vocabulary)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_str(hf_json(preset, work))


def openai_entry(preset: str) -> dict:
    """pat_str, special_tokens and rank_file of an OpenAI encoding (a clear error for the others)."""
    if preset not in OPENAI:
        raise ValueError(f"no {preset} vocabulary for this library (it loads OpenAI's encodings only)")
    return json.loads(data_file("tiktoken", "encodings.json").read_text())[OPENAI[preset]]


def load_fastokens(preset: str, work: Path):
    """fastokens on the rank file (OpenAI) or on our tokenizer.json export (Llama 3, regex spelled as Meta does)."""
    import fastokens

    if preset in GGUF:
        exported = hf_json(preset, work)
        pattern = json.dumps(load_ours(preset).pretokenizer.patterns[0])[1:-1]
        return fastokens.Tokenizer.from_json_str(exported.replace(pattern, json.dumps(HF_SPELLING[preset])[1:-1]))
    entry = openai_entry(preset)
    path = str(data_file("tiktoken", entry["rank_file"]))
    return fastokens.Tokenizer.from_tiktoken(path, pattern=entry["pat_str"], special_tokens=entry["special_tokens"])


def wordchipper_cache(preset: str, work: Path) -> None:
    """wordchipper loads OpenAI's files by name from its cache ($XDG_CACHE_HOME/io.crates.wordchipper), downloading
    what is absent: the shared rank file is put there first, in the run's own folder (no network)."""
    entry = openai_entry(preset)
    name = OPENAI[preset]
    target = work / "xdg" / "io.crates.wordchipper" / "openai" / name / f"{name}.tiktoken"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(data_file("tiktoken", entry["rank_file"]).read_bytes())
        tmp.rename(target)
    os.environ["XDG_CACHE_HOME"] = str(work / "xdg")


def tiktoken_like(lib: str, preset: str):
    """riptoken or bpe-openai: tiktoken's API. riptoken on the same ranks and regex as our tiktoken peer (Llama 3
    too); bpe-openai ships OpenAI's encodings only."""
    if lib == "bpe-openai":
        import bpe_openai

        openai_entry(preset)  # refuses Llama 3
        return bpe_openai.get_encoding(OPENAI[preset])
    import riptoken

    tt = load_tiktoken(preset)
    return riptoken.Encoding(riptoken.CoreBPE(tt._mergeable_ranks, tt._special_tokens, tt._pat_str), tt)


def peer_encoder(lib: str, mode: str, threads: int, preset: str, work: Path):
    """The encoders added for issues 15 and 21 (fastokens, riptoken, wordchipper, bpe-openai, kitoken, tokie,
    quicktok-v1)."""
    parallel = threads != 1
    if lib == "fastokens" and mode == "flat":  # (uint32 ids, uint64 offsets) as bytes; its threads: rayon
        ft = load_fastokens(preset, work)

        def fastokens_flat(docs):
            ids, offsets = ft.encode_batch_flat(docs)
            return np.frombuffer(ids, np.uint32), np.frombuffer(offsets, np.uint64)

        return fastokens_flat
    if lib in ("riptoken", "bpe-openai") and mode == "batch":
        enc = tiktoken_like(lib, preset)
        if lib == "bpe-openai":
            cores = 1 if threads == 1 else (os.cpu_count() or 1)
            return lambda docs: enc.encode_ordinary_batch(docs, num_threads=cores)
        return lambda docs: enc.encode_ordinary_batch(docs)
    if lib == "wordchipper" and mode == "batch":
        import wordchipper

        wordchipper_cache(preset, work)
        options = wordchipper.TokenizerOptions.default()
        options.set_parallel(parallel)
        wc = wordchipper.Tokenizer.from_pretrained(f"openai:{OPENAI[preset]}", options)
        return lambda docs: wc.encode_batch(docs)
    if lib == "kitoken" and mode == "loop":
        import kitoken

        if preset in GGUF:
            hf_json(preset, work)
            kt = kitoken.Kitoken.from_tokenizers_file(str(work / f"{preset}.tokenizer.json"))
        else:
            kt = kitoken.Kitoken.from_tiktoken_file(str(data_file("tiktoken", openai_entry(preset)["rank_file"])))
        return lambda docs: [kt.encode(d) for d in docs]
    if lib == "quicktok" and mode == "flat":  # quicktok-v1: (uint32 ids, int64 offsets), its bundled encodings
        import quicktok

        names = {"cl100k": "cl100k_base", "o200k": "o200k_base", "llama3": "llama3"}
        if preset not in names:
            raise ValueError(f"quicktok-v1 bundles no {preset} encoding (only {', '.join(names)} of ours)")
        qt = quicktok.get_encoding(names[preset])
        return lambda docs: qt.encode_batch(docs, threads, False)  # threads 0: all cores
    if lib == "tokie" and mode == "flat":  # (uint32 ids, uint64 lengths), its own threads
        import tokie

        hf_json(preset, work)
        tk = tokie.Tokenizer.from_json(str(work / f"{preset}.tokenizer.json"))

        def tokie_flat(docs):
            ids, lengths = tk.encode_batch_flat(docs, add_special_tokens=False)
            return ids, np.concatenate([[0], np.cumsum(lengths)])

        return tokie_flat
    raise ValueError(f"no encoding case {lib}:{mode}")


def encoder(lib: str, mode: str, threads: int, preset: str, work: Path):
    """A function docs -> the library's own output, for ``mode`` "loop" (one call per document), "batch" (one call
    for all, lists of ids) or "flat" (one call for all, one array of ids and the offsets of each document), on
    ``threads`` threads (0: the library's default for all threads)."""
    if lib == "ours":
        tok = load_ours(preset)
        if mode == "loop":
            return lambda docs: [tok.encode_ordinary(d) for d in docs]
        if mode == "flat":
            return lambda docs: tok.encode_ordinary_flat(docs, num_threads=threads or None)
        return lambda docs: tok.encode_ordinary_batch(docs, num_threads=threads or None)
    if lib == "tiktoken":
        tt = load_tiktoken(preset)
        if mode == "loop":
            return lambda docs: [tt.encode_ordinary(d) for d in docs]
        return lambda docs: tt.encode_ordinary_batch(docs, num_threads=threads or TIKTOKEN_DEFAULT_THREADS)
    if lib == "gigatoken":
        gt = load_gigatoken(preset, work)
        if mode == "loop":
            return lambda docs: [gt.encode(d) for d in docs]
        if mode == "lists":  # Python lists of ints, as ours and tiktoken return (encode_batch: one awkward array)
            return lambda docs: gt.encode_batch_list(docs, parallel=threads != 1)
        if mode == "flat":  # its awkward array flattened to what a shard writer takes: one NumPy array + offsets
            import awkward as ak

            def gigatoken_flat(docs):
                out = gt.encode_batch(docs, parallel=threads != 1)
                return ak.to_numpy(ak.flatten(out)), np.concatenate([[0], np.cumsum(ak.to_numpy(ak.num(out)))])

            return gigatoken_flat
        return lambda docs: gt.encode_batch(docs, parallel=threads != 1)
    if lib == "tokenizers" and mode == "batch":  # its threads: TOKENIZERS_PARALLELISM, set by the parent
        hf = load_tokenizers(preset, work)
        return lambda docs: hf.encode_batch(docs, add_special_tokens=False)
    return peer_encoder(lib, mode, threads, preset, work)


def id_arrays(lib: str, out: Any) -> list[np.ndarray]:
    """The ids of each document as a uint32 array, whatever the library returned (lists, numpy, awkward, Encoding,
    or a flat (ids, offsets) pair)."""
    if lib == "tokenizers":
        return [np.asarray(e.ids, dtype=np.uint32) for e in out]
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], np.ndarray):
        ids, offsets = np.asarray(out[0]).astype(np.uint32), np.asarray(out[1], dtype=np.int64)
        return [ids[a:b] for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]
    if type(out).__module__.partition(".")[0] == "awkward":  # gigatoken's encode_batch: flat ids + offsets
        import awkward as ak

        flat = ak.to_numpy(ak.flatten(out)).astype(np.uint32)
        return np.split(flat, np.cumsum(ak.to_numpy(ak.num(out)))[:-1])
    return [np.asarray(ids, dtype=np.uint32) for ids in out]


def crcs(arrays: list[np.ndarray]) -> list[int]:
    return [zlib.crc32(a.tobytes()) for a in arrays]


def minor_faults() -> int:
    """Minor page faults of this process so far (getrusage): a call that writes to fresh memory faults once per 4 KB
    page it touches (issue 37 item 2)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def case_encode(lib: str, mode: str, threads: int, preset: str, docs: list[str], work: Path, warm: int) -> dict:
    """The first call after loading (one-time builds included), then ``warm`` more calls in the same process."""
    load0 = CPU()
    run = encoder(lib, mode, threads, preset, work)  # the library's load (ours: the encoder built there too)
    load = CPU() - load0
    faults0, cpu0, wall0 = minor_faults(), CPU(), time.perf_counter()
    out = run(docs)
    cpu, wall, faults = CPU() - cpu0, time.perf_counter() - wall0, minor_faults() - faults0
    arrays = id_arrays(lib, out)
    result = {"cpu": cpu, "wall": wall, "faults": faults, "load_cpu": load, "tokens": int(sum(a.size for a in arrays)),
              "crc": crcs(arrays), "load": os.getloadavg()[0]}  # fmt: skip
    warm_cpu, warm_wall, warm_faults = [], [], []
    for _ in range(warm):
        out = None  # the previous output freed first, as a caller that writes each batch out would
        faults0, cpu0, wall0 = minor_faults(), CPU(), time.perf_counter()
        out = run(docs)
        warm_cpu.append(CPU() - cpu0)
        warm_wall.append(time.perf_counter() - wall0)
        warm_faults.append(minor_faults() - faults0)
    if warm:
        result.update(warm_cpu=statistics.median(warm_cpu), warm_wall=statistics.median(warm_wall),
                      warm_faults=statistics.median(warm_faults))  # fmt: skip
        if crcs(id_arrays(lib, out)) != result["crc"]:
            result["warm_differs"] = True  # a warm call's ids differ from the first call's
    if mode == "flat" and threads == 1 and lib == "ours" and preset not in GIGA_REFERENCE:
        tok = load_ours(preset)  # decode_flat of the whole batch, best of three
        t_flat, texts = timed(lambda: tok.decode_flat(*out), 3, CPU)
        result["decode_flat_mb_s"] = text_mb(texts) / t_flat
    if mode == "batch" and threads == 1 and lib in ("ours", "tiktoken"):  # decoding: fast, so best of five
        dec = load_ours(preset) if lib == "ours" else load_tiktoken(preset)
        ids = [a.tolist() for a in arrays]
        out = arrays = None
        t_dec, data = timed(lambda: [dec.decode_bytes(i) for i in ids], 5, CPU)
        result["decode_mb_s"] = sum(map(len, data)) / 1e6 / t_dec
    return result


def llamacpp_cases(name: str) -> list[tuple[str, list[int]]]:
    """llama.cpp's test-tokenizer-0 files of a reference vocabulary: inputs cut by the separator line, one line of
    expected ids each."""
    path = reference_gguf(name)
    inputs = path.with_name(path.name + ".inp").read_text(encoding="utf-8").split(LLAMACPP_SEPARATOR)[:-1]
    lines = path.with_name(path.name + ".out").read_text(encoding="utf-8").split("\n")
    return [(text, [int(i) for i in line.split()]) for text, line in zip(inputs, lines, strict=False)]


def case_vocab(name: str, docs: list[str], warm: int) -> dict:
    """One vocabulary on one thread: llama.cpp's expected ids checked on its cases, then the first call and the
    median of ``warm`` more calls of encode_ordinary_flat(num_threads=1) on the documents. ``name`` is one of
    LLAMACPP_VOCABS, or a preset (cl100k: the yardstick of the same run)."""
    if name in LLAMACPP_VOCABS:
        import bpe_core

        tok = bpe_core.Tokenizer.from_file(str(reference_gguf(name)))
        cases = llamacpp_cases(name)
        wrong = [i for i, (text, ids) in enumerate(cases) if tok.encode_ordinary(text) != ids]
        checked = {"cases": len(cases), "wrong_cases": wrong[:5], "n_wrong": len(wrong)}
    else:
        tok, checked = load_ours(name), {}
    run = lambda: tok.encode_ordinary_flat(docs, num_threads=1)  # noqa: E731
    first, out = timed(run, 1, CPU)
    times = [timed(run, 1, CPU)[0] for _ in range(max(1, warm))]
    ids = np.asarray(out[0])
    return {"cpu": first, "warm_cpu": statistics.median(times), "tokens": int(ids.size),
            "crc": [zlib.crc32(np.ascontiguousarray(ids, dtype=np.uint32).tobytes())], "load": os.getloadavg()[0],
            **split_alone(tok, docs), **checked}  # fmt: skip


def split_alone(tok, docs: list[str]) -> dict:
    """The pre-tokenizer alone on the same documents, as the encoder runs it (the core's piece ends, its best tier,
    no Python objects per piece): best of three, CPU seconds. Empty where the pattern has no native kind."""
    from bpe_core import native

    kind = tok.pretokenizer.native_kind
    if kind is None or not native.available() or not hasattr(native._core, "pretok_split_ends"):
        return {}
    data = [d.encode("utf-8", "surrogatepass") for d in docs]
    split = lambda: [native._core.pretok_split_ends(kind, d, "auto", 256) for d in data]  # noqa: E731
    best, _ = timed(split, 3, CPU)
    return {"split_cpu": best, "split_kind": kind}


def fast_split(pretokenizer):
    """Our hand-written pre-tokenizer (``_core.pretok_split``) for a PreTokenizer, or None where there is none (the
    core predates it, or the pattern has no native kind)."""
    from bpe_core import native

    split = getattr(native._core, "pretok_split", None)
    kind = getattr(pretokenizer, "native_kind", None)
    return None if split is None or kind is None else (lambda data: split(kind, data))


def case_split(impl: str, preset: str, docs: list[str]) -> dict:
    """The split alone: our fast path on the UTF-8 bytes vs ``regex`` findall on the str (the reference)."""
    import regex

    pretokenizer = load_ours(preset).pretokenizer
    if impl == "fast":
        split = fast_split(pretokenizer)
        if split is None:
            return {
                "error": f"no fast split for {preset}: the core has no pretok_split or {pretokenizer} no native_kind"
            }
        data = [d.encode("utf-8", "surrogatepass") for d in docs]
    elif len(pretokenizer.patterns) == 1:
        split, data = regex.compile(pretokenizer.patterns[0]).findall, docs
    else:  # a sequence of regexes (deepseek-v3): the Python PreTokenizer applies them in turn
        split, data = pretokenizer.split, docs
    split(data[0])
    cpu0, wall0 = CPU(), time.perf_counter()
    pieces = [split(d) for d in data]
    cpu, wall = CPU() - cpu0, time.perf_counter() - wall0
    sizes = [[len(p if impl == "fast" else p.encode("utf-8", "surrogatepass")) for p in doc] for doc in pieces]
    ends = [np.cumsum(doc, dtype=np.uint64) for doc in sizes]
    crc = [zlib.crc32(e.tobytes()) for e in ends]
    return {"cpu": cpu, "wall": wall, "pieces": int(sum(map(len, pieces))), "crc": crc}


def case_python(preset: str, docs: list[str]) -> dict:
    """The Python reference and the native core on the same twentieth of the text, in the same process."""
    subset = docs[: max(1, len(docs) // 20)]
    ref, nat = load_ours(preset, backend="python"), load_ours(preset)
    nat.encode_ordinary_batch(subset[:5])
    t_nat, _ = timed(lambda: nat.encode_ordinary_batch(subset, num_threads=1), 2, CPU)
    t_ref, _ = timed(lambda: ref.encode_ordinary_batch(subset), 2, CPU)
    mb = text_mb(subset)
    return {"subset_mb_s": mb / t_ref, "native_subset_mb_s": mb / t_nat}


def cpu_timed(fn):
    return timed(fn, 1, CPU)


def case_train(name: str, docs: list[str], vocab: int) -> dict:
    """count_chunks + train (and the merge loop alone) vs the peers' whole training on the same documents, in CPU
    seconds on one thread: count_chunks(num_threads=1), and RAYON_NUM_THREADS=1 (set by the parent) holds rustbpe,
    tokenizers and gigatoken to one."""
    from bpe_core.pretokenize.presets import CL100K_PATTERN

    if name == "ours":
        import bpe_core
        from bpe_core.train import native_loop

        t_count, counts = cpu_timed(lambda: bpe_core.count_chunks(docs, "cl100k", num_threads=1))
        t_loop, _ = cpu_timed(lambda: native_loop.train_merges(counts, vocab - 256, 2, "ids"))
        t_train, _ = cpu_timed(lambda: bpe_core.train(counts, vocab))
        return {"seconds": t_count + t_train, "count": t_count, "train": t_train, "loop": t_loop}
    if name == "rustbpe":
        import rustbpe

        return {
            "seconds": cpu_timed(
                lambda: rustbpe.Tokenizer().train_from_iterator(iter(docs), vocab, pattern=CL100K_PATTERN)
            )[0]
        }
    if name == "tokenizers":
        from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

        def hf():
            tok = Tokenizer(models.BPE())
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [
                    pre_tokenizers.Split(Regex(CL100K_PATTERN), behavior="isolated"),
                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
                ]
            )
            trainer = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, show_progress=False,
                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet())  # fmt: skip
            tok.train_from_iterator(docs, trainer)

        return {"seconds": cpu_timed(hf)[0]}
    if name == "gigatoken":  # gigatoken.train_bpe: its own pre-tokenizer (GPT-2-like)
        import gigatoken

        data = "\n".join(docs).encode("utf-8", "surrogatepass")
        return {"seconds": cpu_timed(lambda: gigatoken.train_bpe(data, vocab, []))[0]}
    raise ValueError(f"no training case {name}")


def case_callgrind(lib: str, preset: str, calls: int, docs: list[str], work: Path) -> dict:
    """Run under valgrind by the parent (bench_native.py --callgrind): load, then ``calls`` one-thread flat encodes
    of all the documents, untimed. The parent subtracts the counts of runs with 0, 1 and 2 calls: the first call
    (one-time builds included) and a warm call. ``lib`` "ours-split": our pre-tokenizer alone (pretok_split)."""
    if lib == "ours-split":
        fast = fast_split(load_ours(preset).pretokenizer)
        if fast is None:
            return {"error": f"no fast split for {preset}"}
        data = [d.encode("utf-8", "surrogatepass") for d in docs]
        run = lambda _: [fast(d) for d in data]  # noqa: E731
    else:
        run = encoder(lib, "flat", 1, preset, work)
    out = None
    for _ in range(calls):
        out = None
        out = run(docs)
    return {"calls": calls, "tokens": int(sum(a.size for a in id_arrays(lib, out))) if out and lib != "ours-split"
            else 0}  # fmt: skip


def count_pieces(preset: str, docs: list[str]) -> int:
    """How many pieces our pre-tokenizer makes of the documents (the denominator of per-piece counts)."""
    pretokenizer = load_ours(preset).pretokenizer
    fast = fast_split(pretokenizer)
    if fast is not None:
        return sum(len(fast(d.encode("utf-8", "surrogatepass"))) for d in docs)
    return sum(len(pretokenizer.split(d)) for d in docs)


# The per-script table (issue 31): the UDHR of each language in multi_udhr, its paragraphs as documents, the set
# repeated to `mb` MB (every call after the first finds its pieces cached: the warm rate is the script's split and
# table cost, which is what differs between scripts).
SCRIPT_LANGS = {"en": "en", "de": "de-1996", "ru": "ru", "ja": "ja", "zh": "zh"}


def script_docs(lang: str, mb: float) -> list[str]:
    import gzip

    with gzip.open(data_file("corpora", "multi_udhr.jsonl.gz"), "rt", encoding="utf-8") as f:
        texts = [r["text"] for r in map(json.loads, f) if r.get("lang") == SCRIPT_LANGS[lang]]
    if not texts:
        raise SystemExit(f"multi_udhr has no {SCRIPT_LANGS[lang]!r} text")
    paragraphs = [p for t in texts for p in t.split("\n\n") if p]
    out, size = [], 0
    while size < mb * 1e6:
        out += paragraphs
        size += sum(len(p.encode("utf-8")) for p in paragraphs)
    return out


def case_script(lib: str, preset: str, lang: str, mb: float, work: Path, warm: int) -> dict:
    return case_encode(lib, "flat", 1, preset, script_docs(lang, mb), work, warm) | {
        "mb": text_mb(script_docs(lang, mb))
    }


def run_case(case: str, mb: float, vocab: int, work: Path, warm: int = 3) -> dict:
    """``kind:...`` -> the case's result, with its peak memory."""
    kind, *rest = case.split(":")
    if kind == "script":
        base = memory("VmRSS")
        result = case_script(rest[0], rest[1], rest[2], mb, work, warm)
        result["peak_mb"] = max(0, memory("VmHWM") - base) / 1e6
        return result
    docs = load_docs(mb)
    base = memory("VmRSS")
    if kind == "encode":
        lib, mode, threads, preset = rest
        result = case_encode(lib, mode, int(threads), preset, docs, work, warm)
    elif kind == "vocab":
        result = case_vocab(rest[0], docs, warm)
    elif kind == "callgrind":
        result = case_callgrind(rest[0], rest[1], int(rest[2]), docs, work)
    elif kind == "pieces":
        result = {"pieces": count_pieces(rest[0], docs), "bytes": int(sum(map(len, (d.encode("utf-8",
                  "surrogatepass") for d in docs))))}  # fmt: skip
    elif kind == "split":
        result = case_split(rest[0], rest[1], docs)
    elif kind == "python":
        result = case_python(rest[0], docs)
    elif kind == "train":
        result = case_train(rest[0], docs, vocab)
    else:
        raise ValueError(f"unknown case {case}")
    result["peak_mb"] = max(0, memory("VmHWM") - base) / 1e6
    return result
