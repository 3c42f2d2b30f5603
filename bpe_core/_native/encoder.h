// Byte-level BPE of pre-token pieces: the C++ twin of bpe_core/model/merges.py and Tokenizer._encode_piece.
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

#include "cache_pool.h"
#include "literals.h"
#include "piece_table.h"
#include "pretok.h"
#include "tables.h"

namespace bpe {

struct SuperwordTables;  // superword.h
class RunTracker;

// Scan below this many tokens, heap above (as bpe.SCAN_LIMIT; the results are identical either way).
constexpr size_t kScanLimit = 64;
// Room beyond n ids that a piece of n bytes needs in an output buffer (PieceTable::emit stores 4 ids).
constexpr size_t kPieceSlack = PieceTable::kInline;
// The default bound of one worker's cache (the piece table, its spill arena and the long pieces); over it the cache
// is reset to the seed image (Encoder::set_cache_limit).
constexpr size_t kDefaultCacheLimit = size_t(256) << 20;
// As tokenizer.CHUNK_CACHE_LIMIT: the long pieces are dropped when they are this many.
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

// One worker's cache of piece -> ids: the piece table (piece_table.h) for pieces of 1-15 bytes, seeded from its
// Encoder on first use, and a BytesMap of longer pieces (1.2% of pieces on the bench's text). Never shared by two
// threads at once; kept between calls by a CachePool.
class ChunkCache {
  public:
    uint32_t* get(const uint8_t* p, size_t n, uint64_t h, uint32_t* dst) const;  // long pieces: end of the ids, or nullptr
    void put(const uint8_t* p, size_t n, uint64_t h, const uint32_t* ids, size_t count, size_t limit);
    void clear();         // back to the seed image at the next use, long pieces dropped
    size_t size() const;  // pieces cached beyond the seed image
    uint64_t resets() const { return resets_; }

  private:
    friend class Encoder;
    PieceTable table_;
    uint64_t owner_ = 0;   // the serial of the Encoder whose seed image table_ holds (0: none yet)
    size_t seeded_ = 0;    // entries of the seed image
    uint64_t resets_ = 0;  // generational resets (the table or the long pieces dropped at the limit)
    struct Span {
        uint64_t offset;
        uint64_t count;
    };
    BytesMap keys_{1024};      // long piece -> index into spans_
    std::vector<Span> spans_;  // where the piece's ids are in ids_
    std::vector<uint32_t> ids_;
    size_t long_bytes_ = 0;  // bytes of the long pieces and their ids
};

// Tried before the piece table and not kept (issue 15; measured at 20 MB, best of 6-8 fresh processes interleaved,
// on the shared 2-core machine at load 7-11, ratio against the version without): a table of the vocabulary's tokens
// of 2-16 bytes keyed by their bytes inline, shared by the threads, probed after a hot-table miss instead of
// BytesMap's two (a second table, not the seeded per-worker one of piece_table.h), together with the merge pairs packed into 8-byte slots (21-bit left, right and rank) instead of 16:
// cl100k 1.06x, o200k 1.00x, llama3 0.91x, callgrind +4% instructions (a second probe on every new piece); and a
// prefetch of every pair slot of a new piece before its merge loop: 0.96-1.04x. What bounds a cold run here is the
// 204,567 distinct pieces of the 20 MB that are not tokens (of 236,483 distinct, 4.28 M in all), each merged once.
// Chunk caches kept between calls, one lent to each thread of a call: a cache is never shared by two threads, and
// a warm cache outlives the call (a cold one made a 1 MB batch 1.6x slower).
using CachePool = Pool<ChunkCache>;
using CacheLease = Lease<ChunkCache>;

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
    // The pieces text[start, ends[0]), [ends[0], ends[1]), ... (count of them, none empty, ends[count-1] <= n) into
    // dst, which has room for (ends[count-1] - start) + kPieceSlack ids: the end of the ids, or nullptr with bad
    // set to the first piece with a byte that has no token. The entry point of a splitter (README.md).
    uint32_t* encode_pieces_to(const uint8_t* text, size_t n, size_t start, const size_t* ends, size_t count,
                               ChunkCache* cache, uint32_t* dst, BadPiece* bad) const;
    // BPE of the byte tokens of p, no cache and no whole-piece lookup (Tokenizer.encode_piece_bytes).
    bool merge_bytes(const uint8_t* p, size_t n, std::vector<uint32_t>& out, int* missing_byte,
                     MergeStats* stats) const;

