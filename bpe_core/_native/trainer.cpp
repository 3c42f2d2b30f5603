#include "trainer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <string>

#include "counts.h"

namespace bpe {

// Measured with BEAM_BPE_TRAIN_STATS=1 (cl100k pieces; P = pair occurrences, D = distinct pairs by the end; peaks
// of `train --from-counts --vocab-size 16384` above `beam-bpe --version`):
// - 20 MB of the shared corpora: 304,126 words, 3.05M bytes, P = 2.75M, D = 508,258 (0.18 P; 32k tokens).
// - all 63 MB of them: 566,371 words, 5.79M bytes, P = 5.22M, D = 733,234 (0.14 P; 32k tokens): 108 MiB peak.
// - the 0.3 GB scale corpus: 1,009,649 words, 8.45M bytes, P = 7.44M, D = 868,019 (0.12 P; 13,723 before the first
//   merge: nearly every pair is made by a merge): 160 MiB peak, at the pair table's last doubling.
// D grows more slowly than P on text (x1.9 P gave x1.4 D), so P / 8 + 65,536 over-counts large natural corpora;
// random synthetic chunks have more (2M chunks of 40 Zipf-weighted letters: D = 0.22 P) and may exceed it.
// Per distinct pair at that peak: a 16 B table slot at load 0.35-0.7 plus the old table while it doubles (58 B per
// pair there), a 16 B heap entry or two, an 8 B word-list pointer: 80 B (79 measured; 118 with 24 B slots).
uint64_t estimate_train_memory(uint64_t n_words, uint64_t n_tokens) {
    uint64_t pair_occurrences = n_tokens > n_words ? n_tokens - n_words : 0;
    uint64_t distinct = std::min<uint64_t>(pair_occurrences, (uint64_t(1) << 16) + pair_occurrences / 8);
    return 4 * n_tokens                // token array
           + 16 * n_words              // start and length, count per word
           + 8 * pair_occurrences      // word lists, with their growth slack and later appends
           + 80 * distinct             // pair table, heap, word-list pointers
           + (uint64_t(64) << 20);     // vocabulary, merges and allocator slack
}

void ChunkTable::add(const int32_t* offsets, const uint8_t* data, const int64_t* counts, size_t n, uint32_t shard,
                     uint32_t num_shards, int64_t min_count) {
    if (static_cast<int64_t>(shard) != shard_) {
        shard_ = shard;
        have_last_ = false;
    }
    for (size_t i = 0; i < n; ++i) {
        const uint8_t* p = data + offsets[i];
        const size_t len = static_cast<size_t>(offsets[i + 1] - offsets[i]);
        const int64_t c = counts[i];
        auto bad = [&](const std::string& what) {
            throw std::invalid_argument("row " + std::to_string(i) + " of this batch: " + what);
        };
        if (c < 0) bad("a negative count");
        if (num_shards > 1 && crc32_of(p, len) % num_shards != shard)
            bad("a chunk hashed to shard " + std::to_string(crc32_of(p, len) % num_shards) + ", not this one");
        if (have_last_ && compare_bytes(last_.data(), last_.size(), p, len) >= 0)
            bad("a chunk out of order or repeated (shards are sorted by chunk, each chunk once)");
        last_.assign(p, p + len);
        have_last_ = true;
        ++rows;
        occurrences += static_cast<uint64_t>(c);
        if (c < min_count) {
            ++low_rows;
            low_occurrences += static_cast<uint64_t>(c);
            continue;
        }
        data_.insert(data_.end(), p, p + len);
        offsets_.push_back(data_.size());
        counts_.push_back(c);
    }
}

void ChunkTable::keep_top(uint64_t max_chunks) {
    if (counts_.size() <= max_chunks) return;
    std::vector<uint32_t> order(counts_.size());
    std::iota(order.begin(), order.end(), 0u);
    auto before = [&](uint32_t a, uint32_t b) {  // more frequent first, then smallest bytes
        if (counts_[a] != counts_[b]) return counts_[a] > counts_[b];
        return compare_bytes(data_.data() + offsets_[a], len(a), data_.data() + offsets_[b], len(b)) < 0;
    };
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(max_chunks), order.end(), before);
    std::vector<uint8_t> keep(counts_.size(), 0);
    for (uint64_t k = 0; k < max_chunks; ++k) keep[order[k]] = 1;
    std::vector<uint32_t>().swap(order);
    size_t out = 0, bytes = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
        const size_t start = offsets_[i], n = len(i);
        if (!keep[i]) {
            ++over_rows;
            over_occurrences += static_cast<uint64_t>(counts_[i]);
            continue;
        }
        std::memmove(data_.data() + bytes, data_.data() + start, n);  // bytes <= start: moves left only
        counts_[out] = counts_[i];
        offsets_[out] = bytes;
        bytes += n;
        ++out;
    }
    counts_.resize(out);
    offsets_.resize(out + 1);
    offsets_[out] = bytes;
    data_.resize(bytes);
}

