// SentencePiece-style BPE: see spm.h.
#include "spm.h"

#include <algorithm>
#include <cstring>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace bpe {

namespace {
constexpr uint32_t kMaxCodePoint = 0x110000;
constexpr char kSpace[] = "\xe2\x96\x81";  // U+2581
constexpr size_t kCacheBytes = size_t(1) << 28;  // a word table's text (and its ids' bytes) before it restarts
constexpr size_t kShortWordBytes = size_t(1) << 28;  // a short-word table's slots before it restarts
constexpr size_t kPad = 16;  // zero bytes after a normalized text: a 16-byte load at any of its words is readable
constexpr uint64_t kNoPair = ~uint64_t(0);  // no merge: the highest priority there is
constexpr size_t kScanSymbols = 32;  // words of more symbols merge through the priority queue
constexpr size_t kKeepBuffer = size_t(64) << 20;  // a thread's normalized text kept for the next call up to this

bool is_space_at(std::string_view s, size_t i) {
    return i + 3 <= s.size() && s[i] == kSpace[0] && s[i + 1] == kSpace[1] && s[i + 2] == kSpace[2];
}

}  // namespace

int utf8_length(const unsigned char* p, size_t left, uint32_t* cp) {
    const unsigned char c = p[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    int n;
    uint32_t v, min;
    if ((c & 0xE0) == 0xC0) n = 2, v = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0) n = 3, v = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0) n = 4, v = c & 0x07, min = 0x10000;
    else return 0;
    if (left < static_cast<size_t>(n)) return 0;
    for (int i = 1; i < n; ++i) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (p[i] & 0x3F);
    }
    if (v < min || v >= kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return n;
}

SpmEncoder::SpmEncoder(SpmConfig config, const std::vector<std::pair<uint32_t, int32_t>>& chars,
                       const std::vector<uint64_t>& pair_keys, const std::vector<uint64_t>& pair_values,
                       const std::vector<int32_t>& byte_ids, const std::unordered_map<std::string, int32_t>& whole,
                       const std::vector<std::pair<std::string, int32_t>>& users)
    : config_(config), char_ids_(kMaxCodePoint, -1), byte_ids_(byte_ids), whole_(whole), users_(256) {
    for (const auto& u : users)
        if (!u.first.empty()) users_[static_cast<unsigned char>(u.first[0])].push_back(u);
    for (auto& list : users_)
        std::stable_sort(list.begin(), list.end(),
                         [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    for (const auto& [cp, id] : chars)
        if (cp < kMaxCodePoint) char_ids_[cp] = id;
    pairs_.build(pair_keys, pair_values);
}

void PairTable::build(const std::vector<uint64_t>& keys, const std::vector<uint64_t>& values) {
    size_t size = 16;
    int bits = 4;
    while (size < keys.size() * 2) size <<= 1, ++bits;
    slots_.assign(size, Slot());
    mask_ = size - 1;
    shift_ = 64 - bits;
    for (size_t n = 0; n < keys.size(); ++n) {
        size_t i = (keys[n] * 0x9E3779B97F4A7C15ull) >> shift_;
        while (slots_[i].key != kEmpty && slots_[i].key != keys[n]) i = (i + 1) & mask_;
        slots_[i] = Slot{keys[n], values[n]};
    }
}

uint64_t word_hash(std::string_view s) {
    uint64_t h = 0x243F6A8885A308D3ull ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        uint64_t w;
        std::memcpy(&w, s.data() + i, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 32);
}

const int32_t* WordTable::find(std::string_view word, uint64_t hash, uint32_t* count) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        const Slot& s = slots_[i];
        if (!s.used) return nullptr;
        if (s.hash == hash && s.key_len == word.size() && std::memcmp(keys_.data() + s.key, word.data(), word.size()) == 0) {
            *count = s.ids_len;
            return ids_.data() + s.ids;
        }
    }
}

void WordTable::grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    const size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
        if (!s.used) continue;
        size_t i = s.hash & mask;
        while (slots_[i].used) i = (i + 1) & mask;
        slots_[i] = s;
    }
}

void WordTable::insert(std::string_view word, uint64_t hash, const int32_t* ids, uint32_t count) {
    if (keys_.size() + word.size() > kCacheBytes || ids_.size() + count > kCacheBytes / 4) {
        *this = WordTable();  // bounded: start again
    }
    if ((used_ + 1) * 2 > slots_.size()) grow();
    const size_t mask = slots_.size() - 1;
    size_t i = hash & mask;
    while (slots_[i].used) i = (i + 1) & mask;
    Slot& s = slots_[i];
    s = {hash, uint32_t(keys_.size()), uint32_t(word.size()), uint32_t(ids_.size()), count, true};
    keys_.append(word.data(), word.size());
    ids_.insert(ids_.end(), ids, ids + count);
    ++used_;
}

