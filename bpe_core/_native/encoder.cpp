#include "encoder.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace bpe {

// ------------------------------------------------------------------------------------------ chunk cache

// Pieces longer than this are not cached: they are rare, and one of them could hold the cache's memory hostage.
constexpr size_t kCacheMaxPiece = 4096;

bool ChunkCache::get(const uint8_t* p, size_t n, uint64_t h, std::vector<uint32_t>& out) const {
    uint32_t i = keys_.find_hashed(p, n, h);
    if (i == BytesMap::kMissing) return false;
    const Span& s = spans_[i];
    out.insert(out.end(), ids_.begin() + s.offset, ids_.begin() + s.offset + s.count);
    return true;
}

void ChunkCache::put(const uint8_t* p, size_t n, uint64_t h, const uint32_t* ids, size_t count) {
    if (n > kCacheMaxPiece) return;
    if (spans_.size() >= kChunkCacheLimit) clear();
    keys_.insert_hashed(p, n, h, static_cast<uint32_t>(spans_.size()));
    spans_.push_back(Span{ids_.size(), count});
    ids_.insert(ids_.end(), ids, ids + count);
}

void ChunkCache::clear() {
    std::fill(hot_.begin(), hot_.end(), HotSet{});
    keys_.clear();
    spans_.clear();
    ids_.clear();
}

// ------------------------------------------------------------------------------------------ cache pool

// Caches kept for later calls: enough for every thread of a machine, not one per thread ever asked for.
constexpr size_t kPoolKeep = 64;

std::unique_ptr<ChunkCache> CachePool::acquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return std::make_unique<ChunkCache>();
    std::unique_ptr<ChunkCache> cache = std::move(free_.back());
    free_.pop_back();
    return cache;
}

void CachePool::release(std::unique_ptr<ChunkCache> cache) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.size() < kPoolKeep) free_.push_back(std::move(cache));
}

void CachePool::clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& cache : free_) cache->clear();
}

size_t CachePool::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t n = 0;
    for (const auto& cache : free_) n += cache->size();
    return n;
}

// ------------------------------------------------------------------------------------------ encoder

Encoder::Encoder(const std::vector<std::pair<uint32_t, std::string>>& vocab,
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
    if (!rank_only) {
        for (const auto& [key, value] : pair_values) pairs_[key] = value;
        return;
    }
    // Rank-only: every split of every token into two tokens is a pair that merges into it, with the token's id
    // as its rank. Precomputed so that the tables stay immutable (RankTable fills a cache on first use instead).
    for (const auto& [id, data] : vocab) {
        const uint8_t* p = reinterpret_cast<const uint8_t*>(data.data());
        for (size_t k = 1; k < data.size(); ++k) {
            uint32_t left = whole_.find(p, k);
            if (left == BytesMap::kMissing) continue;
            uint32_t right = whole_.find(p + k, data.size() - k);
            if (right == BytesMap::kMissing) continue;
            pairs_[uint64_t(left) << 32 | right] = uint64_t(id) << 32 | id;
        }
    }
}

bool Encoder::encode_piece(const uint8_t* p, size_t n, ChunkCache* cache, std::vector<uint32_t>& out,
                           int* missing_byte) const {
    if (n == 0) return true;
    // One byte: its token (the whole-piece lookup would find the same one: both keep the first in vocab order).
    if (n == 1) {
        if (byte_ids_[p[0]] < 0) {
            *missing_byte = p[0];
            return false;
        }
        out.push_back(static_cast<uint32_t>(byte_ids_[p[0]]));
        return true;
    }
    const bool hot = cache && n >= 2 && n <= ChunkCache::kHotMax;
    uint64_t head = 0, tail = 0;
    if (hot) {
        uint32_t id;
        ChunkCache::key_of(p, n, &head, &tail);
        if (cache->hot_get(head, tail, n, &id)) {
            out.push_back(id);
            return true;
        }
    }
    uint64_t h = hash_bytes(p, n);
    if (ignore_merges_) {
        uint32_t whole = whole_.find_hashed(p, n, h);
        if (whole != BytesMap::kMissing) {
            out.push_back(whole);
            if (hot) cache->hot_put(head, tail, n, whole);
            return true;
        }
    }
    size_t start = out.size();
    if (!(cache && cache->get(p, n, h, out))) {
        if (!merge_bytes(p, n, out, missing_byte, nullptr)) return false;
        if (stopped()) return true;  // a partial merge: the caller drops it
        if (cache) cache->put(p, n, h, out.data() + start, out.size() - start);
    }
    if (hot && out.size() == start + 1) cache->hot_put(head, tail, n, out.back());
    return true;
}

bool Encoder::encode_text(Pretok kind, const uint8_t* text, size_t n, ChunkCache* cache, std::vector<size_t>& ends,
                          std::vector<uint32_t>& out, BadPiece* bad) const {
    ends.clear();
    pretok_split(kind, text, n, ends);
    size_t start = 0;
    int missing = -1;
    size_t count = 0;
    for (size_t end : ends) {
        if (++count % kPollPieces == 0 && stop_requested()) return true;  // partial: the caller checks stopped()
        if (!encode_piece(text + start, end - start, cache, out, &missing)) {
            bad->data = text + start;
            bad->size = end - start;
            return false;
        }
        start = end;
    }
    return true;
}

