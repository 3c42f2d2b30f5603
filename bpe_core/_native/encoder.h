// Byte-level BPE of pre-token pieces: the C++ twin of bpe_core/bpe.py and Tokenizer._encode_piece.
//
// The tables are immutable after construction, so one Encoder serves several threads at once; the chunk cache is
// separate state, one per thread (CachePool keeps them between calls).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pretok.h"
#include "tables.h"

namespace bpe {

// Scan below this many tokens, heap above (as bpe.SCAN_LIMIT; the results are identical either way).
constexpr size_t kScanLimit = 64;
// As tokenizer.CHUNK_CACHE_LIMIT: the cache is cleared when it holds this many pieces.
constexpr size_t kChunkCacheLimit = size_t(1) << 18;

struct MergeStats {
    uint64_t pushes = 0;
    uint64_t pops = 0;
};

class ChunkCache {
  public:
    bool get(const uint8_t* p, size_t n, uint64_t h, std::vector<uint32_t>& out) const;
    void put(const uint8_t* p, size_t n, uint64_t h, const uint32_t* ids, size_t count);
    void clear();
    size_t size() const { return spans_.size(); }

    // Pieces of 2 to 8 bytes that are one token, in a direct-mapped table that stays in L2 (16 bytes a slot, the
    // piece's bytes as the key: exact). Short words are most pieces of text, and the two BytesMap lookups they
    // cost (vocabulary, then cache: two or three cache misses) were the top of the encode profile (find_hashed
    // 33% of encode_batch's samples).
    static uint64_t head_of(const uint8_t* p, size_t n) {
        uint64_t w = 0;
        std::memcpy(&w, p, n);
        return w;
    }
    bool hot_get(uint64_t head, size_t n, uint32_t* id) const {
        const Hot& e = hot_[hot_index(head)];
        if (e.head != head || e.len != n) return false;
        *id = e.id;
        return true;
    }
    void hot_put(uint64_t head, size_t n, uint32_t id) { hot_[hot_index(head)] = Hot{head, uint32_t(n), id}; }

  private:
    static constexpr int kHotBits = 16;
    struct Hot {
        uint64_t head;
        uint32_t len;  // 0: empty
        uint32_t id;
    };
    static size_t hot_index(uint64_t head) { return (head * 0x9E3779B97F4A7C15ull) >> (64 - kHotBits); }
    std::vector<Hot> hot_ = std::vector<Hot>(size_t(1) << kHotBits, Hot{0, 0, 0});
    struct Span {
        uint64_t offset;
        uint64_t count;
    };
    BytesMap keys_{1024};      // piece -> index into spans_
    std::vector<Span> spans_;  // where the piece's ids are in ids_
    std::vector<uint32_t> ids_;
};

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

class Encoder {
  public:
    // vocab: (id, bytes) of the BPE vocabulary (special and added tokens excluded).
    // pair_values: (left << 32 | right) -> rank << 32 | merged id for a merge list; empty with rank_only for
    // a rank-only vocabulary, where a pair merges iff the concatenated bytes are a token (rank == id).
    Encoder(const std::vector<std::pair<uint32_t, std::string>>& vocab,
            const std::vector<std::pair<uint64_t, uint64_t>>& pair_values, bool rank_only, bool ignore_merges);

    // Append the ids of one piece to out. Returns false (and fills missing_byte) if a byte has no token.
    bool encode_piece(const uint8_t* p, size_t n, ChunkCache* cache, std::vector<uint32_t>& out,
                      int* missing_byte) const;
    // Split text[0:n] with the hand-written pre-tokenizer `kind` and append the ids of every piece; `ends` is
    // scratch space. Returns false (and fills bad) at the first piece with a byte that has no token.
    bool encode_text(Pretok kind, const uint8_t* text, size_t n, ChunkCache* cache, std::vector<size_t>& ends,
                     std::vector<uint32_t>& out, BadPiece* bad) const;
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
    void merge_scan(uint32_t* ids, size_t n, std::vector<uint32_t>& out) const;
    void merge_heap(const uint32_t* ids, size_t n, std::vector<uint32_t>& out, MergeStats* stats) const;

    int64_t byte_ids_[256];
    BytesMap whole_;         // token bytes -> id (vocab only)
    U64Map<uint64_t> pairs_;  // pair key -> merge value
    bool ignore_merges_;
};

}  // namespace bpe