int64_t ChunkTable::min_count_kept() const {
    return counts_.empty() ? 0 : *std::min_element(counts_.begin(), counts_.end());
}

uint64_t ChunkTable::count_equal(int64_t value) const {
    return static_cast<uint64_t>(std::count(counts_.begin(), counts_.end(), value));
}

std::pair<uint64_t, uint64_t> ChunkTable::train_sizes() const {
    uint64_t words = 0, tokens = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
        if (counts_[i] > 0 && len(i) >= 2) {
            ++words;
            tokens += len(i);
        }
    }
    return {words, tokens};
}

Words ChunkTable::take_words(uint64_t budget) {
    auto [n_words, n_tokens] = train_sizes();
    if (n_words > Words::kMaxWords) throw std::length_error("more than 2**31 - 1 unique chunks");
    Words w;
    w.narrow = Words::fits_narrow(budget);
    w.words.reserve(n_words);
    w.reserve_tokens(n_tokens);
    int64_t total = 0;  // the sum of all pair counts bounds every pair count: check it once for overflow
    for (size_t i = 0; i < counts_.size(); ++i) {
        const size_t n = len(i);
        const int64_t c = counts_[i];
        if (c <= 0 || n < 2) continue;
        int64_t weight;
        if (__builtin_mul_overflow(static_cast<int64_t>(n - 1), c, &weight) ||
            __builtin_add_overflow(total, weight, &total))
            throw std::overflow_error("the chunk counts add up to more than 2**63 pairs");
        if (n > Words::kMaxLen || w.token_count() + n > Words::kMaxStart)
            throw std::overflow_error("the native merge loop takes chunks of at most 16 MiB and 2**40 bytes in all");
        w.words.push_back(Words::Word{w.token_count(), n, c});
        w.append(data_.data() + offsets_[i], n);
    }
    std::vector<uint64_t>(1, 0).swap(offsets_);
    std::vector<uint8_t>().swap(data_);
    std::vector<int64_t>().swap(counts_);
    return w;
}

namespace {

// Whether the sum of every word's pair count fits 48 bits: no pair count ever exceeds it (merges shorten words).
bool counts_fit_packed(const Words& w) {
    int64_t total = 0, weight;
    for (const Words::Word& word : w.words) {
        if (word.len < 2) continue;
        if (__builtin_mul_overflow(static_cast<int64_t>(word.len - 1), word.count, &weight) ||
            __builtin_add_overflow(total, weight, &total))
            return false;
    }
    return total <= kMaxPackedCount;
}

template <class Slot>
TrainOutput run_loop(Words words, TieBreak tie_break, const std::vector<uint32_t>& hf_rank,
                     const std::vector<std::string>& alphabet, uint64_t budget, int64_t min_count,
                     const std::function<void(uint64_t)>& progress) {
    MergeLoop<Slot> loop(std::move(words), tie_break, hf_rank, alphabet);
    loop.run(budget, min_count, progress);
    return TrainOutput{loop.take_merges(), loop.take_token_bytes()};
}

}  // namespace