// A character of the text, a space written as "▁": no branch on the space (one in six bytes of Latin text).
static inline unsigned char* put_escaped(unsigned char* d, unsigned char c) {
    const bool space = c == ' ';
    d[0] = space ? 0xE2 : c;
    d[1] = 0x96;
    d[2] = 0x81;
    return d + 1 + 2 * space;
}

size_t SpmEncoder::normalize(std::string_view text, bool prefix, RawBuffer<char>& out) const {
    size_t begin = 0, end = text.size();
    const bool remove = config_.remove_extra_whitespaces;
    if (remove) {
        while (begin < end && text[begin] == ' ') ++begin;
        while (end > begin && text[end - 1] == ' ') --end;
    }
    out.set_size(0);
    auto* const d0 = reinterpret_cast<unsigned char*>(out.reserve_more(3 * (end - begin) + 3 + kPad));  // all spaces
    if (begin == end) {
        std::memset(d0, 0, kPad);
        return 0;
    }
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    unsigned char* d = d0;
    const bool escape = config_.escape_whitespaces;
    if (prefix && config_.add_dummy_prefix) d = escape ? put_escaped(d, ' ') : (*d = ' ', d + 1);
    if (escape && !remove) {
        size_t i = begin;
#ifdef __SSE2__
        const __m128i space = _mm_set1_epi8(' ');
        for (; i + 16 <= end; i += 16) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
            if (_mm_movemask_epi8(_mm_cmpeq_epi8(v, space)) == 0) {
                _mm_storeu_si128(reinterpret_cast<__m128i*>(d), v);
                d += 16;
                continue;
            }
            for (size_t j = i; j < i + 16; ++j) d = put_escaped(d, p[j]);
        }
#endif
        for (; i < end; ++i) d = put_escaped(d, p[i]);
    } else {
        bool prev_space = false;
        for (size_t i = begin; i < end; ++i) {
            const unsigned char c = p[i];
            if (c == ' ') {
                if (remove && prev_space) continue;
                d = escape ? put_escaped(d, ' ') : (*d = ' ', d + 1);
                prev_space = true;
            } else {
                *d++ = c;
                prev_space = false;
            }
        }
    }
    const size_t n = static_cast<size_t>(d - d0);
    std::memset(d, 0, kPad);
    return n;
}

void SpmEncoder::emit_unknown(std::string_view bytes, std::vector<int32_t>& out, bool& prev_unk) const {
    if (config_.byte_fallback) {
        for (unsigned char b : bytes) {
            const int32_t id = byte_ids_[b];
            if (id >= 0) out.push_back(id);
            else if (config_.unk_id >= 0) out.push_back(config_.unk_id);
        }
    } else if (!(config_.fuse_unk && prev_unk) && config_.unk_id >= 0) {
        out.push_back(config_.unk_id);
    }
    prev_unk = true;
}

uint64_t SpmEncoder::pair_value(const SpmSymbol& a, const SpmSymbol& b) const {
    if (a.id < 0 || b.id < 0 || a.frozen || b.frozen) return kNoPair;
    const uint64_t* v = pairs_.find((uint64_t(uint32_t(a.id)) << 32) | uint32_t(b.id));
    return v ? *v : kNoPair;
}

// Symbols in order, pairs[k] the value of (k, k + 1). Each step merges the pair of lowest priority, the leftmost
// of equals (a strict < over the pairs left to right), as the heap merge does.
void SpmEncoder::merge_scan(std::vector<SpmSymbol>& symbols, std::vector<uint64_t>& pairs) const {
    size_t n = symbols.size();
    pairs.resize(n);
    // Every first pair's slot asked for before any is read: the probes' cache misses overlap (they were half of
    // the merge's time, perf).
    for (size_t k = 0; k + 1 < n; ++k)
        pairs_.prefetch((uint64_t(uint32_t(symbols[k].id)) << 32) | uint32_t(symbols[k + 1].id));
    for (size_t k = 0; k + 1 < n; ++k) pairs[k] = pair_value(symbols[k], symbols[k + 1]);
    pairs[n - 1] = kNoPair;
    while (n > 1) {
        size_t best = 0;
        uint64_t best_value = pairs[0];
        for (size_t k = 1; k + 1 < n; ++k) {
            // Priority in the high half: comparing whole values orders by priority; equal priorities are one
            // merged piece (score rules) or one list entry, so the lower k wins either way through `<`.
            if ((pairs[k] >> 32) < (best_value >> 32)) best = k, best_value = pairs[k];
        }
        if (best_value == kNoPair) break;
        SpmSymbol& a = symbols[best];
        a.id = int32_t(uint32_t(best_value));
        a.length += symbols[best + 1].length;
        symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
        pairs.erase(pairs.begin() + static_cast<std::ptrdiff_t>(best) + 1);
        --n;
        if (best > 0) pairs[best - 1] = pair_value(symbols[best - 1], a);
        pairs[best] = best + 1 < n ? pair_value(a, symbols[best + 1]) : kNoPair;
    }
}

