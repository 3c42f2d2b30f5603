// Byte-level BPE of pre-token pieces: the C++ twin of bpe_core/bpe.py and Tokenizer._encode_piece.
//
// The tables are immutable after construction, so one Encoder serves several threads at once; the chunk cache is
// separate state, one per thread (CachePool keeps them between calls).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "pretok.h"
#include "tables.h"

namespace bpe {

// Scan below this many tokens, heap above (as bpe.SCAN_LIMIT; the results are identical either way).
constexpr size_t kScanLimit = 64;
// Room beyond n ids that a piece of n bytes needs in an output buffer (ChunkCache::hot_emit stores kHotIds ids).
constexpr size_t kPieceSlack = 4;
// As tokenizer.CHUNK_CACHE_LIMIT: the cache is cleared when it holds this many pieces.
constexpr size_t kChunkCacheLimit = size_t(1) << 18;

// Asked by long loops (every kPollPieces pieces, every kPollPops heap pops of a long merge) whether to give up:
// Ctrl-C while a native call runs. A thread installs its check with StopScope; the answer is sticky (stopped()),
// and a stopped loop leaves a partial result that its caller throws away (and never caches).
class StopCheck {
  public:
    bool poll() { return stopped_ || (stopped_ = check()); }
    bool stopped() const { return stopped_; }

  protected:
    ~StopCheck() = default;
    virtual bool check() = 0;

  private:
    bool stopped_ = false;
};

inline thread_local StopCheck* t_stop_check = nullptr;
inline bool stop_requested() { return t_stop_check && t_stop_check->poll(); }
inline bool stopped() { return t_stop_check && t_stop_check->stopped(); }

// Installs a check on this thread for one scope.
class StopScope {
  public:
    explicit StopScope(StopCheck* check) : previous_(t_stop_check) { t_stop_check = check; }
    ~StopScope() { t_stop_check = previous_; }
    StopScope(const StopScope&) = delete;
    StopScope& operator=(const StopScope&) = delete;

  private:
    StopCheck* previous_;
};

// A worker's check: a flag set by the thread that waits for it.
class FlagCheck final : public StopCheck {
  public:
    explicit FlagCheck(const std::atomic<bool>& flag) : flag_(flag) {}

  private:
    bool check() override { return flag_.load(std::memory_order_relaxed); }
    const std::atomic<bool>& flag_;
};

constexpr size_t kPollPieces = 1024;
// Pieces split ahead of their encoding (Encoder::encode_text_to); a stop request is looked for after each batch.
constexpr size_t kSplitBatch = 256;
constexpr uint64_t kPollPops = uint64_t(1) << 16;

struct MergeStats {
    uint64_t pushes = 0;
    uint64_t pops = 0;
};

class ChunkCache {
  public:
    uint32_t* get(const uint8_t* p, size_t n, uint64_t h, uint32_t* dst) const;  // end of the ids, or nullptr
    void put(const uint8_t* p, size_t n, uint64_t h, const uint32_t* ids, size_t count);
    void clear();
    size_t size() const { return spans_.size(); }

