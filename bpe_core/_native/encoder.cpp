#include "encoder.h"
#include "merge_kernels.h"
#include "pretok_blocks.h"
#include "superword.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace bpe {

// ------------------------------------------------------------------------------------------ chunk cache

// Pieces longer than this are not cached: they are rare, and one of them could hold the cache's memory hostage.
constexpr size_t kCacheMaxPiece = 4096;

uint32_t* ChunkCache::get(const uint8_t* p, size_t n, uint64_t h, uint32_t* dst) const {
    uint32_t i = keys_.find_hashed(p, n, h);
    if (i == BytesMap::kMissing) return nullptr;
    const Span& s = spans_[i];
    std::memcpy(dst, ids_.data() + s.offset, s.count * sizeof(uint32_t));
    return dst + s.count;
}

void ChunkCache::put(const uint8_t* p, size_t n, uint64_t h, const uint32_t* ids, size_t count, size_t limit) {
    if (n > kCacheMaxPiece) return;
    const size_t bytes = n + 48 + count * sizeof(uint32_t);  // the key, its entry and index slots, the ids
    if (spans_.size() >= kChunkCacheLimit || long_bytes_ + bytes > limit / 4) {
        keys_.clear();
        spans_.clear();
        ids_.clear();
        long_bytes_ = 0;
        ++resets_;
    }
    keys_.insert_hashed(p, n, h, static_cast<uint32_t>(spans_.size()));
    spans_.push_back(Span{ids_.size(), count});
    ids_.insert(ids_.end(), ids, ids + count);
    long_bytes_ += bytes;
}

void ChunkCache::clear() {
    owner_ = 0;
    keys_.clear();
    spans_.clear();
    ids_.clear();
    long_bytes_ = 0;
}

size_t ChunkCache::size() const { return (owner_ ? table_.size() - seeded_ : 0) + spans_.size(); }

// ------------------------------------------------------------------------------------------ encoder

Encoder::Encoder(const std::vector<std::pair<uint32_t, std::string_view>>& vocab,
                 const std::vector<std::pair<uint64_t, uint64_t>>& pair_values, bool rank_only, bool ignore_merges)
    : whole_(vocab.size()), pairs_(rank_only ? vocab.size() * 2 : pair_values.size()), ignore_merges_(ignore_merges) {
    for (int b = 0; b < 256; ++b) byte_ids_[b] = -1;
    for (const auto& [id, data] : vocab) {
        if (!whole_.insert(reinterpret_cast<const uint8_t*>(data.data()), data.size(), id))
            throw std::length_error("the native encoder takes at most 16,777,215 tokens; use backend='python'");
        if (data.size() == 1) {
            int b = static_cast<uint8_t>(data[0]);
            if (byte_ids_[b] < 0) byte_ids_[b] = id;
        }
    }
    static std::atomic<uint64_t> serials{0};
    serial_ = ++serials;
    if (!rank_only) {
        for (const auto& [key, value] : pair_values) pairs_[key] = value;
        seed(vocab);
        return;
    }
    // Rank-only: every split of every token into two tokens is a pair that merges into it, with the token's id
    // as its rank. Precomputed so that the tables stay immutable (RankTable fills a cache on first use instead).
    std::vector<std::pair<uint64_t, uint64_t>> pairs = rank_only_pairs(vocab);
    for (size_t i = 0; i < pairs.size(); ++i) {
        if (i + 8 < pairs.size()) pairs_.prefetch(pairs[i + 8].first);
        pairs_[pairs[i].first] = pairs[i].second;
    }
    seed(vocab);
}