void SpmEncoder::merge_heap(std::vector<SpmSymbol>& symbols, std::vector<SpmCandidate>& queue) const {
    queue.clear();
    for (size_t i = 0; i < symbols.size(); ++i) {
        symbols[i].prev = int32_t(i) - 1;
        symbols[i].next = i + 1 < symbols.size() ? int32_t(i) + 1 : -1;
    }
    const auto consider = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const SpmSymbol& a = symbols[left];
        const SpmSymbol& b = symbols[right];
        const uint64_t v = pair_value(a, b);
        if (v == kNoPair) return;
        queue.push_back({uint32_t(v >> 32), left, right, a.length + b.length, int32_t(uint32_t(v))});
        std::push_heap(queue.begin(), queue.end());
    };
    for (size_t i = 1; i < symbols.size(); ++i) consider(int32_t(i - 1), int32_t(i));
    while (!queue.empty()) {
        std::pop_heap(queue.begin(), queue.end());
        const SpmCandidate top = queue.back();
        queue.pop_back();
        SpmSymbol& a = symbols[top.left];
        SpmSymbol& b = symbols[top.right];
        if (a.length == 0 || b.length == 0 || a.length + b.length != top.length || a.next != top.right) continue;
        a.length += b.length;
        a.id = top.merged;
        b.length = 0;
        a.next = b.next;
        if (b.next >= 0) symbols[b.next].prev = top.left;
        consider(a.prev, top.left);
        consider(top.left, a.next);
    }
    // In order, the merged-away ones dropped.
    size_t at = 0;
    for (int32_t i = 0; i >= 0; i = symbols[i].next) symbols[at++] = symbols[i];
    symbols.resize(at);
}

void SpmEncoder::encode_word(std::string_view word, std::vector<int32_t>& out, bool& prev_unk,
                             SpmScratch& scratch) const {
    if (config_.newline_runs && !word.empty() && word[0] == '\n') {
        auto it = whole_.find(std::string(word));
        if (it != whole_.end()) {
            out.push_back(it->second);
            prev_unk = false;
            return;
        }
    }
    std::vector<SpmSymbol>& symbols = scratch.symbols;
    symbols.clear();
    const auto* data = reinterpret_cast<const unsigned char*>(word.data());
    for (size_t i = 0; i < word.size();) {
        uint32_t cp = 0;
        int n = 0;
        int32_t id = -1;
        bool frozen = false;
        for (const auto& [text, uid] : users_[data[i]]) {
            if (text.size() <= word.size() - i && std::memcmp(word.data() + i, text.data(), text.size()) == 0) {
                n = static_cast<int>(text.size());
                id = uid;
                frozen = true;
                break;
            }
        }
        if (!frozen) {
            if (data[i] < 0x80) {
                n = 1;
                id = char_ids_[data[i]];
            } else {
                n = utf8_length(data + i, word.size() - i, &cp);
                if (n == 0) n = 1;  // not reached: texts are checked UTF-8
                else id = char_ids_[cp];
            }
        }
        symbols.push_back({id, static_cast<uint32_t>(i), static_cast<uint32_t>(n), 0, 0, frozen});
        i += n;
    }
    if (symbols.empty()) return;
    if (symbols.size() <= kScanSymbols) merge_scan(symbols, scratch.pairs);
    else merge_heap(symbols, scratch.queue);
    for (const SpmSymbol& s : symbols) {
        if (s.id >= 0 && uint32_t(s.id) < config_.n_vocab) {
            out.push_back(s.id);
            prev_unk = false;
        } else {
            emit_unknown(word.substr(s.start, s.length), out, prev_unk);
        }
    }
}

// Words of s (normalized; kPad readable bytes after it): cut before each "▁" that follows another character
// (cut_words), and where a run of newlines starts or ends (split_newlines).
template <class Word>
void SpmEncoder::each_word(std::string_view s, Word&& word) const {
    const size_t n = s.size();
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    size_t start = 0;
    if (!config_.split_newlines) {
        if (config_.cut_words) {
            size_t after_space = 0;  // where the last "▁" ended
            const auto lead = [&](size_t j) {  // p[j] == 0xE2, the lead byte of "▁" and of other characters
                if (p[j + 1] != 0x96 || p[j + 2] != 0x81) return;
                if (j > 0 && j != after_space) {
                    word(start, j);
                    start = j;
                }
                after_space = j + 3;
            };
            size_t i = 0;
#ifdef __SSE2__
            const __m128i e2 = _mm_set1_epi8(static_cast<char>(0xE2));
            for (; i + 16 <= n; i += 16) {
                const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
                for (unsigned m = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, e2))); m; m &= m - 1)
                    lead(i + static_cast<size_t>(__builtin_ctz(m)));
            }
