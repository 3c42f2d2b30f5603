// Python bindings of superword (SuperBPE) phase 2: the merge loop of trainer.cpp over runs of word-model ids
// (bpe_core/superword/reference.py is the reference). Runs arrive as columns (ids, offsets, counts), never one object per run.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "superword.h"
#include "trainer.h"

namespace nb = nanobind;
using namespace bpe;

void bind_superword(nb::module_& m);
nb::tuple run_merge_loop(Words w, const std::vector<std::string>& alphabet, uint64_t budget, int64_t min_count,
                         int tie_break, const std::vector<uint32_t>& hf_rank, nb::object progress);  // trainer_bindings.cpp

namespace {

using Ids = nb::ndarray<const uint32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Offsets64 = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Counts = nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// Words from runs: run i is ids[offsets[i] : offsets[i + 1]] with count counts[i]; runs of one id or a zero count
// have no pair and are left out. Every id must be below the alphabet's size.
Words runs_to_words(const Ids& ids, const Offsets64& offsets, const Counts& counts, uint64_t alphabet,
                    uint64_t budget) {
    const size_t n = counts.shape(0);
    if (offsets.shape(0) != n + 1) throw nb::value_error("offsets must hold one more entry than counts");
    const int64_t* off = offsets.data();
    const int64_t* cnt = counts.data();
    const uint32_t* tok = ids.data();
    if (off[0] != 0 || static_cast<uint64_t>(off[n]) != ids.shape(0))
        throw nb::value_error("offsets must start at 0 and end at the number of ids");
    for (size_t i = 0; i < ids.shape(0); ++i)
        if (tok[i] >= alphabet)
            throw nb::value_error(("run id " + std::to_string(tok[i]) + " is not a token of the word model's " +
                                   std::to_string(alphabet) + " (runs made with another word model?)")
                                      .c_str());
    Words w;
    w.narrow = Words::fits_narrow(budget, alphabet);
    int64_t total = 0;
    for (size_t i = 0; i < n; ++i) {
        if (off[i + 1] < off[i]) throw nb::value_error("offsets must not decrease");
        const size_t len = static_cast<size_t>(off[i + 1] - off[i]);
        const int64_t c = cnt[i];
        if (c < 0) throw nb::value_error(("run " + std::to_string(i) + " has a negative count").c_str());
        if (c == 0 || len < 2) continue;
        int64_t weight;
        if (__builtin_mul_overflow(static_cast<int64_t>(len - 1), c, &weight) ||
            __builtin_add_overflow(total, weight, &total))
            throw nb::value_error("the run counts add up to more than 2**63 pairs");
        if (len > Words::kMaxLen || w.token_count() + len > Words::kMaxStart)
            throw nb::value_error("the native merge loop takes runs of at most 16 Mi ids and 2**40 ids in all");
        if (w.words.size() >= Words::kMaxWords) throw nb::value_error("more than 2**31 - 1 unique runs");
        w.words.push_back(Words::Word{w.token_count(), len, c});
        w.append_ids(tok + off[i], len);
    }
    return w;
}

// (merges, token_bytes): the supermerges as (left id, right id) in rank order and the alphabet extended by the new
// tokens: the one merge loop (trainer_bindings.cpp run_merge_loop) over the word model's tokens.
nb::tuple train_supermerges(const Ids& ids, const Offsets64& offsets, const Counts& counts,
                            nb::handle alphabet_list, uint64_t budget, int64_t min_count,
                            int tie_break, const std::vector<uint32_t>& hf_rank, nb::object progress) {
    std::vector<std::string> alphabet;
    for (nb::handle item : alphabet_list) {
        if (!PyBytes_Check(item.ptr())) throw nb::type_error("alphabet must be a list of bytes (token bytes by id)");
        alphabet.emplace_back(PyBytes_AS_STRING(item.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(item.ptr())));
    }
    if (alphabet.size() < 256) throw nb::value_error("the alphabet (the word model's tokens) starts with the 256 bytes");
    Words w = runs_to_words(ids, offsets, counts, alphabet.size(), budget);
    return run_merge_loop(std::move(w), alphabet, budget, min_count, tie_break, hf_rank, progress);
}

using Bytes = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

template <class T>
nb::object to_numpy(std::vector<T>&& v) {
    auto* owned = new std::vector<T>(std::move(v));
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
    return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(owned->data(), {owned->size()}, owner));
}

