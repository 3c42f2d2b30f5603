// SentencePiece-style BPE in the native core: the merge over characters (bpe_core/model/sentencepiece.py is the
// reference and says the rules). Tables come from bpe_core/encode/spm_native.py: the id of each character that is a
// piece (or a pseudo id above the vocabulary for a character that only appears as half of a piece), the pairs
// (left id, right id) -> (priority, merged id) with the lowest priority merging first (a dense rank of the merged
// piece's score, or the merge list's rank), ties to the leftmost pair, as sentencepiece, llama.cpp and Hugging Face
// break them. Texts are cut into words before each "▁" that follows another character (only where no piece holds
// such a "x▁", so that no merge could cross the cut) and at newline runs (GGUF gemma4); each word's ids are kept in a
// per-thread cache, so a repeated word costs one hash lookup: words of up to 15 bytes (most of them) in a PieceTable
// (piece_table.h: key and up to 4 ids in one 32-byte slot, one cache line a probe), longer ones in a WordTable.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "piece_table.h"

namespace bpe {

struct SpmConfig {
    uint32_t n_vocab = 0;
    bool byte_fallback = true;
    int32_t unk_id = -1;
    bool fuse_unk = false;       // sentencepiece without byte_fallback: a run of unknown symbols is one <unk>
    bool add_dummy_prefix = true;
    bool remove_extra_whitespaces = false;
    bool escape_whitespaces = true;
    bool cut_words = true;       // no piece holds "x▁": a cut before such a "▁" is exact
    bool split_newlines = false;  // GGUF gemma4: merges inside runs of "\n" and of other characters only
    bool newline_runs = false;    // GGUF gemma4: a run of "\n" that is a token is that token
};

// Open addressing, power-of-two slots, keys never 2**64 - 1 (the empty mark): the pairs of the merge.
class PairTable {
public:
    void build(const std::vector<uint64_t>& keys, const std::vector<uint64_t>& values);
    const uint64_t* find(uint64_t key) const {
        size_t i = (key * 0x9E3779B97F4A7C15ull) >> shift_;
        while (true) {
            const uint64_t k = keys_[i];
            if (k == key) return &values_[i];
            if (k == kEmpty) return nullptr;
            i = (i + 1) & mask_;
        }
    }

private:
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    std::vector<uint64_t> keys_, values_;
    size_t mask_ = 0;
    int shift_ = 64;
};

// A thread's word table: word bytes -> ids, in two arenas and open-addressing slots (no allocation per word).
class WordTable {
public:
    const int32_t* find(std::string_view word, uint64_t hash, uint32_t* count) const;
    void insert(std::string_view word, uint64_t hash, const int32_t* ids, uint32_t count);
    size_t size() const { return used_; }

private:
    struct Slot {
        uint64_t hash = 0;
        uint32_t key = 0, key_len = 0, ids = 0, ids_len = 0;
        bool used = false;
    };
    void grow();
    std::vector<Slot> slots_ = std::vector<Slot>(1024);
    std::string keys_;
    std::vector<int32_t> ids_;
    size_t used_ = 0;
};

uint64_t word_hash(std::string_view s);

// A thread's cache of words' ids (cache_pool.h lends one to each thread of a call and keeps it for the next).
struct SpmCache {
    PieceTable short_words;  // words of 1-15 bytes
    WordTable long_words;
    uint64_t resets = 0;     // times short_words reached its bound and started again
    void clear() { *this = SpmCache(); }
    size_t size() const { return short_words.size() + long_words.size(); }
};

using Cache = SpmCache;

class SpmEncoder {
public:
    SpmEncoder(SpmConfig config, const std::vector<std::pair<uint32_t, int32_t>>& chars,
               const std::vector<uint64_t>& pair_keys, const std::vector<uint64_t>& pair_values,
               const std::vector<int32_t>& byte_ids, const std::unordered_map<std::string, int32_t>& whole,
               const std::vector<std::pair<std::string, int32_t>>& users);

    // One text (UTF-8): normalized here when `normalize` (identity rules: prefix, space escaping, extra spaces),
    // else taken as the model's normalized text.
    void encode(std::string_view text, bool normalize, bool prefix, std::vector<int32_t>& out, Cache& cache) const;

    const SpmConfig& config() const { return config_; }

private:
    // The normalized text into out (resized; 16 readable bytes after its end), its length returned.
    size_t normalize(std::string_view text, bool prefix, std::string& out) const;
    template <class Word>
    void each_word(std::string_view s, Word&& word) const;
    // One word's ids at dst (room for its bytes + 4), the end returned: from the cache, else merged and kept.
    int32_t* cached_word(std::string_view w, int32_t* dst, Cache& cache, std::vector<int32_t>& scratch) const;
    void encode_word(std::string_view word, std::vector<int32_t>& out, bool& prev_unk) const;
    void emit_unknown(std::string_view bytes, std::vector<int32_t>& out, bool& prev_unk) const;

    SpmConfig config_;
    std::vector<int32_t> char_ids_;  // code point -> id (-1: none)
    PairTable pairs_;  // (left << 32 | right) -> (priority << 32 | merged id)
    std::vector<int32_t> byte_ids_;
    std::unordered_map<std::string, int32_t> whole_;  // GGUF gemma4: newline runs that are tokens
    // USER_DEFINED pieces by first byte, longest first: frozen symbols found in the normalized text (sentencepiece's
    // PrefixMatcher), never merged.
    std::vector<std::vector<std::pair<std::string, int32_t>>> users_;
};

// Strict UTF-8: the length of the sequence at p (1..4), 0 where it is invalid.
int utf8_length(const unsigned char* p, size_t left, uint32_t* cp);

}  // namespace bpe