TrainOutput train_words(Words words, TieBreak tie_break, const std::vector<uint32_t>& hf_rank,
                        const std::vector<std::string>& alphabet, uint64_t budget, int64_t min_count,
                        const std::function<void(uint64_t)>& progress) {
    if (counts_fit_packed(words))
        return run_loop<PackedPairSlot>(std::move(words), tie_break, hf_rank, alphabet, budget, min_count, progress);
    return run_loop<WidePairSlot>(std::move(words), tie_break, hf_rank, alphabet, budget, min_count, progress);
}

template <class Slot>
MergeLoop<Slot>::MergeLoop(Words words, TieBreak tie_break, const std::vector<uint32_t>& hf_rank,
                           const std::vector<std::string>& alphabet)
    : w_(std::move(words)), tie_break_(tie_break), pairs_(1 << 16), bytes_to_id_(1 << 16) {
    if (w_.words.size() > Words::kMaxWords) throw std::length_error("more than 2**31 - 1 words");
    for (int b = 0; b < 256; ++b) hf_rank_[b] = hf_rank.size() == 256 ? hf_rank[b] : static_cast<uint32_t>(b);
    if (alphabet.empty()) {
        for (int b = 0; b < 256; ++b) token_bytes_.emplace_back(1, static_cast<char>(b));
    } else {
        token_bytes_ = alphabet;
    }
    if (token_bytes_.size() > kMaxPairTokens)
        throw std::invalid_argument("the alphabet holds " + std::to_string(token_bytes_.size()) +
                                    " tokens: the native merge loop holds at most 16,777,215 tokens");
    for (uint32_t id = 0; id < token_bytes_.size(); ++id) {
        const std::string& t = token_bytes_[id];
        if (t.empty()) continue;  // an empty or unreachable token owns no bytes (the caller passes it empty)
        if (!bytes_to_id_.insert(reinterpret_cast<const uint8_t*>(t.data()), t.size(), id))
            throw std::invalid_argument("the alphabet holds token id " + std::to_string(id) +
                                        ": the native merge loop holds at most 16,777,215 tokens");
    }
    auto count_pairs = [&](const auto* toks) {
        for (uint32_t wi = 0; wi < w_.words.size(); ++wi) {
            const Words::Word& word = w_.words[wi];
            const auto* t = toks + word.start;
            for (uint32_t i = 0; i + 1 < word.len; ++i) add(uint64_t(t[i]) << 32 | t[i + 1], word.count, wi);
        }
    };
    if (w_.narrow) {
        count_pairs(w_.toks16.data());
    } else {
        count_pairs(w_.toks.data());
    }
    track_grown_ = true;
    heap_.reserve(pairs_.size() * 2);
    pairs_.for_each([&](const Slot& pair) { heap_.push_back(HeapEntry{pair.count(), pair.key()}); });
    auto cmp = [this](const HeapEntry& a, const HeapEntry& b) { return lower_priority(a, b); };
    std::make_heap(heap_.begin(), heap_.end(), cmp);
}

template <class Slot>
uint64_t MergeLoop<Slot>::tie_key(uint64_t key) const {
    if (tie_break_ != TieBreak::kHuggingface) return key;
    uint64_t left = key >> 32, right = key & kIdMask;
    if (left < 256) left = hf_rank_[left];
    if (right < 256) right = hf_rank_[right];
    return left << 32 | right;
}

template <class Slot>
bool MergeLoop<Slot>::lower_priority(const HeapEntry& a, const HeapEntry& b) const {
    if (a.count != b.count) return a.count < b.count;
    if (tie_break_ != TieBreak::kBytes) return tie_key(a.key) > tie_key(b.key);
    // Lexicographic on (left bytes, right bytes); std::string compares bytes as unsigned, as Python does.
    int c = token_bytes_[a.key >> 32].compare(token_bytes_[b.key >> 32]);
    if (c != 0) return c > 0;
    return token_bytes_[a.key & kIdMask].compare(token_bytes_[b.key & kIdMask]) > 0;
}

