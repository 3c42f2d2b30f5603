// SentencePiece-style BPE: see spm.h.
#include "spm.h"

#include <algorithm>
#include <cstring>

namespace bpe {

namespace {
constexpr uint32_t kMaxCodePoint = 0x110000;
constexpr char kSpace[] = "\xe2\x96\x81";  // U+2581
constexpr size_t kCacheBytes = size_t(1) << 28;  // a word table's text (and its ids' bytes) before it restarts

bool is_space_at(std::string_view s, size_t i) {
    return i + 3 <= s.size() && s[i] == kSpace[0] && s[i + 1] == kSpace[1] && s[i + 2] == kSpace[2];
}

struct Symbol {
    int32_t id;
    uint32_t start;
    uint32_t length;
    int32_t prev;
    int32_t next;
    bool frozen;
};

struct Candidate {
    uint32_t priority;
    int32_t left;
    int32_t right;
    uint32_t length;  // bytes of the merged symbol: a stale candidate no longer matches
    int32_t merged;
    bool operator<(const Candidate& o) const {  // std::priority_queue pops the largest: lowest priority, leftmost
        return priority != o.priority ? priority > o.priority : left > o.left;
    }
};
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
    keys_.assign(size, kEmpty);
    values_.assign(size, 0);
    mask_ = size - 1;
    shift_ = 64 - bits;
    for (size_t n = 0; n < keys.size(); ++n) {
        size_t i = (keys[n] * 0x9E3779B97F4A7C15ull) >> shift_;
        while (keys_[i] != kEmpty && keys_[i] != keys[n]) i = (i + 1) & mask_;
        keys_[i] = keys[n];
        values_[i] = values[n];
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

void SpmEncoder::normalize(std::string_view text, bool prefix, std::string& out) const {
    out.clear();
    out.reserve(text.size() + 8);
    size_t begin = 0, end = text.size();
    const bool remove = config_.remove_extra_whitespaces;
    if (remove) {
        while (begin < end && text[begin] == ' ') ++begin;
        while (end > begin && text[end - 1] == ' ') --end;
        if (begin == end) return;
    }
    const auto space = [&]() {
        if (config_.escape_whitespaces) out.append(kSpace, 3);
        else out.push_back(' ');
    };
    if (prefix && config_.add_dummy_prefix) space();
    bool prev_space = false;
    for (size_t i = begin; i < end; ++i) {
        const char c = text[i];
        if (c == ' ') {
            if (remove && prev_space) continue;
            space();
            prev_space = true;
        } else {
            out.push_back(c);
            prev_space = false;
        }
    }
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

void SpmEncoder::encode_word(std::string_view word, std::vector<int32_t>& out, bool& prev_unk) const {
    if (config_.newline_runs && !word.empty() && word[0] == '\n') {
        auto it = whole_.find(std::string(word));
        if (it != whole_.end()) {
            out.push_back(it->second);
            prev_unk = false;
            return;
        }
    }
    thread_local std::vector<Symbol> symbols;
    thread_local std::vector<Candidate> queue;
    symbols.clear();
    queue.clear();
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
            n = utf8_length(data + i, word.size() - i, &cp);
            if (n == 0) n = 1;  // not reached: texts are checked UTF-8
            else id = char_ids_[cp];
        }
        const int32_t index = static_cast<int32_t>(symbols.size());
        symbols.push_back({id, static_cast<uint32_t>(i), static_cast<uint32_t>(n), index - 1, index + 1, frozen});
        i += n;
    }
    if (symbols.empty()) return;
    symbols.back().next = -1;
    const auto consider = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const Symbol& a = symbols[left];
        const Symbol& b = symbols[right];
        if (a.id < 0 || b.id < 0 || a.frozen || b.frozen) return;
        const uint64_t* v = pairs_.find((uint64_t(uint32_t(a.id)) << 32) | uint32_t(b.id));
        if (!v) return;
        queue.push_back({uint32_t(*v >> 32), left, right, a.length + b.length, int32_t(uint32_t(*v))});
        std::push_heap(queue.begin(), queue.end());
    };
    for (size_t i = 1; i < symbols.size(); ++i) consider(int32_t(i - 1), int32_t(i));
    while (!queue.empty()) {
        std::pop_heap(queue.begin(), queue.end());
        const Candidate top = queue.back();
        queue.pop_back();
        Symbol& a = symbols[top.left];
        Symbol& b = symbols[top.right];
        if (a.length == 0 || b.length == 0 || a.length + b.length != top.length || a.next != top.right) continue;
        a.length += b.length;
        a.id = top.merged;
        b.length = 0;
        a.next = b.next;
        if (b.next >= 0) symbols[b.next].prev = top.left;
        consider(a.prev, top.left);
        consider(top.left, a.next);
    }
    for (int32_t i = 0; i >= 0; i = symbols[i].next) {
        const Symbol& s = symbols[i];
        if (s.id >= 0 && uint32_t(s.id) < config_.n_vocab) {
            out.push_back(s.id);
            prev_unk = false;
        } else {
            emit_unknown(word.substr(s.start, s.length), out, prev_unk);
        }
    }
}

void SpmEncoder::encode(std::string_view text, bool normalize_text, bool prefix, std::vector<int32_t>& out,
                        Cache& cache) const {
    std::string normalized;
    std::string_view s = text;
    if (normalize_text) {
        normalize(text, prefix, normalized);
        s = normalized;
    }
    bool prev_unk = false;
    const bool use_cache = !config_.fuse_unk;
    std::vector<int32_t> ids;
    const auto word = [&](size_t a, size_t b) {
        if (a >= b) return;
        std::string_view w = s.substr(a, b - a);
        if (!use_cache) {
            encode_word(w, out, prev_unk);
            return;
        }
        const uint64_t h = word_hash(w);
        uint32_t count = 0;
        const int32_t* found = cache.find(w, h, &count);
        if (found) {
            out.insert(out.end(), found, found + count);
            return;
        }
        ids.clear();
        encode_word(w, ids, prev_unk);
        cache.insert(w, h, ids.data(), uint32_t(ids.size()));
        out.insert(out.end(), ids.begin(), ids.end());
    };
    size_t start = 0;
    bool prev_is_space = false;
    bool prev_newline = false;
    for (size_t i = 0; i < s.size();) {
        const bool space = is_space_at(s, i);
        const bool newline = s[i] == '\n';
        bool cut = false;
        if (config_.split_newlines && i > 0 && newline != prev_newline) cut = true;
        if (config_.cut_words && space && !prev_is_space && i > 0) cut = true;
        if (cut) {
            word(start, i);
            start = i;
        }
        prev_is_space = space;
        prev_newline = newline;
        i += space ? 3 : 1;
    }
    word(start, s.size());
}

}  // namespace bpe