    size_t pair_count() const { return pairs_.size(); }
    size_t seed_count() const { return seed_.size(); }
    // The bound of each worker's cache in bytes (never below the seed image's size), and the resets it caused.
    void set_cache_limit(size_t bytes) { cache_limit_.store(bytes, std::memory_order_relaxed); }
    size_t cache_limit() const { return cache_limit_.load(std::memory_order_relaxed); }
    uint64_t cache_resets() const { return resets_.load(std::memory_order_relaxed); }
    int64_t byte_id(uint8_t b) const { return byte_ids_[b]; }
    // Added tokens every text is cut at (literals.h), set once before the encoder is used: encode_text_to then
    // emits a token's id where one is found and splits the text between them as texts of their own. Only for
    // tokens that Python's TokenFinder finds the same way (one leftmost-longest pass over the raw text, no flags:
    // engines.py decides); text that Python already cut at them holds none, so the search is idempotent.
    void set_literals(const std::vector<std::pair<std::string, uint32_t>>& tokens);
    bool has_literals() const { return literals_ != nullptr; }
    // A superword tokenizer's second level (superword.h), set once before the encoder is used: encode_text_to then
    // gives the supermerged ids of each text (the runs of pieces that became one eligible token each merged as they
    // close, in the same output buffer). encode_piece and merge_bytes stay the word level's.
    void set_superword(std::shared_ptr<const SuperwordTables> tables);
    bool has_superword() const { return super_ != nullptr; }

    ~Encoder();

  private:
    // encode_text_to; with `runs` (kSuper), each piece's ids go through the superword level as they are written.
    template <bool kSuper>
    uint32_t* text_to(Pretok kind, const uint8_t* text, size_t n, ChunkCache* cache, uint32_t* dst, BadPiece* bad,
                      RunTracker* runs) const;
    template <bool kSuper>
    uint32_t* encode_plain_to(Pretok kind, const uint8_t* text, size_t n, ChunkCache* cache, uint32_t* dst,
                              BadPiece* bad, RunTracker* runs) const;
    // encode_pieces_to; kTagged: an end with kLiteralTag set is an added token's (literals_), its id in the bits
    // above kLiteralShift, emitted as it is (encode_text_to's batches of pieces across the cuts at added tokens),
    // closing any open run (kSuper).
    template <bool kTagged, bool kSuper>
    uint32_t* pieces_to(const uint8_t* text, size_t n, size_t start, const size_t* ends, size_t count,
                        ChunkCache* cache, uint32_t* dst, BadPiece* bad, RunTracker* runs) const;
    static constexpr size_t kLiteralTag = size_t(1) << 63;
    static constexpr unsigned kLiteralShift = 40;                    // text offsets below 2^40 (1 TiB)
    static constexpr size_t kLiteralPos = (size_t(1) << kLiteralShift) - 1;
    static constexpr uint32_t kLiteralIdMax = (uint32_t(1) << 23) - 1;  // ids in bits 40-62
    uint64_t value(uint32_t left, uint32_t right) const {
        const uint64_t* v = pairs_.find(uint64_t(left) << 32 | right);
        return v ? *v : kNoMerge;
    }
    uint32_t* encode_piece_to(const uint8_t* p, size_t n, ChunkCache* cache, uint32_t* dst, int* missing_byte) const;
    // The ids without a cache: the byte's token, the whole-piece token (ignore_merges) or the merges.
    uint32_t* encode_uncached(const uint8_t* p, size_t n, uint32_t* dst, int* missing_byte) const;
    // What the piece table's fast path leaves: pieces over 15 bytes, keys displaced along their probe run, spilled
    // ids, and misses (merged, then inserted where the probe stopped).
    uint32_t* encode_slow(const uint8_t* p, size_t n, PieceKey k, uint64_t h, ChunkCache* cache, uint32_t* dst,
                          int* missing_byte) const;
    uint32_t* encode_long(const uint8_t* p, size_t n, ChunkCache* cache, uint32_t* dst, int* missing_byte) const;
    void attach(ChunkCache* cache) const;
    void seed(const std::vector<std::pair<uint32_t, std::string_view>>& vocab);
    uint32_t* merge_bytes_to(const uint8_t* p, size_t n, uint32_t* dst, int* missing_byte) const;
    // The pair lookup of the merge kernels (merge_kernels.h, shared with the superword level).
    auto pair_value() const {
        return [this](uint32_t left, uint32_t right) { return value(left, right); };
    }

    int64_t byte_ids_[256];
    BytesMap whole_;         // token bytes -> id (vocab only)
    // The merge value of every byte pair (256 x 256, 512 KB: L2-resident): the first values of every new piece
    // without a pair-table lookup each (those are dependent cache misses in the 8-16 MB pair table).
    std::unique_ptr<uint64_t[]> byte_pairs_;
    PieceTable seed_;         // the seed image: every vocabulary entry of 1-15 bytes -> what encode_uncached gives
    uint64_t serial_;         // unique per Encoder (ChunkCache::owner_)
    std::atomic<size_t> cache_limit_{kDefaultCacheLimit};
    mutable std::atomic<uint64_t> resets_{0};
    U64Map<uint64_t> pairs_;  // pair key -> merge value
    bool ignore_merges_;
    std::unique_ptr<Literals> literals_;
    std::shared_ptr<const SuperwordTables> super_;
};

}  // namespace bpe