// The seed image: every vocabulary entry of 1-15 bytes with the ids the encoder gives that piece (the token itself
// for rank files and ignore_merges vocabularies, tiktoken's whole-piece rule; the merges' result for a merge list,
// which is not always the token). Then only pieces that are not tokens ever miss in a worker's table.
void Encoder::seed(const std::vector<std::pair<uint32_t, std::string_view>>& vocab) {
    byte_pairs_.reset(new uint64_t[256 * 256]);
    for (int a = 0; a < 256; ++a)
        for (int b = 0; b < 256; ++b)
            byte_pairs_[a << 8 | b] = byte_ids_[a] >= 0 && byte_ids_[b] >= 0
                                          ? value(static_cast<uint32_t>(byte_ids_[a]), static_cast<uint32_t>(byte_ids_[b]))
                                          : kNoMerge;
    size_t short_tokens = 0;
    for (const auto& token : vocab) short_tokens += token.second.size() - 1 < kPieceMax;
    seed_ = PieceTable(short_tokens);
    uint32_t ids[kPieceMax + kPieceSlack];
    for (const auto& [id, data] : vocab) {
        const size_t n = data.size();
        if (n == 0 || n > kPieceMax) continue;
        const uint8_t* p = reinterpret_cast<const uint8_t*>(data.data());
        int missing = -1;
        uint32_t* end = encode_uncached(p, n, ids, &missing);
        if (!end) continue;  // a token with a byte that has no token of its own: only its whole piece could say
        PieceKey k = piece_key(p, n);
        if (!seed_.insert(k, piece_hash(k), ids, static_cast<size_t>(end - ids))) {
            seed_.grow();
            seed_.insert(k, piece_hash(k), ids, static_cast<size_t>(end - ids));
        }
    }
}

namespace {

// A token that is a part of another: its id and length.
struct Part {
    uint32_t id;
    uint32_t size;
};

// Keys in sorted order, each with the chain of keys that are proper, non-empty prefixes of it, shortest first:
// visit(index, size, parts, count) for each key. Every prefix of a key sorts before it, and a stack of keys that are
// prefixes of one another, popped to the current key's prefixes, holds them all (a prefix p of key s is a prefix
// of every key between p and s). Of equal keys, the one with the lowest index is the part; equal keys are visited
// by increasing index. ahead(near, far) is called with the keys visited kAhead and 2 * kAhead keys later (to
// prefetch what their visits read). No hashing: the two table lookups per split point of every token (cache misses) made
// o200k's rank-only build take 1.4 s.
constexpr size_t kAhead = 8;

template <class Visit, class Ahead>
void walk_prefixes(const std::vector<std::string_view>& keys, const std::vector<uint32_t>& ids, Visit&& visit,
                   Ahead&& ahead) {
    // Sorted by (bytes, index), compared by their first 8 bytes as a big-endian number (zero-padded) first: a
    // memcmp per comparison was half of the time.
    struct Item {
        uint64_t head;
        uint32_t index;
        uint32_t size;
    };
    std::vector<Item> order(keys.size());
    for (size_t i = 0; i < order.size(); ++i) {
        uint8_t buf[8] = {0};
        std::memcpy(buf, keys[i].data(), std::min<size_t>(8, keys[i].size()));
        uint64_t head = 0;
        for (uint8_t b : buf) head = head << 8 | b;
        order[i] = Item{head, static_cast<uint32_t>(i), static_cast<uint32_t>(keys[i].size())};
    }
    // A stable radix sort by head (16 bits a pass; the items start in index order), then each run of equal heads
    // by the rest of the key and the index: std::sort's comparisons were a third of the time.
    {
        std::vector<Item> sorted(order.size());
        std::vector<uint32_t> start(size_t(1) << 16);
        for (int shift = 0; shift < 64; shift += 16) {
            std::fill(start.begin(), start.end(), 0u);
            for (const Item& item : order) ++start[(item.head >> shift) & 0xFFFF];
            if (start[order.empty() ? 0 : (order[0].head >> shift) & 0xFFFF] == order.size()) continue;  // one digit
            uint32_t sum = 0;
            for (uint32_t& c : start) {
                uint32_t count = c;
                c = sum;
                sum += count;
            }
            for (const Item& item : order) sorted[start[(item.head >> shift) & 0xFFFF]++] = item;
            order.swap(sorted);
        }
    }
    auto less = [&](const Item& a, const Item& b) {
        if (a.head != b.head) return a.head < b.head;
        int c = a.size > 8 && b.size > 8 ? keys[a.index].substr(8).compare(keys[b.index].substr(8))
                                         : int(a.size) - int(b.size);
        return c != 0 ? c < 0 : a.index < b.index;
    };
    for (size_t i = 0, j; i < order.size(); i = j) {
        for (j = i + 1; j < order.size() && order[j].head == order[i].head;) ++j;
        if (j - i > 1) std::sort(order.begin() + i, order.begin() + j, less);
    }
    auto is_prefix = [&](const Item& e, const Item& s) {  // key e a prefix of key s
        size_t n = e.size;
        if (n > s.size) return false;
        if (n == 0) return true;
        if (n < 8) return ((e.head ^ s.head) >> (64 - 8 * n)) == 0;
        return e.head == s.head && std::memcmp(keys[e.index].data() + 8, keys[s.index].data() + 8, n - 8) == 0;
    };
    std::vector<const Item*> stack;  // keys that are prefixes of one another, shortest first; one of equal keys
    std::vector<Part> parts;
    for (size_t i = 0; i < order.size(); ++i) {
        const Item& item = order[i];
        if (i + 2 * kAhead < order.size()) ahead(order[i + kAhead].index, order[i + 2 * kAhead].index);
        while (!stack.empty() && !is_prefix(*stack.back(), item)) stack.pop_back();
        parts.clear();
        for (const Item* e : stack)
            if (e->size > 0 && e->size < item.size) parts.push_back(Part{ids[e->index], e->size});
        visit(item.index, item.size, parts.data(), parts.size());
        if (stack.empty() || stack.back()->size < item.size) stack.push_back(&item);  // the first of equal keys
    }
}

}  // namespace

