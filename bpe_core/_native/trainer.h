// The merge loop on weighted chunk counts: the C++ twin of bpe_core/train/trainer.py's _MergeLoop.
//
// Words are one flat uint32 token array with offsets (no object per word), counts are 64-bit, pair counts live
// in an open-addressing table and are updated incrementally from the words that hold the merged pair, and the
// next pair comes from a heap with lazy invalidation. The merges equal the reference's: each step takes the pair
// with the largest count, the smallest tie key among equals, which the reference's heap also yields.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "pair_table.h"
#include "tables.h"

namespace bpe {

enum class TieBreak { kIds = 0, kHuggingface = 1, kBytes = 2 };

struct Words {
    // 16 bytes, not 24 (start and len share a word): 8 bytes less per unique chunk. Limits: a chunk of at most
    // 16 MiB - 1 bytes, 2**40 chunk bytes in all, 2**31 - 1 words (kMaxLen, kMaxStart, kMaxWords); the callers
    // check them.
    struct Word {
        uint64_t start : 40;  // the word is toks[start : start + len]
        uint64_t len : 24;    // shrinks as pairs merge; the slot keeps its start
        int64_t count;
    };
    static constexpr uint64_t kMaxLen = (uint64_t(1) << 24) - 1;
    static constexpr uint64_t kMaxStart = (uint64_t(1) << 40) - 1;
    static constexpr uint64_t kMaxWords = (uint64_t(1) << 31) - 1;  // a word index fits a pair slot's 31 bits
    // All words, one after another: 2 bytes per token where every id fits (narrow: vocabularies up to 65,536),
    // 4 otherwise. The caller decides before the words are built (it knows the budget).
    std::vector<uint32_t> toks;
    std::vector<uint16_t> toks16;
    bool narrow = false;
    std::vector<Word> words;  // one struct, not three arrays: one cache miss per word visited (measured below)

    // alphabet: the ids the words start with (256 bytes in phase 1, the word model's tokens in phase 2).
    static bool fits_narrow(uint64_t budget, uint64_t alphabet = 256) { return budget + alphabet <= 65536; }
    size_t token_count() const { return narrow ? toks16.size() : toks.size(); }
    void reserve_tokens(size_t n) { narrow ? toks16.reserve(n) : toks.reserve(n); }
    void append(const uint8_t* p, size_t n) {
        if (narrow) {
            toks16.insert(toks16.end(), p, p + n);
        } else {
            toks.insert(toks.end(), p, p + n);
        }
    }
    // Phase 2 (superwords): a run of word-model ids; the caller checks that each is below the alphabet's size.
    void append_ids(const uint32_t* p, size_t n) {
        if (narrow) {
            for (size_t i = 0; i < n; ++i) toks16.push_back(static_cast<uint16_t>(p[i]));
        } else {
            toks.insert(toks.end(), p, p + n);
        }
    }
};

// The unique chunks of a counts directory gathered for the merge loop straight from the shards' Arrow buffers,
// without a Python object per chunk: bytes stored once (1 byte each, not the loop's 4), 16 bytes per chunk
// besides. Each shard's rows are checked to be sorted, distinct and hashed to that shard, which also proves that no
// chunk is in two shards. Filters run here with exact (128-bit) tallies of what they dropped.
class ChunkTable {
  public:
    // Append a shard's rows (in order; a shard may come in several calls), dropping counts below min_count.
    // Throws std::invalid_argument naming the row where the order or the shard is wrong.
    void add(const int32_t* offsets, const uint8_t* data, const int64_t* counts, size_t n, uint32_t shard,
             uint32_t num_shards, int64_t min_count);
    // Keep the max_chunks most frequent chunks, ties at the threshold count broken by bytes (smallest first).
    void keep_top(uint64_t max_chunks);
    void reserve(uint64_t rows, uint64_t data_bytes) {
        offsets_.reserve(rows + 1);
        counts_.reserve(rows);
        data_.reserve(data_bytes);
    }
    size_t size() const { return counts_.size(); }
    int64_t min_count_kept() const;
    uint64_t count_equal(int64_t value) const;
    // The chunks with pairs (count > 0, two bytes or more) as the merge loop's words (narrow ones if the budget
    // allows); the table is emptied. Throws std::overflow_error if the pair counts add up past int64.
    Words take_words(uint64_t budget);
    std::pair<uint64_t, uint64_t> train_sizes() const;  // (words, bytes) take_words would give

