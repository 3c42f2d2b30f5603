// Added tokens found in text by the core (issue 31 item 3): a set of literal strings (GGUF user-defined tokens,
// Hugging Face added tokens without flags, mpt's runs of spaces), found leftmost-longest in one pass, as
// bpe_core/model/added_tokens.py's TokenMatcher finds them (its regex alternation, longest first). The text between
// two of them is an ordinary text of its own (the pre-tokenizer sees its end as the end of a text).
//
// One pass: where the tokens begin with at most four distinct byte pairs (and one-byte tokens), 16 positions at a
// time are compared with those pairs (mpt's 178 tokens begin "  " or "[P": single spaces are no candidates); else
// the positions whose byte starts some token are found with memchr when one byte starts them all, or a 256-entry
// table. At a candidate the first two bytes are looked up in a 65,536-bit set of the tokens' first two bytes, and
// only then the tokens' distinct lengths are tried, longest first, in a hash set.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace bpe {

class Literals {
  public:
    // (token bytes, id); empty tokens are left out; of two equal tokens the first is kept.
    explicit Literals(const std::vector<std::pair<std::string, uint32_t>>& tokens) {
        store_.reserve(tokens.size());
        for (const auto& t : tokens)
            if (!t.first.empty()) store_.push_back(t);
        ids_.reserve(store_.size() * 2);
        pairs_.assign(65536 / 64, 0);
        for (const auto& [bytes, id] : store_) {
            if (!ids_.emplace(std::string_view(bytes), id).second) continue;
            const uint8_t a = static_cast<uint8_t>(bytes[0]);
            starts_[a] = true;
            std::vector<uint32_t>& lens = lens_[a];
            const uint32_t len = static_cast<uint32_t>(bytes.size());
            bool known = false;
            for (uint32_t l : lens) known |= l == len;
            if (!known) lens.push_back(len);
            if (len >= 2) {
                const unsigned pair = unsigned(a) << 8 | static_cast<uint8_t>(bytes[1]);
                pairs_[pair >> 6] |= uint64_t(1) << (pair & 63);
            }
        }
        for (const auto& [bytes, id] : store_) {
            const uint8_t a = static_cast<uint8_t>(bytes[0]);
            if (bytes.size() == 1) {
                if (std::find(singles_.begin(), singles_.end(), a) == singles_.end()) singles_.push_back(a);
                continue;
            }
            const std::pair<uint8_t, uint8_t> p{a, static_cast<uint8_t>(bytes[1])};
            if (std::find(pair_list_.begin(), pair_list_.end(), p) == pair_list_.end()) pair_list_.push_back(p);
        }
        vector_scan_ = pair_list_.size() + singles_.size() <= kVectorKeys;
        int distinct = 0;
        for (int b = 0; b < 256; ++b) {
            std::vector<uint32_t>& lens = lens_[b];
            for (size_t i = 1; i < lens.size(); ++i)  // longest first (a few lengths: insertion sort)
                for (size_t j = i; j > 0 && lens[j - 1] < lens[j]; --j) std::swap(lens[j - 1], lens[j]);
            if (starts_[b]) distinct++, only_ = b;
        }
        if (distinct != 1) only_ = -1;
    }

    Literals(const Literals&) = delete;  // ids_ views store_'s strings
    Literals& operator=(const Literals&) = delete;

    bool empty() const { return ids_.empty(); }

    // The first token in s[pos, n), leftmost and then longest: true with its span [*a, *b) and its id.
    bool next(const uint8_t* s, size_t n, size_t pos, size_t* a, size_t* b, uint32_t* id) const {
        size_t i = pos;
#if defined(__SSE2__)
        if (vector_scan_) {
            for (; i + 17 <= n; i += 16) {
                const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
                const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 1));
                __m128i hit = _mm_setzero_si128();
                for (const auto& [x, y] : pair_list_)
                    hit = _mm_or_si128(hit, _mm_and_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(char(x))),
                                                          _mm_cmpeq_epi8(v1, _mm_set1_epi8(char(y)))));
                for (uint8_t x : singles_) hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, _mm_set1_epi8(char(x))));
                for (unsigned m = unsigned(_mm_movemask_epi8(hit)); m; m &= m - 1) {
                    const size_t j = i + unsigned(__builtin_ctz(m));
                    if (size_t len = match_at(s, n, j, id)) {
                        *a = j;
                        *b = j + len;
                        return true;
                    }
                }
            }
        }
#endif
        while (i < n) {
            if (only_ >= 0) {
                const void* hit = std::memchr(s + i, only_, n - i);
                if (!hit) return false;
                i = static_cast<size_t>(static_cast<const uint8_t*>(hit) - s);
            } else {
                while (i < n && !starts_[s[i]]) ++i;
                if (i >= n) return false;
            }
            if (size_t len = match_at(s, n, i, id)) {
                *a = i;
                *b = i + len;
                return true;
            }
            ++i;
        }
        return false;
    }

  private:
    // The length of the longest token at s[i] (s[i] starts one), or 0.
    size_t match_at(const uint8_t* s, size_t n, size_t i, uint32_t* id) const {
        const std::vector<uint32_t>& lens = lens_[s[i]];
        const bool pair = i + 1 < n && ((pairs_[(unsigned(s[i]) << 8 | s[i + 1]) >> 6] >> (s[i + 1] & 63)) & 1);
        if (!pair) {  // no longer token begins with these two bytes: only a one-byte token can be here
            if (lens.empty() || lens.back() != 1) return 0;
            return find(s + i, 1, id) ? 1 : 0;
        }
        for (uint32_t len : lens)
            if (len <= n - i && find(s + i, len, id)) return len;
        return 0;
    }

    bool find(const uint8_t* p, size_t len, uint32_t* id) const {
        auto it = ids_.find(std::string_view(reinterpret_cast<const char*>(p), len));
        if (it == ids_.end()) return false;
        *id = it->second;
        return true;
    }

    std::vector<std::pair<std::string, uint32_t>> store_;  // the bytes the views of ids_ point into
    std::unordered_map<std::string_view, uint32_t> ids_;
    std::vector<uint32_t> lens_[256];
    std::vector<uint64_t> pairs_;
    static constexpr size_t kVectorKeys = 4;
    std::vector<std::pair<uint8_t, uint8_t>> pair_list_;  // the distinct first two bytes of the longer tokens
    std::vector<uint8_t> singles_;                        // the one-byte tokens
    bool vector_scan_ = false;
    bool starts_[256] = {};
    int only_ = -1;
};

}  // namespace bpe