template <class Slot>
void MergeLoop<Slot>::push(int64_t count, uint64_t key) {
    heap_.push_back(HeapEntry{count, key});
    std::push_heap(heap_.begin(), heap_.end(),
                   [this](const HeapEntry& a, const HeapEntry& b) { return lower_priority(a, b); });
}

template <class Slot>
void MergeLoop<Slot>::add(uint64_t key, int64_t delta, uint32_t word) {
    Slot& pair = pairs_[key];
    pair.set_count(pair.count() + delta);
    if (delta <= 0) return;
    if (track_grown_) grown_.push_back(key);
    if (pair.where == kNoList) {  // the first word: kept in the slot, no list
        pair.where = word;
    } else if (pair.where & kListBit) {
        lists_.push(pair.where & ~kListBit, word);
    } else if (pair.where != word) {
        pair.where = kListBit | lists_.make(pair.where, word);
    }
}

template <class Slot>
void MergeLoop<Slot>::release_list(Slot& pair) {
    if (pair.where != kNoList && (pair.where & kListBit)) lists_.release(pair.where & ~kListBit);
    pair.where = kNoList;
}

// The merge of (left, right) -> new_id in each of `words`, on tokens of type T (uint16_t or uint32_t).
template <class Slot>
template <class T>
void MergeLoop<Slot>::merge_words(T* toks, const uint32_t* words, size_t n_words, uint64_t key, uint32_t new_id) {
    const uint32_t left = static_cast<uint32_t>(key >> 32), right = static_cast<uint32_t>(key & kIdMask);
    auto change = [&](uint32_t a, uint32_t b, int64_t delta, uint32_t wi) {
        uint64_t k = uint64_t(a) << 32 | b;
        if (k != key) add(k, delta, wi);
    };
    // Visiting a word costs two dependent cache misses (its struct, then its tokens): 88% of apply()'s samples in
    // perf on 20 MB of corpus. Prefetching the struct 16 words ahead and the tokens 8 ahead: 3.37 -> 3.16 s and
    // 2.83 -> 2.74 s in alternating runs on a loaded machine (a small gain, kept).
    for (size_t wk = 0; wk < n_words; ++wk) {
        if (wk + 16 < n_words) __builtin_prefetch(&w_.words[words[wk + 16]]);
        if (wk + 8 < n_words) __builtin_prefetch(toks + w_.words[words[wk + 8]].start);
        const uint32_t wi = words[wk];
        Words::Word& word = w_.words[wi];
        T* t = toks + word.start;
        const uint32_t n = static_cast<uint32_t>(word.len);
        const int64_t c = word.count;
        uint32_t i = 0, out = 0;
        while (i < n) {
            if (i + 1 < n && t[i] == left && t[i + 1] == right) {
                if (out > 0) {
                    change(t[out - 1], left, -c, wi);
                    change(t[out - 1], new_id, c, wi);
                }
                if (i + 2 < n) {
                    change(right, t[i + 2], -c, wi);
                    change(new_id, t[i + 2], c, wi);
                }
                t[out++] = static_cast<T>(new_id);
                i += 2;
            } else {
                t[out++] = t[i++];
            }
        }
        word.len = out;
    }
}