// The run count of phase 2 (the encoding of a superword tokenizer is its word encoder's, with the second level
// attached: Encoder::set_superword): its tables built once; runs counted over flat columns of documents (their
// UTF-8 bytes with offsets) and of the word model's ids (with offsets). Documents whose ids do not tile their pieces
// are listed as failed for the caller's reference path.
class PySuperwordPass {
  public:
    PySuperwordPass(const std::vector<uint32_t>& token_len, nb::bytes eligible, nb::bytes letter,
                    bool run_needs_letter, const std::vector<uint32_t>& left, const std::vector<uint32_t>& right,
                    const std::vector<uint32_t>& result, const std::string& kind)
        : kind_(pretok_from_name(kind)) {
        if (kind_ == Pretok::kNone) throw nb::value_error(("no hand-written pre-tokenizer named '" + kind + "'").c_str());
        try {
            t_ = make_superword_tables(token_len, std::string_view(eligible.c_str(), eligible.size()),
                                       std::string_view(letter.c_str(), letter.size()), run_needs_letter, left,
                                       right, result);
        } catch (const std::invalid_argument& e) {
            throw nb::value_error(e.what());
        }
    }

    nb::tuple count(const Bytes& data, const Offsets64& doc_offsets, const Ids& ids, const Offsets64& id_offsets) {
        return count_docs(array_docs(data, doc_offsets, ids, id_offsets), ids, id_offsets);
    }
    nb::tuple count_texts(nb::handle texts, const Ids& ids, const Offsets64& id_offsets) {
        nb::object keep;
        return count_docs(list_docs(texts, ids, id_offsets, keep), ids, id_offsets);
    }

  private:
    // The documents' UTF-8: pointer and length each; a null pointer is a text the pass cannot read (listed failed).
    struct Docs {
        std::vector<const uint8_t*> ptr;
        std::vector<size_t> len;
    };

    static Docs array_docs(const Bytes& data, const Offsets64& doc_offsets, const Ids& ids,
                           const Offsets64& id_offsets) {
        const size_t n = check(data, doc_offsets, ids, id_offsets);
        Docs docs;
        for (size_t d = 0; d < n; ++d) {
            docs.ptr.push_back(data.data() + doc_offsets.data()[d]);
            docs.len.push_back(static_cast<size_t>(doc_offsets.data()[d + 1] - doc_offsets.data()[d]));
        }
        return docs;
    }

    // A list of str (their cached UTF-8, no copy; a lone surrogate makes the text unreadable here) or bytes.
    static Docs list_docs(nb::handle texts, const Ids& ids, const Offsets64& id_offsets, nb::object& keep) {
        if (!PyList_Check(texts.ptr())) throw nb::type_error("texts must be a list of str or bytes");
        keep = nb::borrow(texts);
        const size_t n = static_cast<size_t>(PyList_GET_SIZE(texts.ptr()));
        if (id_offsets.shape(0) != n + 1 || id_offsets.data()[0] != 0 ||
            static_cast<uint64_t>(id_offsets.data()[n]) != ids.shape(0))
            throw nb::value_error("id_offsets: one per text + 1, from 0 to the number of ids");
        Docs docs;
        for (size_t d = 0; d < n; ++d) {
            if (id_offsets.data()[d] > id_offsets.data()[d + 1]) throw nb::value_error("offsets must not decrease");
            PyObject* t = PyList_GET_ITEM(texts.ptr(), static_cast<Py_ssize_t>(d));
            const char* p = nullptr;
            Py_ssize_t len = 0;
            if (PyUnicode_Check(t)) {
                p = PyUnicode_AsUTF8AndSize(t, &len);
                if (!p) PyErr_Clear();
            } else if (PyBytes_Check(t)) {
                p = PyBytes_AS_STRING(t);
                len = PyBytes_GET_SIZE(t);
            } else {
                throw nb::type_error("texts must be a list of str or bytes");
            }
            docs.ptr.push_back(reinterpret_cast<const uint8_t*>(p));
            docs.len.push_back(p ? static_cast<size_t>(len) : 0);
        }
        return docs;
    }