std::vector<std::pair<uint64_t, uint64_t>> rank_only_pairs(const std::vector<std::pair<uint32_t, std::string_view>>& vocab) {
    size_t n = vocab.size();
    std::vector<std::string_view> keys(n);
    std::vector<uint32_t> ids(n);
    size_t total = 0;
    for (const auto& token : vocab) total += token.second.size();
    // Filled by pointer: append(rbegin, rend) went a character at a time through _M_replace (22 M of the 184 M
    // instructions of cl100k's build, callgrind).
    std::unique_ptr<char[]> reversed_arena(new char[std::max<size_t>(total, 1)]);
    for (size_t i = 0, at = 0; i < n; ++i) {
        keys[i] = vocab[i].second;
        ids[i] = vocab[i].first;
        std::reverse_copy(vocab[i].second.begin(), vocab[i].second.end(), reversed_arena.get() + at);
        at += vocab[i].second.size();
    }
    // The left parts of each token (its token prefixes), shortest first: lefts[left_of[t].first, .second).
    std::vector<Part> lefts;
    std::vector<std::pair<uint32_t, uint32_t>> left_of(n);
    walk_prefixes(keys, ids, [&](uint32_t t, uint32_t, const Part* parts, size_t count) {
        left_of[t] = {static_cast<uint32_t>(lefts.size()), static_cast<uint32_t>(lefts.size() + count)};
        lefts.insert(lefts.end(), parts, parts + count);
    }, [](uint32_t, uint32_t) {});
    for (size_t i = 0, offset = 0; i < n; offset += keys[i].size(), ++i)
        keys[i] = std::string_view(reversed_arena.get() + offset, keys[i].size());
    // Then the right parts (prefixes of the reversed keys), joined with the left parts on the split point.
    std::vector<std::pair<uint64_t, uint64_t>> pairs;
    walk_prefixes(keys, ids, [&](uint32_t t, uint32_t size, const Part* rights, size_t count) {
        // Split points: a left part's length, increasing; a right part's, decreasing (walked from its end).
        uint32_t l = left_of[t].first, r = static_cast<uint32_t>(count);
        while (l < left_of[t].second && r > 0) {
            uint32_t left_size = lefts[l].size, split = size - rights[r - 1].size;
            if (left_size < split) {
                ++l;
            } else if (left_size > split) {
                --r;
            } else {
                uint64_t id = ids[t];
                pairs.emplace_back(uint64_t(lefts[l].id) << 32 | rights[r - 1].id, id << 32 | id);
                ++l;
                --r;
            }
        }
    }, [&](uint32_t near, uint32_t far) {  // the visit's two reads at random: where the left parts are, and they
        __builtin_prefetch(&left_of[far]);
        __builtin_prefetch(&lefts[left_of[near].first]);
    });
    return pairs;
}

uint32_t* Encoder::encode_uncached(const uint8_t* p, size_t n, uint32_t* dst, int* missing_byte) const {
    if (n == 0) return dst;
    // One byte: its token (the whole-piece lookup would find the same one: both keep the first in vocab order).
    if (n == 1) {
        if (byte_ids_[p[0]] < 0) {
            *missing_byte = p[0];
            return nullptr;
        }
        *dst = static_cast<uint32_t>(byte_ids_[p[0]]);
        return dst + 1;
    }
    if (ignore_merges_) {
        uint32_t whole = whole_.find(p, n);
        if (whole != BytesMap::kMissing) {
            *dst = whole;
            return dst + 1;
        }
    }
    return merge_bytes_to(p, n, dst, missing_byte);
}

