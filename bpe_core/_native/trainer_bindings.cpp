// Python bindings of the merge loop (bpe_core._native._core.train, train_sizes, estimate_train_memory): chunk
// counts read from a dict with the GIL held, the loop of trainer.cpp run without it.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <string>
#include <vector>

#include "bindings.h"
#include "trainer.h"

namespace nb = nanobind;
using namespace bpe;

nb::tuple run_merge_loop(Words w, const std::vector<std::string>& alphabet, uint64_t budget, int64_t min_count,
                         int tie_break, const std::vector<uint32_t>& hf_rank, nb::object progress);

namespace {

[[noreturn]] void raise_bad_chunk(PyObject* key, PyObject* value, bool key_is_bad) {
    nb::handle k(key), v(value);
    std::string msg;
    if (key_is_bad) {
        msg = "chunk_counts keys must be bytes, got " + std::string(Py_TYPE(key)->tp_name) + " " +
              nb::repr(k).c_str();
        throw nb::type_error(msg.c_str());
    }
    msg = std::string("chunk count must be a non-negative integer, got ") + nb::repr(v).c_str() + " for " +
          nb::repr(k).c_str();
    throw nb::value_error(msg.c_str());
}

// Counts beyond 64 bits: train() catches the OverflowError and runs the reference, whose ints have no limit.
[[noreturn]] void raise_overflow(const char* what) {
    PyErr_SetString(PyExc_OverflowError, what);
    throw nb::python_error();
}

// Visit (bytes, count) of the chunks that have pairs (count > 0, two bytes or more), validating every entry.
template <class F>
void for_each_chunk(nb::handle counts, F&& f) {
    if (!PyDict_Check(counts.ptr())) throw nb::type_error("chunk_counts must be a dict of bytes -> int");
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(counts.ptr(), &pos, &key, &value)) {
        if (!PyBytes_Check(key)) raise_bad_chunk(key, value, true);
        if (!PyLong_Check(value)) raise_bad_chunk(key, value, false);
        int overflow = 0;
        long long n = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow > 0) raise_overflow("a chunk count does not fit in 64 bits");
        if (overflow < 0 || n < 0) raise_bad_chunk(key, value, false);
        Py_ssize_t size = PyBytes_GET_SIZE(key);
        if (n > 0 && size >= 2) f(reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(key)), size_t(size), n);
    }
}

nb::tuple train_sizes(nb::handle counts) {
    uint64_t words = 0, tokens = 0;
    for_each_chunk(counts, [&](const uint8_t*, size_t n, long long) {
        ++words;
        tokens += n;
    });
    return nb::make_tuple(words, tokens);
}

nb::tuple train(nb::handle counts, uint64_t budget, int64_t min_count, int tie_break,
                const std::vector<uint32_t>& hf_rank, nb::object progress) {
    Words w;
    uint64_t n_words = 0, n_tokens = 0;  // reserve exactly: growth by doubling left 2x slack (34 MB for 13 MB)
    for_each_chunk(counts, [&](const uint8_t*, size_t n, long long) {
        ++n_words;
        n_tokens += n;
    });
    w.narrow = Words::fits_narrow(budget);
    w.words.reserve(n_words);
    w.reserve_tokens(n_tokens);
    int64_t total = 0;  // the sum of all pair counts bounds every pair count: check it once for overflow
    for_each_chunk(counts, [&](const uint8_t* p, size_t n, long long c) {
        if (w.words.size() >= Words::kMaxWords) throw nb::value_error("more than 2**31 - 1 unique chunks");
        int64_t weight;
        if (__builtin_mul_overflow(static_cast<int64_t>(n - 1), static_cast<int64_t>(c), &weight) ||
            __builtin_add_overflow(total, weight, &total))
            raise_overflow("the chunk counts add up to more than 2**63 pairs");
        if (n > Words::kMaxLen || w.token_count() + n > Words::kMaxStart)  // train() runs the reference instead
            raise_overflow("the native merge loop takes chunks of at most 16 MiB and 2**40 bytes in all");
        w.words.push_back(Words::Word{w.token_count(), n, static_cast<int64_t>(c)});
        w.append(p, n);
    });
    return run_merge_loop(std::move(w), {}, budget, min_count, tie_break, hf_rank, progress);
}

}  // namespace

// The one merge loop of both levels: words built from a dict (train) or from counts tables (counts_bindings.cpp
// train_table) over the 256 bytes (alphabet empty), or runs of word-model ids over the word model's tokens
// (superword_bindings.cpp train_supermerges). Returns (merges, token bytes by id: the alphabet and the new tokens).
nb::tuple run_merge_loop(Words w, const std::vector<std::string>& alphabet, uint64_t budget, int64_t min_count,
                         int tie_break, const std::vector<uint32_t>& hf_rank, nb::object progress) {
    if (tie_break < 0 || tie_break > 2) throw nb::value_error("tie_break must be 0 (ids), 1 (huggingface) or 2 (bytes)");
    TrainOutput out;
    {
        nb::gil_scoped_release release;
        std::function<void(uint64_t)> report;
        if (!progress.is_none()) {
            report = [&](uint64_t new_tokens) {
                nb::gil_scoped_acquire acquire;
                progress(new_tokens, budget);
            };
        }
        out = train_words(std::move(w), static_cast<TieBreak>(tie_break), hf_rank, alphabet, budget, min_count, report);
    }
    const auto& merges = out.merges;
    PyObject* mlist = PyList_New(static_cast<Py_ssize_t>(merges.size()));
    nb::object mowner = nb::steal(mlist);
    for (size_t i = 0; i < merges.size(); ++i)
        PyList_SET_ITEM(mlist, i, nb::make_tuple(merges[i].first, merges[i].second).release().ptr());
    const auto& tb = out.token_bytes;
    PyObject* blist = PyList_New(static_cast<Py_ssize_t>(tb.size()));
    nb::object bowner = nb::steal(blist);
    for (size_t i = 0; i < tb.size(); ++i)
        PyList_SET_ITEM(blist, i, nb::bytes(tb[i].data(), tb[i].size()).release().ptr());
    return nb::make_tuple(mowner, bowner);
}

void bind_trainer(nb::module_& m) {
    m.def("train_sizes", &train_sizes);
    m.def("estimate_train_memory", &estimate_train_memory);
    m.def("train", &train, nb::arg("chunk_counts"), nb::arg("budget"), nb::arg("min_count"), nb::arg("tie_break"),
          nb::arg("hf_rank"), nb::arg("progress").none());
}