    // Pieces of 2 to 16 bytes that are one token, in a small two-way set-associative table (a set is one cache
    // line; the piece's bytes are the key: exact). Short words are most pieces of text, and the two BytesMap
    // lookups they cost otherwise (vocabulary, then cache: two or three cache misses each) were the top of the
    // encode profile (find_hashed 33% of encode_batch's samples). Measured on 80 MB of the shared corpora with
    // cl100k: 89% of pieces are 2-16 bytes; a direct-mapped table of 2-8 byte pieces hit 83% of its lookups.
    static constexpr size_t kHotMax = 16;
    // The piece's bytes as two little-endian words, zero-padded (n in [2, 16]), from fixed-size loads inside
    // [p, p + n): a memcpy of n bytes into a zeroed buffer was a library call and a store-forwarding stall.
    static void key_of(const uint8_t* p, size_t n, uint64_t* head, uint64_t* tail) {
        if (n >= 8) {
            uint64_t a, b;
            std::memcpy(&a, p, 8);
            std::memcpy(&b, p + n - 8, 8);
            *head = a;
            *tail = n == 8 ? 0 : b >> (8 * (16 - n));
        } else if (n >= 4) {
            uint32_t a, b;
            std::memcpy(&a, p, 4);
            std::memcpy(&b, p + n - 4, 4);
            *head = a | (uint64_t(b) << (8 * (n - 4)));
            *tail = 0;
        } else {
            uint16_t a;
            std::memcpy(&a, p, 2);
            *head = a | (uint64_t(p[n - 1]) << (8 * (n - 1)));
            *tail = 0;
        }
    }
    // Up to kHotIds ids inline per entry, so that short pieces of two or three tokens hit too (they took the two
    // BytesMap lookups, whole piece then chunk cache, on every occurrence). With the output written straight into
    // the caller's buffer (Encoder::encode_piece_to) and the ids of a hit stored unconditionally: the second pass
    // over 2 MB (cl100k, one thread) 124.4 -> 108.9 M instructions in Encoder::encode_text (callgrind); alone,
    // with per-piece vector inserts, it was 143.7 M (worse: the range insert's call and checks).
    static constexpr size_t kHotIds = 3;
    // On a hit, the entry's ids stored at dst (all kHotIds of them: dst has the room) and the end of its own;
    // nullptr on a miss.
    uint32_t* hot_emit(uint64_t head, uint64_t tail, size_t n, uint32_t* dst) const {
        const HotSet& set = hot_[hot_index(head, tail)];
        for (const Hot& e : set.way) {
            if (e.head == head && e.tail == tail && e.len == n) {
                std::memcpy(dst, e.ids, sizeof e.ids);
                return dst + e.count;
            }
        }
        return nullptr;
    }
    void hot_put(uint64_t head, uint64_t tail, size_t n, const uint32_t* ids, size_t count) {  // most recent first
        if (count == 0 || count > kHotIds) return;
        HotSet& set = hot_[hot_index(head, tail)];
        set.way[1] = set.way[0];
        Hot& e = set.way[0];
        e.head = head;
        e.tail = tail;
        e.len = static_cast<uint8_t>(n);
        e.count = static_cast<uint8_t>(count);
        for (size_t k = 0; k < kHotIds; ++k) e.ids[k] = k < count ? ids[k] : 0;
    }

  private:
    // 64 K sets of two: 4 MB. At 16 K sets (1 MB) the 236 K distinct pieces of 20 MB of the shared corpora evicted
    // each other and came back through BytesMap: 2^14 -> 2^16 sets 0.337 -> 0.317 s CPU (cl100k, 20 MB, one thread,
    // best of 5 interleaved fresh processes), 2^17 0.312 s (-1.9% instructions; not worth 8 MB per thread).
    static constexpr int kHotBits = 16;
    struct Hot {
        uint64_t head;
        uint64_t tail;
        uint8_t len;  // 0: empty
        uint8_t count;
        uint32_t ids[kHotIds];
    };
    static_assert(sizeof(Hot) == 32, "two entries a cache line");
    struct alignas(64) HotSet {
        Hot way[2];
    };
    static size_t hot_index(uint64_t head, uint64_t tail) {
        return ((head ^ (tail * 0xC2B2AE3D27D4EB4Full)) * 0x9E3779B97F4A7C15ull) >> (64 - kHotBits);
    }
    std::vector<HotSet> hot_ = std::vector<HotSet>(size_t(1) << kHotBits, HotSet{});
    struct Span {
        uint64_t offset;
        uint64_t count;
    };
    BytesMap keys_{1024};      // piece -> index into spans_
    std::vector<Span> spans_;  // where the piece's ids are in ids_
    std::vector<uint32_t> ids_;
};

// Tried and not kept (measured at 20 MB, best of 6-8 fresh processes interleaved, on the shared 2-core machine at
// load 7-11, ratio against the version without): a table of the vocabulary's tokens of 2-16 bytes keyed by their
// bytes inline, shared by the threads, probed after a hot-table miss instead of BytesMap's two (the "vocab-seeded
// cache"), together with the merge pairs packed into 8-byte slots (21-bit left, right and rank) instead of 16:
// cl100k 1.06x, o200k 1.00x, llama3 0.91x, callgrind +4% instructions (a second probe on every new piece); and a
// prefetch of every pair slot of a new piece before its merge loop: 0.96-1.04x. What bounds a cold run here is the
// 204,567 distinct pieces of the 20 MB that are not tokens (of 236,483 distinct, 4.28 M in all), each merged once.
// Chunk caches kept between calls, one lent to each thread of a call: a cache is never shared by two threads, and
// a warm cache outlives the call (a cold one made a 1 MB batch 1.6x slower).
class CachePool {
  public:
    std::unique_ptr<ChunkCache> acquire();
    void release(std::unique_ptr<ChunkCache> cache);
    void clear();        // the caches not lent out now
    size_t size() const;  // pieces in the caches not lent out now