void Encoder::attach(ChunkCache* cache) const {
    if (cache->owner_ == serial_) return;
    cache->table_.copy_from(seed_);
    cache->seeded_ = seed_.size();
    cache->owner_ = serial_;
}

// Pieces of more than 15 bytes: the whole-piece lookup, then the BytesMap cache, then the merges.
uint32_t* Encoder::encode_long(const uint8_t* p, size_t n, ChunkCache* cache, uint32_t* dst, int* missing_byte) const {
    uint64_t h = hash_bytes(p, n);
    if (ignore_merges_) {
        uint32_t whole = whole_.find_hashed(p, n, h);
        if (whole != BytesMap::kMissing) {
            *dst = whole;
            return dst + 1;
        }
    }
    if (uint32_t* end = cache->get(p, n, h, dst)) return end;
    uint32_t* end = merge_bytes_to(p, n, dst, missing_byte);
    if (!end || stopped()) return end;  // a partial merge: the caller drops it
    cache->put(p, n, h, dst, static_cast<size_t>(end - dst), std::max(cache_limit(), seed_.bytes()));
    return end;
}

uint32_t* Encoder::encode_slow(const uint8_t* p, size_t n, PieceKey k, uint64_t h, ChunkCache* cache, uint32_t* dst,
                               int* missing_byte) const {
    if (n > kPieceMax) return encode_long(p, n, cache, dst, missing_byte);
    if (n == 0) return dst;
    PieceTable& table = cache->table_;
    size_t free_slot = 0;
    if (uint32_t* end = table.find(k, h, dst, &free_slot)) return end;
    uint32_t* end = merge_bytes_to(p, n, dst, missing_byte);  // not a token (every token is seeded): merge
    if (!end || stopped()) return end;
    const size_t count = static_cast<size_t>(end - dst);
    if (table.insert_at(free_slot, k, dst, count)) return end;
    // Full (3/4 load): double it while the doubled table stays within the limit, else back to the seed image.
    if (table.bytes_if_grown() + cache->long_bytes_ <= std::max(cache_limit(), seed_.bytes())) {
        table.grow();
    } else {
        table.copy_from(seed_);
        ++cache->resets_;
        resets_.fetch_add(1, std::memory_order_relaxed);
    }
    table.insert(k, h, dst, count);
    return end;
}

bool Encoder::encode_piece(const uint8_t* p, size_t n, ChunkCache* cache, std::vector<uint32_t>& out,
                           int* missing_byte) const {
    size_t k = out.size();
    out.resize(k + n + kPieceSlack);
    uint32_t* end = encode_piece_to(p, n, cache, out.data() + k, missing_byte);
    out.resize(end ? static_cast<size_t>(end - out.data()) : k);
    return end != nullptr;
}

// Output straight into the caller's buffer, which has room for n + kPieceSlack ids (a piece of n bytes has at most n
// tokens; the slack lets a hit store 4 ids unconditionally): per-piece vector appends (a capacity check and, for
// several ids, a memmove call each) were 12% of a warm encode's instructions.
uint32_t* Encoder::encode_piece_to(const uint8_t* p, size_t n, ChunkCache* cache, uint32_t* dst,
                                   int* missing_byte) const {
    if (!cache) return encode_uncached(p, n, dst, missing_byte);
    attach(cache);
    if (n == 0 || n > kPieceMax) return encode_slow(p, n, PieceKey{0, 0}, 0, cache, dst, missing_byte);
    const PieceKey k = piece_key(p, n);
    const uint64_t h = piece_hash(k);
    if (uint32_t* end = cache->table_.emit(k, h, dst)) return end;
    return encode_slow(p, n, k, h, cache, dst, missing_byte);
}

