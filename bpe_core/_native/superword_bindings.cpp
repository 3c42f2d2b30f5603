// Python bindings of superword (SuperBPE) phase 2: the merge loop of trainer.cpp over runs of word-model ids
// (bpe_core/superword.py is the reference). Runs arrive as columns (ids, offsets, counts), never one object per run.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer.h"

namespace nb = nanobind;
using namespace bpe;

void bind_superword(nb::module_& m);

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
        if (w.words.size() >= 0xFFFFFFFFull) throw nb::value_error("more than 2**32 - 1 unique runs");
        w.words.push_back(Words::Word{w.token_count(), len, c});
        w.append_ids(tok + off[i], len);
    }
    return w;
}

// (merges, token_bytes): the supermerges as (left id, right id) in rank order and the alphabet extended by the new
// tokens, equal to bpe_core.superword.train_supermerges_reference.
nb::tuple train_supermerges(const Ids& ids, const Offsets64& offsets, const Counts& counts,
                            nb::handle alphabet_list, uint64_t budget, int64_t min_count,
                            int tie_break, const std::vector<uint32_t>& hf_rank, nb::object progress) {
    if (tie_break < 0 || tie_break > 2) throw nb::value_error("tie_break must be 0 (ids), 1 (huggingface) or 2 (bytes)");
    std::vector<std::string> alphabet;
    for (nb::handle item : alphabet_list) {
        if (!PyBytes_Check(item.ptr())) throw nb::type_error("alphabet must be a list of bytes (token bytes by id)");
        alphabet.emplace_back(PyBytes_AS_STRING(item.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(item.ptr())));
    }
    if (alphabet.size() < 256) throw nb::value_error("the alphabet (the word model's tokens) starts with the 256 bytes");
    Words w = runs_to_words(ids, offsets, counts, alphabet.size(), budget);
    std::unique_ptr<MergeLoop> loop;
    {
        nb::gil_scoped_release release;
        loop = std::make_unique<MergeLoop>(std::move(w), static_cast<TieBreak>(tie_break), hf_rank, alphabet);
        std::function<void(uint64_t)> report;
        if (!progress.is_none()) {
            report = [&](uint64_t new_tokens) {
                nb::gil_scoped_acquire acquire;
                progress(new_tokens, budget);
            };
        }
        loop->run(budget, min_count, report);
    }
    nb::list merges, token_bytes;
    for (const auto& [a, b] : loop->merges()) merges.append(nb::make_tuple(a, b));
    const auto& tb = loop->token_bytes();
    for (size_t i = alphabet.size(); i < tb.size(); ++i) token_bytes.append(nb::bytes(tb[i].data(), tb[i].size()));
    return nb::make_tuple(merges, token_bytes);
}

}  // namespace

void bind_superword(nb::module_& m) {
    m.def("train_supermerges", &train_supermerges, nb::arg("ids"), nb::arg("offsets"), nb::arg("counts"),
          nb::arg("alphabet"), nb::arg("budget"), nb::arg("min_count"), nb::arg("tie_break"), nb::arg("hf_rank"),
          nb::arg("progress").none(),
          "Phase 2 of a superword tokenizer: merges over runs of word-model ids; returns (merges, new token bytes).");
}