    // (run ids, run offsets, counts, failed documents): the runs of these documents, each distinct run once, sorted
    // by key (the little-endian u32 bytes; equal to sorting the id sequences as bytes).
    nb::tuple count_docs(const Docs& docs, const Ids& ids, const Offsets64& id_offsets) {
        const size_t n_docs = docs.ptr.size();
        std::vector<uint32_t> run_ids;
        std::vector<int64_t> run_offsets{0}, counts, failed;
        {
            nb::gil_scoped_release release;
            std::unordered_map<std::string, int64_t> table;
            SuperwordScratch s;
            for (size_t d = 0; d < n_docs; ++d) {
                const int64_t a = id_offsets.data()[d], b = id_offsets.data()[d + 1];
                const uint32_t* doc = ids.data() + a;
                const bool ok = docs.ptr[d] && for_each_run(kind_, docs.ptr[d], docs.len[d], doc,
                                                            static_cast<size_t>(b - a), *t_, s,
                                                            [&](size_t start, size_t len) {
                                                                ++table[std::string(
                                                                    reinterpret_cast<const char*>(doc + start),
                                                                    len * sizeof(uint32_t))];
                                                            });
                if (!ok) failed.push_back(static_cast<int64_t>(d));
            }
            std::vector<const std::pair<const std::string, int64_t>*> order;
            order.reserve(table.size());
            for (const auto& kv : table) order.push_back(&kv);
            std::sort(order.begin(), order.end(), [](auto* x, auto* y) { return x->first < y->first; });
            for (const auto* kv : order) {
                const auto* p = reinterpret_cast<const uint32_t*>(kv->first.data());
                run_ids.insert(run_ids.end(), p, p + kv->first.size() / sizeof(uint32_t));
                run_offsets.push_back(static_cast<int64_t>(run_ids.size()));
                counts.push_back(kv->second);
            }
        }
        return nb::make_tuple(to_numpy(std::move(run_ids)), to_numpy(std::move(run_offsets)),
                              to_numpy(std::move(counts)), to_numpy(std::move(failed)));
    }

    static size_t check(const Bytes& data, const Offsets64& doc_offsets, const Ids& ids, const Offsets64& id_offsets) {
        const size_t n = doc_offsets.shape(0);
        if (n == 0 || id_offsets.shape(0) != n) throw nb::value_error("doc_offsets and id_offsets: one per text, + 1");
        for (size_t d = 0; d + 1 < n; ++d) {
            if (doc_offsets.data()[d] > doc_offsets.data()[d + 1] || id_offsets.data()[d] > id_offsets.data()[d + 1])
                throw nb::value_error("offsets must not decrease");
        }
        if (doc_offsets.data()[0] != 0 || static_cast<uint64_t>(doc_offsets.data()[n - 1]) != data.shape(0) ||
            id_offsets.data()[0] != 0 || static_cast<uint64_t>(id_offsets.data()[n - 1]) != ids.shape(0))
            throw nb::value_error("offsets must start at 0 and end at the length of their column");
        return n - 1;
    }

    Pretok kind_;
    std::shared_ptr<const SuperwordTables> t_;
};

}  // namespace

void bind_superword(nb::module_& m) {
    m.def("train_supermerges", &train_supermerges, nb::arg("ids"), nb::arg("offsets"), nb::arg("counts"),
          nb::arg("alphabet"), nb::arg("budget"), nb::arg("min_count"), nb::arg("tie_break"), nb::arg("hf_rank"),
          nb::arg("progress").none(),
          "Phase 2 of a superword tokenizer: merges over runs of word-model ids; returns (merges, token bytes by id).");
    nb::class_<PySuperwordPass>(m, "SuperwordPass")
        .def(nb::init<const std::vector<uint32_t>&, nb::bytes, nb::bytes, bool, const std::vector<uint32_t>&,
                      const std::vector<uint32_t>&, const std::vector<uint32_t>&, const std::string&>(),
             nb::arg("token_len"), nb::arg("eligible"), nb::arg("letter"), nb::arg("run_needs_letter"),
             nb::arg("left"), nb::arg("right"), nb::arg("result"), nb::arg("kind"))
        .def("count", &PySuperwordPass::count, nb::arg("data"), nb::arg("doc_offsets"), nb::arg("ids"),
             nb::arg("id_offsets"))
        .def("count_texts", &PySuperwordPass::count_texts, nb::arg("texts"), nb::arg("ids"), nb::arg("id_offsets"));
}