// Merge (left, right) -> new_id in every word that holds it. Changes per occurrence, as Hugging Face's
// Word::merge: the pair before loses (prev, left) and gains (prev, new); the pair after loses (right, next) and
// gains (new, next), where prev is already merged and next is not yet, so runs like "a b a b" net out exactly.
template <class Slot>
void MergeLoop<Slot>::apply(uint64_t key, uint32_t new_id) {
    Slot* pair = pairs_.find(key);
    uint32_t one = kNoList;
    WordLists::Taken list(nullptr);
    const uint32_t* words = nullptr;
    size_t n_words = 0;
    if (pair && pair->where != kNoList) {  // detached: the merge adds to other pairs' lists, never to this one
        if (pair->where & kListBit) {
            list = lists_.take(pair->where & ~kListBit);
            words = list.data();
            n_words = list.size();
        } else {
            one = pair->where;
            words = &one;
            n_words = 1;
        }
        pair->where = kNoList;
    }
    if (w_.narrow) {
        merge_words(w_.toks16.data(), words, n_words, key, new_id);
    } else {
        merge_words(w_.toks.data(), words, n_words, key, new_id);
    }
    pair = pairs_.find(key);  // the table may have grown
    if (pair) pair->set_count(0);
    std::sort(grown_.begin(), grown_.end());
    grown_.erase(std::unique(grown_.begin(), grown_.end()), grown_.end());
    for (uint64_t k : grown_) {
        const Slot* p = pairs_.find(k);
        if (p && p->count() > 0) push(p->count(), k);
    }
    grown_.clear();
}

template <class Slot>
void MergeLoop<Slot>::run(uint64_t budget, int64_t min_count, const std::function<void(uint64_t)>& progress) {
    auto cmp = [this](const HeapEntry& a, const HeapEntry& b) { return lower_priority(a, b); };
    uint64_t new_tokens = 0;
    while (new_tokens < budget && !heap_.empty()) {
        std::pop_heap(heap_.begin(), heap_.end(), cmp);
        HeapEntry top = heap_.back();
        heap_.pop_back();
        Slot* pair = pairs_.find(top.key);
        int64_t current = pair ? pair->count() : 0;
        if (current != top.count) {
            if (current > 0) {
                push(current, top.key);
            } else if (pair) {
                release_list(*pair);  // a pair that died: its word list is only stale entries
            }
            continue;
        }
        if (current < min_count) break;
        const uint32_t left = static_cast<uint32_t>(top.key >> 32), right = static_cast<uint32_t>(top.key & kIdMask);
        std::string data = token_bytes_[left] + token_bytes_[right];
        const uint8_t* p = reinterpret_cast<const uint8_t*>(data.data());
        uint32_t new_id = bytes_to_id_.find(p, data.size());
        if (new_id == BytesMap::kMissing) {  // else: the bytes are a token already, reuse its id
            new_id = static_cast<uint32_t>(token_bytes_.size());
            if (w_.narrow && new_id > 0xFFFF)
                throw std::length_error("narrow words were built for a budget that this run exceeds");
            if (new_id >= kMaxPairTokens || !bytes_to_id_.insert(p, data.size(), new_id))
                throw std::length_error("the native merge loop makes at most 16,777,215 tokens; use backend='python'");
            token_bytes_.push_back(std::move(data));
            ++new_tokens;
        }
        uint8_t& seen = merged_[top.key];
        if (!seen) {
            seen = 1;
            merges_.emplace_back(left, right);
        }
        apply(top.key, new_id);
        if (progress && merges_.size() % 1000 == 0) progress(new_tokens);
    }
    if (std::getenv("BEAM_BPE_TRAIN_STATS")) report_memory();
}

template <class Slot>
void MergeLoop<Slot>::report_memory() const {  // where the memory went, to calibrate estimate_train_memory
    std::fprintf(stderr,
                 "merge loop: %zu pairs (table %zu B, %zu B slots), %zu word lists %llu B, heap %zu B, words %zu B\n",
                 pairs_.size(), pairs_.memory_bytes(), sizeof(Slot), lists_.lists(),
                 static_cast<unsigned long long>(lists_.memory_bytes()), heap_.capacity() * sizeof(HeapEntry),
                 w_.toks.capacity() * 4 + w_.toks16.capacity() * 2 + w_.words.capacity() * sizeof(Words::Word));
}

template class MergeLoop<PackedPairSlot>;
template class MergeLoop<WidePairSlot>;

}  // namespace bpe