  private:
    mutable std::mutex mutex_;
    std::vector<std::unique_ptr<ChunkCache>> free_;
};

// A cache borrowed from a pool for one scope.
class CacheLease {
  public:
    explicit CacheLease(CachePool& pool) : pool_(pool), cache_(pool.acquire()) {}
    ~CacheLease() { pool_.release(std::move(cache_)); }
    CacheLease(const CacheLease&) = delete;
    CacheLease& operator=(const CacheLease&) = delete;
    ChunkCache* get() { return cache_.get(); }

  private:
    CachePool& pool_;
    std::unique_ptr<ChunkCache> cache_;
};

// Where a piece failed: a byte of it has no token (the caller names the bytes).
struct BadPiece {
    const uint8_t* data = nullptr;
    size_t size = 0;
};

// The merges of a rank-only vocabulary: every split of a token into two tokens, as (left << 32 | right, id << 32 |
// id). Of tokens with the same bytes, the first in vocab order is the left or right part (as BytesMap keeps the
// first), and the last one's pairs come last (a map filled in this order keeps it: as one filled in vocab order).
std::vector<std::pair<uint64_t, uint64_t>> rank_only_pairs(const std::vector<std::pair<uint32_t, std::string_view>>& vocab);

class Encoder {
  public:
    // vocab: (id, bytes) of the BPE vocabulary (special and added tokens excluded); the bytes are read here only.
    // pair_values: (left << 32 | right) -> rank << 32 | merged id for a merge list; empty with rank_only for
    // a rank-only vocabulary, where a pair merges iff the concatenated bytes are a token (rank == id).
    Encoder(const std::vector<std::pair<uint32_t, std::string_view>>& vocab,
            const std::vector<std::pair<uint64_t, uint64_t>>& pair_values, bool rank_only, bool ignore_merges);

    // Append the ids of one piece to out. Returns false (and fills missing_byte) if a byte has no token.
    bool encode_piece(const uint8_t* p, size_t n, ChunkCache* cache, std::vector<uint32_t>& out,
                      int* missing_byte) const;
    // Split text[0:n] with the hand-written pre-tokenizer `kind` and append the ids of every piece; `ends` is
    // scratch space. Returns false (and fills bad) at the first piece with a byte that has no token.
    bool encode_text(Pretok kind, const uint8_t* text, size_t n, ChunkCache* cache, std::vector<size_t>& ends,
                     std::vector<uint32_t>& out, BadPiece* bad) const;
    // The same into dst, which has room for n + kPieceSlack ids: the end of the ids, or nullptr (bad filled).
    uint32_t* encode_text_to(Pretok kind, const uint8_t* text, size_t n, ChunkCache* cache, uint32_t* dst,
                             BadPiece* bad) const;
    // BPE of the byte tokens of p, no cache and no whole-piece lookup (Tokenizer.encode_piece_bytes).
    bool merge_bytes(const uint8_t* p, size_t n, std::vector<uint32_t>& out, int* missing_byte,
                     MergeStats* stats) const;

    size_t pair_count() const { return pairs_.size(); }
    int64_t byte_id(uint8_t b) const { return byte_ids_[b]; }

  private:
    uint64_t value(uint32_t left, uint32_t right) const {
        const uint64_t* v = pairs_.find(uint64_t(left) << 32 | right);
        return v ? *v : kNoMerge;
    }
    uint32_t* encode_piece_to(const uint8_t* p, size_t n, ChunkCache* cache, uint32_t* dst, int* missing_byte) const;
    uint32_t* merge_bytes_to(const uint8_t* p, size_t n, uint32_t* dst, int* missing_byte) const;
    uint32_t* merge_scan(uint32_t* ids, size_t n, uint32_t* dst) const;

    void merge_heap(const uint32_t* ids, size_t n, std::vector<uint32_t>& out, MergeStats* stats) const;

    int64_t byte_ids_[256];
    BytesMap whole_;         // token bytes -> id (vocab only)
    U64Map<uint64_t> pairs_;  // pair key -> merge value
    bool ignore_merges_;
};

}  // namespace bpe