bool Encoder::encode_text(Pretok kind, const uint8_t* text, size_t n, ChunkCache* cache, std::vector<size_t>&,
                          std::vector<uint32_t>& out, BadPiece* bad) const {
    const size_t base = out.size();
    out.resize(base + n + kPieceSlack);  // tokens <= bytes: no capacity check per piece
    uint32_t* end = encode_text_to(kind, text, n, cache, out.data() + base, bad);
    out.resize(end ? static_cast<size_t>(end - out.data()) : base);
    return end != nullptr;
}

void Encoder::set_literals(const std::vector<std::pair<std::string, uint32_t>>& tokens) {
    literals_ = std::make_unique<Literals>(tokens);
    if (literals_->empty()) {
        literals_.reset();
        return;
    }
    // Each token of 1-15 bytes also goes into the seed image under its tagged key (its bytes' key with
    // PieceTable::kTagBit), its id alone: encode_text_to's tagged ends key it so, and the piece table's fast path
    // emits it like any piece (a tagged end that misses takes the slow branch: one mispredict a token).
    for (const auto& [bytes, id] : tokens) {
        if (bytes.empty() || bytes.size() > kPieceMax || id > kLiteralIdMax) continue;
        PieceKey k = piece_key(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
        k.hi |= PieceTable::kTagBit;
        if (!seed_.insert(k, piece_hash(k), &id, 1)) {  // (the first of two equal tokens stays, as in literals_)
            seed_.grow();
            seed_.insert(k, piece_hash(k), &id, 1);
        }
    }
}

// The pieces a batch of kSplitBatch at a time (pretok_blocks_split_some: the 64-byte block splitter, its scalar
// fallback pretok_split_some), each batch through encode_pieces_to.
// With added tokens (literals_): the text before each is split as a text of its own, and its pieces and the token
// go into the same batch, the token as a tagged end (pieces_to<true>), so that text cut into many short segments
// (mpt's runs of spaces: a cut in every indented line of code) still reaches the piece table a full batch at a time
// (per segment, the short batches' loop exits were half of mpt's branch mispredicts).
uint32_t* Encoder::encode_text_to(Pretok kind, const uint8_t* text, size_t n, ChunkCache* cache, uint32_t* dst,
                                  BadPiece* bad) const {
    if (!super_) return text_to<false>(kind, text, n, cache, dst, bad, nullptr);
    RunTracker runs(*super_);
    uint32_t* end = text_to<true>(kind, text, n, cache, dst, bad, &runs);
    return end ? runs.close(end, end) : nullptr;
}

Encoder::~Encoder() = default;

void Encoder::set_superword(std::shared_ptr<const SuperwordTables> tables) { super_ = std::move(tables); }

template <bool kSuper>
uint32_t* Encoder::text_to(Pretok kind, const uint8_t* text, size_t n, ChunkCache* cache, uint32_t* dst,
                           BadPiece* bad, RunTracker* runs) const {
    if (!literals_) return encode_plain_to<kSuper>(kind, text, n, cache, dst, bad, runs);
    size_t ends[kSplitBatch];
    size_t k = 0, batch_start = 0;
    auto flush = [&]() -> bool {
        if (k) {
            dst = pieces_to<true, kSuper>(text, n, batch_start, ends, k, cache, dst, bad, runs);
            if (!dst) return false;
            batch_start = ends[k - 1] & kLiteralPos;
            k = 0;
        }
        return true;
    };
    const bool tagged = n <= kLiteralPos;
    size_t pos = 0, a, b;
    uint32_t id;
    for (;;) {
        const bool found = literals_->next(text, n, pos, &a, &b, &id);
        if (!found) a = b = n, id = 0;
        if (!tagged || id > kLiteralIdMax) {  // (a text of 1 TiB, an id past 2^23): the segment alone
            if (!flush()) return nullptr;
            if (a > pos) {
                dst = encode_plain_to<kSuper>(kind, text + pos, a - pos, cache, dst, bad, runs);
                if (!dst || stopped()) return dst;
            }
            if (!found) return dst;
            if constexpr (kSuper) dst = runs->close(dst, dst);  // an added token ends a run
            *dst++ = id;
            pos = batch_start = b;
            continue;
        }
        // the segment [pos, a) as a text that ends at a (no pattern looks behind where it starts)
        for (size_t q = pos; q < a;) {
            if (kSplitBatch - k < 65) {  // room for a whole block's pieces and a token
                if (!flush()) return nullptr;
                if (stop_requested()) return dst;  // partial: the caller checks stopped()
            }
            k += pretok_blocks_split_some(kind, text, a, &q, ends + k, kSplitBatch - 1 - k);
        }
        if (!found) break;
        if (k == kSplitBatch && !flush()) return nullptr;  // (tokens back to back: no segment made room)
        ends[k++] = kLiteralTag | size_t(id) << kLiteralShift | b;
        pos = b;
    }
    if (!flush()) return nullptr;
    return dst;
}

template <bool kSuper>
uint32_t* Encoder::encode_plain_to(Pretok kind, const uint8_t* text, size_t n, ChunkCache* cache, uint32_t* dst,
                                   BadPiece* bad, RunTracker* runs) const {
    size_t ends[kSplitBatch];
    size_t pos = 0;
    while (pos < n) {
        const size_t start = pos;
        const size_t k = pretok_blocks_split_some(kind, text, n, &pos, ends, kSplitBatch);
        dst = pieces_to<false, kSuper>(text, n, start, ends, k, cache, dst, bad, runs);
        if (!dst) return nullptr;
        if (pos < n && stop_requested()) break;  // partial: the caller checks stopped()
    }
    return dst;
}

namespace {

// A keyed piece of a batch: its key and hash (the key {0, 0} for pieces the table does not hold: it never
// matches a slot with ids, so they take the slow path without a branch of their own).
struct Keyed {
    PieceKey k;
    uint64_t h;
    const PieceTable::Slot* line;
};

// How far ahead the probe loop pulls a piece's line into L1 (the batch's keying pass pulled it toward L2).
constexpr size_t kProbeAhead = 16;

}  // namespace

// The piece table's loop, in two passes over a batch of up to kSplitBatch pieces (GigaToken's phase B and probe
// loop, keyed in a separate pass here): keys, hashes and a prefetch of every piece's line; then a branch-free probe
// per piece with the line of the piece kProbeAhead ahead prefetched, the rest out of line (encode_slow).
uint32_t* Encoder::encode_pieces_to(const uint8_t* text, size_t n, size_t start, const size_t* ends, size_t count,
                                    ChunkCache* cache, uint32_t* dst, BadPiece* bad) const {
    return pieces_to<false, false>(text, n, start, ends, count, cache, dst, bad, nullptr);
}

template <bool kTagged, bool kSuper>
uint32_t* Encoder::pieces_to(const uint8_t* text, size_t n, size_t start, const size_t* ends, size_t count,
                             ChunkCache* cache, uint32_t* dst, BadPiece* bad, RunTracker* runs) const {
    // An end's offset, and whether it is an added token's (kTagged: its id above kLiteralShift).
    auto at = [](size_t e) { return kTagged ? e & kLiteralPos : e; };
    auto literal = [](size_t e) { return kTagged && (e & kLiteralTag); };
    auto literal_id = [](size_t e) { return uint32_t((e & ~kLiteralTag) >> kLiteralShift); };
    int missing = -1;
    RunTracker::State run;  // (kSuper) the open run, in locals for the loop
    if constexpr (kSuper) run = runs->state();
    if (!cache) {
        for (size_t j = 0; j < count; start = at(ends[j]), ++j) {
            if (literal(ends[j])) {
                if constexpr (kSuper) dst = runs->close(run, dst, dst);
                *dst++ = literal_id(ends[j]);
                continue;
            }
            uint32_t* next = encode_uncached(text + start, ends[j] - start, dst, &missing);
            if (!next) {
                *bad = BadPiece{text + start, ends[j] - start};
                return nullptr;
            }
            if constexpr (kSuper) next = runs->piece(run, dst, next);
            dst = next;
        }
        if constexpr (kSuper) runs->save(run);
        return dst;
    }
    attach(cache);
    Keyed keyed[kSplitBatch];
    for (size_t base = 0; base < count; base += kSplitBatch) {
        PieceTable::View table = cache->table_.view();
        const size_t m = std::min(kSplitBatch, count - base);
        const size_t* e = ends + base;
        size_t s = start;
        for (size_t j = 0; j < m; s = at(e[j]), ++j) {
            const size_t len = at(e[j]) - s;
            const bool short_piece = len - 1 < kPieceMax;  // 1-15 bytes
            PieceKey k = s + 16 <= n ? piece_key_wide(text + s, short_piece ? len : 0)
                                     : (short_piece ? piece_key(text + s, len) : PieceKey{0, 0});
            const uint64_t keep = short_piece ? ~uint64_t(0) : 0;
            k.lo &= keep;
            k.hi &= keep;
            if (kTagged) k.hi |= literal(e[j]) && short_piece ? PieceTable::kTagBit : 0;  // an added token's key
            const uint64_t h = piece_hash(k);
            const PieceTable::Slot* line = table.line(h);
            __builtin_prefetch(line, 0, 2);
            keyed[j] = Keyed{k, h, line};
        }
        s = start;
        for (size_t j = 0; j < m; s = at(e[j]), ++j) {
            if (j + kProbeAhead < m) __builtin_prefetch(keyed[j + kProbeAhead].line, 0, 3);
            if (uint32_t* next = PieceTable::emit(keyed[j].line, keyed[j].k, dst)) {
                if constexpr (kSuper) {  // (an added token's tagged key: never one of a run's tokens)
                    if (literal(e[j])) next = runs->close(run, dst, next);
                    else next = runs->piece(run, dst, next);
                }
                dst = next;
                continue;
            }
            if (literal(e[j])) {  // over 15 bytes, or its key's slot displaced
                if constexpr (kSuper) dst = runs->close(run, dst, dst);
                *dst++ = literal_id(e[j]);
                continue;
            }
            uint32_t* next = encode_slow(text + s, e[j] - s, keyed[j].k, keyed[j].h, cache, dst, &missing);
            if (!next) {
                *bad = BadPiece{text + s, e[j] - s};
                return nullptr;
            }
            if constexpr (kSuper) next = runs->piece(run, dst, next);
            dst = next;
            if (__builtin_expect(cache->table_.view().slots != table.slots, 0)) {  // it grew: the lines moved
                table = cache->table_.view();
                for (size_t i = j + 1; i < m; ++i) keyed[i].line = table.line(keyed[i].h);
            }
        }
        start = at(e[m - 1]);
    }
    if constexpr (kSuper) runs->save(run);
    return dst;
}

bool Encoder::merge_bytes(const uint8_t* p, size_t n, std::vector<uint32_t>& out, int* missing_byte,
                          MergeStats* stats) const {
    if (!stats) {
        size_t k = out.size();
        out.resize(k + n + kPieceSlack);
        uint32_t* end = merge_bytes_to(p, n, out.data() + k, missing_byte);
        out.resize(end ? static_cast<size_t>(end - out.data()) : k);
        return end != nullptr;
    }
    std::vector<uint32_t> ids(n);
    for (size_t i = 0; i < n; ++i) {
        int64_t id = byte_ids_[p[i]];
        if (id < 0) {
            *missing_byte = p[i];
            return false;
        }
        ids[i] = static_cast<uint32_t>(id);
    }
    if (n < 2) {
        out.insert(out.end(), ids.begin(), ids.end());
    } else {
        bpe::merge_heap(ids.data(), n, pair_value(), out, stats);
    }
    return true;
}

uint32_t* Encoder::merge_bytes_to(const uint8_t* p, size_t n, uint32_t* dst, int* missing_byte) const {
    uint32_t small[kScanLimit];
    std::vector<uint32_t> big;
    uint32_t* ids = small;
    if (n > kScanLimit) {
        big.resize(n);
        ids = big.data();
    }
    for (size_t i = 0; i < n; ++i) {
        int64_t id = byte_ids_[p[i]];
        if (id < 0) {
            *missing_byte = p[i];
            return nullptr;
        }
        ids[i] = static_cast<uint32_t>(id);
    }
    if (n < 2) {
        std::memcpy(dst, ids, n * sizeof(uint32_t));
        return dst + n;
    }
    if (n <= kScanLimit) {
        uint64_t values[kScanLimit];
        for (size_t i = 0; i + 1 < n; ++i) values[i] = byte_pairs_[size_t(p[i]) << 8 | p[i + 1]];
        const size_t m = bpe::merge_scan(ids, values, n, pair_value());
        std::memcpy(dst, ids, m * sizeof(uint32_t));
        return dst + m;
    }
    std::vector<uint32_t> merged;
    bpe::merge_heap(ids, n, pair_value(), merged, nullptr);
    std::memcpy(dst, merged.data(), merged.size() * sizeof(uint32_t));
    return dst + merged.size();
}

}  // namespace bpe
