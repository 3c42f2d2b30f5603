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

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
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

// Open addressing, power-of-two slots, keys never 2**64 - 1 (the empty mark): the pairs of the merge. Key and
// value side by side in one 16-byte slot: a probe of a new pair is one cache miss, not two (perf, a first call on
// 4 MB: the value's load was a quarter of the pair lookups' cost).
class PairTable {
public:
    void build(const std::vector<uint64_t>& keys, const std::vector<uint64_t>& values);
    void prefetch(uint64_t key) const { __builtin_prefetch(&slots_[(key * 0x9E3779B97F4A7C15ull) >> shift_]); }
    const uint64_t* find(uint64_t key) const {
        size_t i = (key * 0x9E3779B97F4A7C15ull) >> shift_;
        while (true) {
            const Slot& s = slots_[i];
            if (s.key == key) return &s.value;
            if (s.key == kEmpty) return nullptr;
            i = (i + 1) & mask_;
        }
    }

private:
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    struct alignas(16) Slot {
        uint64_t key = kEmpty;
        uint64_t value = 0;
    };
    std::vector<Slot> slots_;
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

// Memory that is written before it is read, grown without being filled (std::vector and std::string zero what
// they grow by: a memset of 4 bytes per byte of text was a fifth of a first call's instructions).
template <class T>
class RawBuffer {
  public:
    RawBuffer() = default;
    RawBuffer(const RawBuffer&) = delete;
    RawBuffer& operator=(const RawBuffer&) = delete;
    ~RawBuffer() { std::free(data_); }
    T* data() const { return data_; }
    size_t size() const { return size_; }
    size_t capacity() const { return capacity_; }
    // Room for `more` past size(), keeping what is there.
    T* reserve_more(size_t more) {
        if (size_ + more > capacity_) {
            const size_t want = std::max(size_ + more, 2 * capacity_);
            T* p = static_cast<T*>(std::realloc(data_, want * sizeof(T)));
            if (!p) throw std::bad_alloc();
            data_ = p;
            capacity_ = want;
        }
        return data_ + size_;
    }
    void set_size(size_t n) { size_ = n; }
    void append(const T* values, size_t n) {
        std::memcpy(reserve_more(n), values, n * sizeof(T));
        size_ += n;
    }
    T* release() {  // the memory, now the caller's to free()
        T* p = data_;
        data_ = nullptr;
        size_ = capacity_ = 0;
        return p;
    }
    void reset() {
        std::free(release());
    }

  private:
    T* data_ = nullptr;
    size_t size_ = 0, capacity_ = 0;
};

using IdBuffer = RawBuffer<int32_t>;

// A symbol of a word being merged: a character (or a USER_DEFINED piece, frozen), then the pieces merged from them.
struct SpmSymbol {
    int32_t id;  // -1: not a piece
    uint32_t start;
    uint32_t length;  // bytes; 0 once merged into its left neighbour (the heap merge)
    int32_t prev;
    int32_t next;
    bool frozen;
};

// A pair in the heap merge's queue: the lowest priority first, then the leftmost.
struct SpmCandidate {
    uint32_t priority;
    int32_t left;
    int32_t right;
    uint32_t length;  // bytes of the merged symbol: a stale candidate no longer matches
    int32_t merged;
    bool operator<(const SpmCandidate& o) const {  // std::priority_queue order: pops the largest
        return priority != o.priority ? priority > o.priority : left > o.left;
    }
};

// A thread's working memory, kept with its cache (thread_local in a shared library costs a __tls_get_addr call
// per use: 13% of a first call's instructions).
struct SpmScratch {
    std::vector<SpmSymbol> symbols;
    std::vector<SpmCandidate> queue;
    std::vector<uint64_t> pairs;  // the scan merge: (priority << 32 | merged id) of symbol k and k + 1
    std::vector<int32_t> ids;
    RawBuffer<char> text;  // the normalized text
};

// A thread's cache of words' ids (cache_pool.h lends one to each thread of a call and keeps it for the next).
struct SpmCache {
    PieceTable short_words;  // words of 1-15 bytes
    WordTable long_words;
    uint64_t resets = 0;     // times short_words reached its bound and started again
    SpmScratch scratch;
    void clear() {
        short_words = PieceTable();
        long_words = WordTable();
    }
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
    void encode(std::string_view text, bool normalize, bool prefix, IdBuffer& out, Cache& cache) const;
    // The most ids a text of `bytes` UTF-8 bytes can have (one per byte of its normalized text, and room for the
    // 4 ids a cache hit stores at once).
    static size_t max_ids(size_t bytes) { return 3 * bytes + 3 + 16; }

    const SpmConfig& config() const { return config_; }

private:
    // The normalized text into out (16 readable bytes after its end), its length returned.
    size_t normalize(std::string_view text, bool prefix, RawBuffer<char>& out) const;
    template <class Word>
    void each_word(std::string_view s, Word&& word) const;
    // One word's ids at dst (room for its bytes + 4), the end returned: from the cache, else merged and kept.
    int32_t* cached_word(std::string_view w, int32_t* dst, Cache& cache) const;
    void encode_word(std::string_view word, std::vector<int32_t>& out, bool& prev_unk, SpmScratch& scratch) const;
    // The two merges of a word's symbols (the same result): a scan for the best pair, for words of up to
    // kScanSymbols symbols, and a priority queue over a linked list for longer ones.
    // Not merge_kernels.h's kernels: they order by the whole value, so the result id breaks a tie of ranks before
    // the position does (a rank names one result there); here pieces of equal score share a priority and the
    // leftmost pair wins whatever it makes.
    void merge_scan(std::vector<SpmSymbol>& symbols, std::vector<uint64_t>& pairs) const;
    void merge_heap(std::vector<SpmSymbol>& symbols, std::vector<SpmCandidate>& queue) const;
    uint64_t pair_value(const SpmSymbol& a, const SpmSymbol& b) const;
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
