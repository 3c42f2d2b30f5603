// The merge loop on weighted chunk counts: the C++ twin of bpe_core/train.py's _MergeLoop.
//
// Words are one flat uint32 token array with offsets (no object per word), counts are 64-bit, pair counts live
// in an open-addressing table and are updated incrementally from the words that hold the merged pair, and the
// next pair comes from a heap with lazy invalidation. The merges equal the reference's: each step takes the pair
// with the largest count, the smallest tie key among equals, which the reference's heap also yields.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tables.h"

namespace bpe {

enum class TieBreak { kIds = 0, kHuggingface = 1, kBytes = 2 };

struct Words {
    struct Word {
        uint64_t start;  // the word is toks[start : start + len]
        int64_t count;
        uint32_t len;    // shrinks as pairs merge; the slot keeps its start
    };
    std::vector<uint32_t> toks;  // all words, one after another
    std::vector<Word> words;     // one struct, not three arrays: one cache miss per word visited (measured below)
};

// Bytes the loop needs for n_words words holding n_tokens bytes in all (an upper estimate, see trainer.cpp).
uint64_t estimate_train_memory(uint64_t n_words, uint64_t n_tokens);

class MergeLoop {
  public:
    // hf_rank: for "huggingface", the rank of each byte in BpeTrainer's alphabet order.
    MergeLoop(Words words, TieBreak tie_break, const std::vector<uint32_t>& hf_rank);

    // Merge until budget new tokens exist or no pair reaches min_count. progress(new_tokens) is called after a
    // merge whenever the number of merges is a multiple of 1000 (as the reference).
    void run(uint64_t budget, int64_t min_count, const std::function<void(uint64_t)>& progress);

    const std::vector<std::pair<uint32_t, uint32_t>>& merges() const { return merges_; }
    const std::vector<std::string>& token_bytes() const { return token_bytes_; }

  private:
    struct PairInfo {
        int64_t count = 0;
        uint32_t where = kNoList;  // index into where_, or kNoList
    };
    struct HeapEntry {
        int64_t count;
        uint64_t key;
    };
    static constexpr uint32_t kNoList = ~uint32_t(0);

    bool lower_priority(const HeapEntry& a, const HeapEntry& b) const;  // a pops after b
    uint64_t tie_key(uint64_t key) const;
    void push(int64_t count, uint64_t key);
    void add(uint64_t key, int64_t delta, uint32_t word);  // delta > 0: the word gained the pair
    void apply(uint64_t key, uint32_t new_id);
    void release_list(PairInfo& info);

    Words w_;
    TieBreak tie_break_;
    uint32_t hf_rank_[256];
    U64Map<PairInfo> pairs_;
    std::vector<std::vector<uint32_t>> where_;  // pair -> words that may hold it (stale entries allowed)
    std::vector<uint32_t> free_lists_;
    std::vector<HeapEntry> heap_;
    std::vector<uint64_t> grown_;
    bool track_grown_ = false;  // off while the initial counts are built
    std::vector<std::string> token_bytes_;
    BytesMap bytes_to_id_;
    U64Map<uint8_t> merged_;
    std::vector<std::pair<uint32_t, uint32_t>> merges_;
};

}  // namespace bpe