#endif
            for (; i < n; ++i)
                if (p[i] == 0xE2) lead(i);
        }
        word(start, n);
        return;
    }
    bool prev_is_space = false;
    bool prev_newline = false;
    for (size_t i = 0; i < n;) {
        const bool space = is_space_at(s, i);
        const bool newline = s[i] == '\n';
        bool cut = i > 0 && newline != prev_newline;
        if (config_.cut_words && space && !prev_is_space && i > 0) cut = true;
        if (cut) {
            word(start, i);
            start = i;
        }
        prev_is_space = space;
        prev_newline = newline;
        i += space ? 3 : 1;
    }
    word(start, n);
}

int32_t* SpmEncoder::cached_word(std::string_view w, int32_t* dst, Cache& cache) const {
    const size_t len = w.size();
    std::vector<int32_t>& scratch = cache.scratch.ids;
    bool prev_unk = false;  // only fuse_unk reads it, and fuse_unk does not cache
    if (len <= kPieceMax) {
        // The key from one 16-byte load: the kPad bytes after the text make it readable.
        const PieceKey k = piece_key_wide(reinterpret_cast<const uint8_t*>(w.data()), len);
        const uint64_t h = piece_hash(k);
        PieceTable& table = cache.short_words;
        auto* out = reinterpret_cast<uint32_t*>(dst);
        if (uint32_t* end = PieceTable::emit(table.view().line(h), k, out)) return reinterpret_cast<int32_t*>(end);
        size_t free_slot = 0;
        if (uint32_t* end = table.find(k, h, out, &free_slot)) return reinterpret_cast<int32_t*>(end);
        scratch.clear();
        encode_word(w, scratch, prev_unk, cache.scratch);
        const size_t count = scratch.size();  // at most len: a symbol is at least one byte, and one id per byte
        if (count) {
            const auto* ids = reinterpret_cast<const uint32_t*>(scratch.data());
            if (!table.insert_at(free_slot, k, ids, count)) {
                if (table.bytes_if_grown() <= kShortWordBytes) {
                    table.grow();
                } else {
                    table = PieceTable();  // bounded: start again
                    ++cache.resets;
                }
                table.insert(k, h, ids, count);
            }
            std::memcpy(dst, scratch.data(), count * sizeof(int32_t));
        }
        return dst + count;
    }
    const uint64_t h = word_hash(w);
    uint32_t count = 0;
    if (const int32_t* found = cache.long_words.find(w, h, &count)) {
        std::memcpy(dst, found, count * sizeof(int32_t));
        return dst + count;
    }
    scratch.clear();
    encode_word(w, scratch, prev_unk, cache.scratch);
    cache.long_words.insert(w, h, scratch.data(), uint32_t(scratch.size()));
    std::memcpy(dst, scratch.data(), scratch.size() * sizeof(int32_t));
    return dst + scratch.size();
}

void SpmEncoder::encode(std::string_view text, bool normalize_text, bool prefix, IdBuffer& out, Cache& cache) const {
    RawBuffer<char>& buffer = cache.scratch.text;
    size_t n = text.size();
    if (normalize_text) {
        n = normalize(text, prefix, buffer);
    } else {
        buffer.set_size(0);
        char* d = buffer.reserve_more(n + kPad);
        std::memcpy(d, text.data(), n);
        std::memset(d + n, 0, kPad);
    }
    const std::string_view s(buffer.data(), n);
    if (config_.fuse_unk) {  // a run of unknown symbols across words is one <unk>: words in order, no cache
        bool prev_unk = false;
        std::vector<int32_t>& scratch = cache.scratch.ids;
        scratch.clear();
        each_word(s, [&](size_t a, size_t b) {
            if (a < b) encode_word(s.substr(a, b - a), scratch, prev_unk, cache.scratch);
        });
        out.append(scratch.data(), scratch.size());
    } else {
        // At most one id per byte of s (a symbol is at least one byte; a byte falls back to one id): room for all
        // and for the 4 ids a cache hit stores at once.
        int32_t* const begin = out.reserve_more(n + kPad);
        int32_t* dst = begin;
        each_word(s, [&](size_t a, size_t b) {
            if (a < b) dst = cached_word(s.substr(a, b - a), dst, cache);
        });
        out.set_size(out.size() + static_cast<size_t>(dst - begin));
    }
    if (buffer.capacity() > kKeepBuffer) buffer.reset();
}

}  // namespace bpe
