// Superword (SuperBPE) encoding and run counting over the word model's output (bpe_core/superword/reference.py is the
// reference). The word model's ids of a document are aligned with the pre-tokenizer's pieces of its bytes: a token
// that starts at a piece's start and ends at that piece's end is the whole pre-token. Maximal runs of two or more such
// tokens that are eligible (the eligibility rules are bpe_core/superword/reference.py's) get the supermerges by rank, as BPE
// merges bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "pretok.h"
#include "tables.h"

namespace bpe {

struct SuperwordTables {
    std::vector<uint32_t> token_len;  // bytes of each word-model id
    std::vector<uint8_t> eligible;    // 1 where a whole pre-token of this id may join a run
    std::vector<uint8_t> letter;      // 1 where the id's bytes hold a letter
    bool run_needs_letter = false;    // rule "letter-run": a run counts only if one of its tokens holds a letter
    U64Map<uint64_t> merges{1 << 12};  // (left << 32 | right) -> rank << 32 | result id
};

// Scratch space of one thread.
struct SuperwordScratch {
    std::vector<size_t> ends;
    std::vector<uint64_t> values;
    std::vector<uint32_t> merged;
};

// The runs of one document: calls on_run(first token index, number of tokens) for each maximal run of >= 2 whole,
// eligible tokens. Returns false where the ids do not tile the document's pieces (the caller takes the reference).
template <class F>
bool for_each_run(Pretok kind, const uint8_t* text, size_t n, const uint32_t* ids, size_t m, const SuperwordTables& t,
                  SuperwordScratch& s, F&& on_run) {
    s.ends.clear();
    pretok_split(kind, text, n, s.ends);
    size_t pos = 0, piece = 0, piece_start = 0, run_start = 0, run_len = 0;
    bool run_letter = false;
    auto emit = [&]() {
        if (run_len >= 2 && (run_letter || !t.run_needs_letter)) on_run(run_start, run_len);
    };
    for (size_t k = 0; k < m; ++k) {
        const uint32_t id = ids[k];
        if (id >= t.token_len.size() || piece >= s.ends.size()) return false;
        const size_t start = pos;
        pos += t.token_len[id];
        const size_t piece_end = s.ends[piece];
        if (pos > piece_end) return false;  // a token across pieces: not this pre-tokenizer's ids
        const bool whole = start == piece_start && pos == piece_end;
        if (pos == piece_end) {
            piece_start = piece_end;
            ++piece;
        }
        if (whole && t.eligible[id]) {
            if (run_len == 0) {
                run_start = k;
                run_letter = false;
            }
            ++run_len;
            run_letter = run_letter || t.letter[id];
            continue;
        }
        emit();
        run_len = 0;
    }
    if (pos != n) return false;
    emit();
    return true;
}

// The supermerges of one run, in place: the merge kernels of merge_kernels.h (the encoder's) over the supermerges'
// lookup. Returns the new length.
size_t merge_run(uint32_t* run, size_t len, const SuperwordTables& t, SuperwordScratch& s);

}  // namespace bpe