bool Encoder::merge_bytes(const uint8_t* p, size_t n, std::vector<uint32_t>& out, int* missing_byte,
                          MergeStats* stats) const {
    uint32_t small[kScanLimit];
    std::vector<uint32_t> big;
    uint32_t* ids = small;
    if (n > kScanLimit || stats) {
        big.resize(n);
        ids = big.data();
    }
    for (size_t i = 0; i < n; ++i) {
        int64_t id = byte_ids_[p[i]];
        if (id < 0) {
            *missing_byte = p[i];
            return false;
        }
        ids[i] = static_cast<uint32_t>(id);
    }
    if (n < 2) {
        out.insert(out.end(), ids, ids + n);
    } else if (n <= kScanLimit && !stats) {
        merge_scan(ids, n, out);
    } else {
        merge_heap(ids, n, out, stats);
    }
    return true;
}

// Leftmost smallest value, merged until none merges: bpe._merge_scan.
void Encoder::merge_scan(uint32_t* ids, size_t n, std::vector<uint32_t>& out) const {
    uint64_t values[kScanLimit];
    size_t m = n - 1;  // number of pairs
    for (size_t i = 0; i < m; ++i) values[i] = value(ids[i], ids[i + 1]);
    while (m > 0) {
        size_t best_i = 0;
        uint64_t best = values[0];
        for (size_t i = 1; i < m; ++i) {
            if (values[i] < best) {
                best = values[i];
                best_i = i;
            }
        }
        if (best == kNoMerge) break;
        size_t i = best_i;
        ids[i] = static_cast<uint32_t>(best & kIdMask);
        std::memmove(ids + i + 1, ids + i + 2, (m - i - 1) * sizeof(uint32_t));
        std::memmove(values + i, values + i + 1, (m - i - 1) * sizeof(uint64_t));
        --m;
        if (i > 0) values[i - 1] = value(ids[i - 1], ids[i]);
        if (i < m) values[i] = value(ids[i], ids[i + 1]);
    }
    out.insert(out.end(), ids, ids + m + 1);
}

// Heap of (value, position) with lazy invalidation over a doubly linked list: bpe._merge_heap, O(n log n).
void Encoder::merge_heap(const uint32_t* src, size_t n, std::vector<uint32_t>& out, MergeStats* stats) const {
    struct Entry {
        uint64_t value;
        uint64_t pos;
        uint64_t key;
        bool operator>(const Entry& o) const { return value != o.value ? value > o.value : pos > o.pos; }
    };
    constexpr int64_t kGone = -1;
    std::vector<int64_t> toks(src, src + n);
    std::vector<uint32_t> nxt(n), prv(n);
    for (size_t i = 0; i < n; ++i) {
        nxt[i] = static_cast<uint32_t>(i + 1);
        prv[i] = static_cast<uint32_t>(i - 1);  // wraps for i == 0: "none"
    }
    constexpr uint32_t kNone = ~uint32_t(0);
    std::vector<Entry> heap;
    heap.reserve(n);
    for (size_t i = 0; i + 1 < n; ++i) {
        uint64_t key = uint64_t(toks[i]) << 32 | uint64_t(toks[i + 1]);
        uint64_t v = value(static_cast<uint32_t>(toks[i]), static_cast<uint32_t>(toks[i + 1]));
        if (v != kNoMerge) heap.push_back(Entry{v, i, key});
    }
    auto greater = std::greater<Entry>();
    std::make_heap(heap.begin(), heap.end(), greater);
    uint64_t pushes = heap.size(), pops = 0;
    auto push = [&](uint64_t v, size_t pos, uint64_t key) {
        heap.push_back(Entry{v, pos, key});
        std::push_heap(heap.begin(), heap.end(), greater);
        ++pushes;
    };
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), greater);
        Entry e = heap.back();
        heap.pop_back();
        if (++pops % kPollPops == 0 && stop_requested()) break;  // partial: the caller checks stopped()
        size_t i = e.pos;
        size_t j = nxt[i];
        if (toks[i] == kGone || j >= n || (uint64_t(toks[i]) << 32 | uint64_t(toks[j])) != e.key) continue;
        toks[i] = static_cast<int64_t>(e.value & kIdMask);
        toks[j] = kGone;
        size_t k = nxt[j];
        nxt[i] = static_cast<uint32_t>(k);
        if (k < n) prv[k] = static_cast<uint32_t>(i);
        uint32_t p = prv[i];
        if (p != kNone) {
            uint32_t l = static_cast<uint32_t>(toks[p]), r = static_cast<uint32_t>(toks[i]);
            uint64_t v = value(l, r);
            if (v != kNoMerge) push(v, p, uint64_t(l) << 32 | r);
        }
        if (k < n) {
            uint32_t l = static_cast<uint32_t>(toks[i]), r = static_cast<uint32_t>(toks[k]);
            uint64_t v = value(l, r);
            if (v != kNoMerge) push(v, i, uint64_t(l) << 32 | r);
        }
    }
    if (stats) {
        stats->pushes = pushes;
        stats->pops = pops;
    }
    for (size_t i = 0; i < n; ++i)
        if (toks[i] != kGone) out.push_back(static_cast<uint32_t>(toks[i]));
}

}  // namespace bpe