    uint64_t rows = 0, low_rows = 0, over_rows = 0;
    unsigned __int128 occurrences = 0, low_occurrences = 0, over_occurrences = 0;

  private:
    size_t len(size_t i) const { return static_cast<size_t>(offsets_[i + 1] - offsets_[i]); }
    std::vector<uint64_t> offsets_{0};
    std::vector<uint8_t> data_;
    std::vector<int64_t> counts_;
    std::vector<uint8_t> last_;  // the last chunk of the current shard, for the order check
    int64_t shard_ = -1;
    bool have_last_ = false;
};

// Bytes the loop needs for n_words words holding n_tokens bytes in all (an upper estimate, see trainer.cpp).
uint64_t estimate_train_memory(uint64_t n_words, uint64_t n_tokens);

// The loop's output: merges as id pairs, and the bytes of every token by id (the alphabet, then the new tokens).
struct TrainOutput {
    std::vector<std::pair<uint32_t, uint32_t>> merges;
    std::vector<std::string> token_bytes;
};

// The merge loop on words (run_merge_loop's work, without the GIL): MergeLoop on 16-byte pair slots where every
// pair count fits 48 bits (the words' pair total is below 2**48), on 24-byte ones otherwise.
TrainOutput train_words(Words words, TieBreak tie_break, const std::vector<uint32_t>& hf_rank,
                        const std::vector<std::string>& alphabet, uint64_t budget, int64_t min_count,
                        const std::function<void(uint64_t)>& progress);

template <class Slot>
class MergeLoop {
  public:
    // hf_rank: for "huggingface", the rank of each byte in BpeTrainer's alphabet order. alphabet: the tokens that
    // exist before the first merge, by id (empty: the 256 bytes; phase 2 of a superword tokenizer: the word model's
    // vocabulary, whose first 256 ids are the bytes in phase 1's order, so the three tie-breaks read the same).
    MergeLoop(Words words, TieBreak tie_break, const std::vector<uint32_t>& hf_rank,
              const std::vector<std::string>& alphabet = {});

    // Merge until budget new tokens exist or no pair reaches min_count. progress(new_tokens) is called after a
    // merge whenever the number of merges is a multiple of 1000 (as the reference).
    void run(uint64_t budget, int64_t min_count, const std::function<void(uint64_t)>& progress);

    std::vector<std::pair<uint32_t, uint32_t>> take_merges() { return std::move(merges_); }
    std::vector<std::string> take_token_bytes() { return std::move(token_bytes_); }

  private:
    struct HeapEntry {
        int64_t count;
        uint64_t key;
    };

    bool lower_priority(const HeapEntry& a, const HeapEntry& b) const;  // a pops after b
    uint64_t tie_key(uint64_t key) const;
    void push(int64_t count, uint64_t key);
    void add(uint64_t key, int64_t delta, uint32_t word);  // delta > 0: the word gained the pair
    void apply(uint64_t key, uint32_t new_id);
    template <class T>
    void merge_words(T* toks, const uint32_t* words, size_t n_words, uint64_t key, uint32_t new_id);
    void release_list(Slot& pair);
    void report_memory() const;

    Words w_;
    TieBreak tie_break_;
    uint32_t hf_rank_[256];
    PairTable<Slot> pairs_;
    WordLists lists_;  // pair -> words that may hold it, for pairs held by more than one word
    std::vector<HeapEntry> heap_;
    std::vector<uint64_t> grown_;
    bool track_grown_ = false;  // off while the initial counts are built
    std::vector<std::string> token_bytes_;
    BytesMap bytes_to_id_;
    U64Map<uint8_t> merged_;
    std::vector<std::pair<uint32_t, uint32_t>> merges_;
};

}  // namespace bpe
