// The compiled pre-tokenizer matcher (see pretok_rx.h): a backtracking interpreter with Perl semantics (ordered
// alternation, greedy quantifiers give back one character at a time, possessive ones never), over a program that
// bpe_core/pretokenize/compiler.py builds and checks against the `regex` module.
//
// Characters: strict UTF-8 as CPython decodes (utf8.h); a byte that starts no valid sequence is one character, the
// lone surrogate U+DC00+byte that surrogateescape gives it. Each character's classes are one u32 mask: a
// 256-entry ASCII table, else two stages (code point >> 8 -> block of 256 equivalence ids -> mask).
#include "pretok_rx.h"

#include "encoder.h"  // stop_requested(): Ctrl-C while a long split runs
#include "utf8.h"

#include <array>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

namespace bpe {

namespace {

constexpr uint32_t kUnbounded = 0xFFFFFFFFu;
enum ItemType : uint8_t { kClass = 0, kGroup = 1, kLook = 2, kEnd = 3 };

struct Seq;

struct Item {
    uint8_t type = kClass;
    bool possessive = false;
    bool negative = false;
    uint32_t bit = 0;  // class mask bit (kClass, kLook)
    uint32_t min = 1, max = 1;
    std::vector<Seq> alts;  // kGroup
};

struct Seq {
    bool any_first = true;  // no first-character filter
    uint32_t first = 0;     // classes one of which the first character must be in
    std::vector<Item> items;
};

// A pattern `A?C{m,M}$?` of one alternative (A, C classes; `[0-9][0-9][0-9]` counts as C{3}; `$` only after an
// unbounded C): matched by loops over the characters instead of the interpreter. Most stages of llama.cpp's regex
// lists are of this shape (deepseek-llm's and deepseek-coder's, falcon's first and last, bloom's).
struct Simple {
    bool on = false;
    bool has_opt = false, opt_possessive = false, end = false;
    uint32_t opt_bit = 0, bit = 0, min = 1, max = 1;
};

struct Pattern {
    std::vector<Seq> alts;
    Simple simple;
    Pretok delegate = Pretok::kNone;  // a hand-written kind that splits as this pattern does (a cascade's stage)
    std::vector<uint32_t> cand_eq;  // equivalence id -> bit set of alternatives that may start there
    std::array<uint32_t, 128> cand_ascii{};
};

struct Program {
    std::array<uint32_t, 128> ascii{};   // ASCII byte -> class mask
    std::vector<uint16_t> stage1;        // code point >> 8 -> block
    std::vector<uint8_t> stage2;         // block * 256 + (cp & 255) -> equivalence id
    std::vector<uint32_t> eq_mask;       // equivalence id -> class mask
    std::vector<Pattern> patterns;
    std::string label;  // the patterns, for messages
};

// Programs are never freed: a kind handed to a worker thread stays valid for the process.
std::mutex g_mutex;
std::deque<std::unique_ptr<Program>> g_programs;

const Program& program_of(Pretok kind) {
    const size_t index = static_cast<size_t>(static_cast<int>(kind) - kRxBase);
    std::lock_guard<std::mutex> lock(g_mutex);
    if (static_cast<int>(kind) < kRxBase || index >= g_programs.size())
        throw std::invalid_argument("pretok_split: no compiled pre-tokenizer of this kind");
    return *g_programs[index];
}

// ---- decoding program text ----

struct Reader {
    const std::vector<int64_t>& v;
    size_t i = 0;
    int64_t next() {
        if (i >= v.size()) throw std::invalid_argument("compiled pre-tokenizer program ends early");
        return v[i++];
    }
    int64_t peek() const {
        if (i >= v.size()) throw std::invalid_argument("compiled pre-tokenizer program ends early");
        return v[i];
    }
    uint32_t count(uint32_t limit) {
        const int64_t x = next();
        if (x < 0 || x > limit) throw std::invalid_argument("compiled pre-tokenizer program: bad count");
        return static_cast<uint32_t>(x);
    }
    uint32_t bound() {
        const int64_t x = next();
        if (x < -1 || x >= int64_t(kUnbounded)) throw std::invalid_argument("compiled pre-tokenizer program: bad bound");
        return x < 0 ? kUnbounded : static_cast<uint32_t>(x);
    }
};

std::vector<Seq> read_alts(Reader& r, uint32_t nclasses, int depth);

uint32_t class_bit(Reader& r, uint32_t nclasses) { return 1u << r.count(nclasses - 1); }

Seq read_seq(Reader& r, uint32_t nclasses, int depth) {
    Seq seq;
    const int64_t first = r.next();
    seq.any_first = first < 0;
    seq.first = first < 0 ? 0 : static_cast<uint32_t>(first);
    const uint32_t nitems = r.count(1u << 20);
    seq.items.resize(nitems);
    for (Item& item : seq.items) {
        item.type = static_cast<uint8_t>(r.count(3));
        switch (item.type) {
            case kClass:
                item.bit = class_bit(r, nclasses);
                item.min = r.bound();
                item.max = r.bound();
                item.possessive = r.count(1) != 0;
                if (item.min == kUnbounded || item.min > item.max)
                    throw std::invalid_argument("compiled pre-tokenizer program: min > max");
                break;
            case kGroup:
                item.min = r.count(1);
                item.max = r.count(1);
                if (item.max != 1) throw std::invalid_argument("compiled pre-tokenizer program: group max must be 1");
                item.alts = read_alts(r, nclasses, depth + 1);
                break;
            case kLook:
                item.bit = class_bit(r, nclasses);
                item.negative = r.count(1) != 0;
                break;
            default:
                break;
        }
    }
    return seq;
}

std::vector<Seq> read_alts(Reader& r, uint32_t nclasses, int depth) {
    if (depth > 16) throw std::invalid_argument("compiled pre-tokenizer program nests too deep");
    const uint32_t nalts = r.count(32);
    if (nalts == 0) throw std::invalid_argument("compiled pre-tokenizer program: an alternation needs alternatives");
    std::vector<Seq> alts;
    for (uint32_t a = 0; a < nalts; ++a) alts.push_back(read_seq(r, nclasses, depth));
    return alts;
}

// The Simple form of `alts`, when it has one (Simple::on).
Simple simple_form(const std::vector<Seq>& alts) {
    Simple sm;
    if (alts.size() != 1) return sm;
    std::vector<const Item*> items;
    std::vector<std::pair<uint32_t, uint32_t>> bounds;  // min, max of each item, fixed runs of one class merged
    for (const Item& it : alts[0].items) {
        const bool fixed = it.type == kClass && it.min == it.max && it.max != kUnbounded;
        if (fixed && !items.empty() && items.back()->type == kClass && items.back()->bit == it.bit &&
            bounds.back().first == bounds.back().second && bounds.back().second != kUnbounded &&
            bounds.back().second + it.max < (1u << 20)) {
            bounds.back().first += it.min;
            bounds.back().second += it.max;
            continue;
        }
        items.push_back(&it);
        bounds.emplace_back(it.min, it.max);
    }
    size_t i = 0;
    if (items.size() >= 2 && items[0]->type == kClass && bounds[0] == std::make_pair(0u, 1u) &&
        items[1]->type == kClass) {
        sm.has_opt = true;
        sm.opt_bit = items[0]->bit;
        sm.opt_possessive = items[0]->possessive;
        i = 1;
    }
    if (i >= items.size() || items[i]->type != kClass || bounds[i].first == 0) return sm;
    sm.bit = items[i]->bit;
    sm.min = bounds[i].first;
    sm.max = bounds[i].second;
    ++i;
    if (i < items.size() && items[i]->type == kEnd && sm.max == kUnbounded) {
        sm.end = true;
        ++i;
    }
    sm.on = i == items.size();
    return sm;
}

// ---- characters ----

// The steps spent on the current text (one split at a time per thread), and when to look at them next.
struct Budget {
    const Program* program = nullptr;
    const uint8_t* text = nullptr;
    size_t n = 0;
    uint64_t used = 0, limit = 0, next_check = 0;
    size_t piece = 0;  // where the first-level piece being matched starts

    void reset(const Program& p, const uint8_t* t, size_t size) {
        program = &p, text = t, n = size;
        used = 0, piece = 0;
        limit = kRxStepsBase + kRxStepsPerByte * uint64_t(size);
        next_check = kPollSteps;
    }
    bool fresh_for(const Program& p, const uint8_t* t, size_t size) const {
        return program == &p && text == t && n == size;
    }
    static constexpr uint64_t kPollSteps = uint64_t(1) << 16;  // ~1 ms of matching between looks at Ctrl-C
};
thread_local Budget t_budget;

struct RxStopped {};  // Ctrl-C: the split ends early, and its caller, which sees stopped(), throws the result away

__attribute__((noinline, cold)) void budget_checkpoint(Budget& b) {
    if (b.used > b.limit) {
        const Program& p = *b.program;
        throw RxBudgetExceeded("the compiled pre-tokenizer " + p.label + " took more than " +
                                   std::to_string(b.limit) + " steps on a text of " + std::to_string(b.n) +
                                   " bytes (the piece from byte " + std::to_string(b.piece) +
                                   "): the pattern backtracks without bound (adjacent unbounded runs whose classes "
                                   "overlap, as in a+a+b?)",
                               b.piece);
    }
    if (stop_requested()) throw RxStopped{};
    b.next_check = b.used + Budget::kPollSteps;
}

struct Matcher {
    const Program& p;
    const uint8_t* s;
    size_t n;
    std::vector<size_t>& stack;  // positions a greedy run may give back, shared by the nested runs
    Budget& budget;

    inline void spend(uint64_t steps) const {
        budget.used += steps;
        if (__builtin_expect(budget.used >= budget.next_check, 0)) budget_checkpoint(budget);
    }

    __attribute__((noinline)) uint32_t eq_multi(size_t i, uint32_t& len) const {
        const uint32_t cp = utf8_decode(s, n, i, len);
        return p.stage2[(size_t(p.stage1[cp >> 8]) << 8) | (cp & 0xFF)];
    }
    // The class mask of the character at i (< n), its length in len.
    inline uint32_t mask_at(size_t i, uint32_t& len) const {
        const uint8_t b = s[i];
        if (__builtin_expect(b < 0x80, 1)) {
            len = 1;
            return p.ascii[b];
        }
        return p.eq_mask[eq_multi(i, len)];
    }
    inline uint32_t cand_at(const Pattern& pat, size_t i) const {
        const uint8_t b = s[i];
        if (b < 0x80) return pat.cand_ascii[b];
        uint32_t len;
        return pat.cand_eq[eq_multi(i, len)];
    }

    struct Cont {
        const Seq* seq;
        size_t idx;
        const Cont* next;
    };

    // Does seq.items[idx:] then the continuation k match at pos? The end of the match in *end.
    bool match(const Seq* seq, size_t idx, size_t pos, const Cont* k, size_t* end) const {
        for (;;) {
            spend(1);
            if (idx == seq->items.size()) {
                if (k == nullptr) {
                    *end = pos;
                    return true;
                }
                seq = k->seq;
                idx = k->idx;
                k = k->next;
                continue;
            }
            const Item& item = seq->items[idx];
            switch (item.type) {
                case kLook: {
                    uint32_t len;
                    const bool in = pos < n && (mask_at(pos, len) & item.bit);
                    if (in == item.negative) return false;
                    ++idx;
                    continue;
                }
                case kEnd:
                    if (!(pos == n || (pos + 1 == n && s[pos] == '\n'))) return false;
                    ++idx;
                    continue;
                case kGroup: {
                    const Cont nk{seq, idx + 1, k};
                    for (const Seq& alt : item.alts) {
                        if (!alt.any_first) {
                            uint32_t len;
                            if (pos >= n || !(mask_at(pos, len) & alt.first)) continue;
                        }
                        if (match(&alt, 0, pos, &nk, end)) return true;
                    }
                    if (item.min != 0) return false;
                    ++idx;  // the group taken zero times
                    continue;
                }
                default:
                    break;
            }
            // A class repeated min..max times.
            if (item.max == 1) {
                uint32_t len = 0;
                const bool one = pos < n && (mask_at(pos, len) & item.bit);
                if (!one) {
                    if (item.min) return false;
                    ++idx;
                    continue;
                }
                if (item.min || item.possessive) {
                    pos += len;
                    ++idx;
                    continue;
                }
                if (match(seq, idx + 1, pos + len, k, end)) return true;  // greedy ?: with the character first
                ++idx;
                continue;
            }
            const bool tail = k == nullptr && idx + 1 == seq->items.size();
            if (item.possessive || tail) {
                uint32_t c = 0;
                while (c < item.max && pos < n) {
                    uint32_t len;
                    if (!(mask_at(pos, len) & item.bit)) break;
                    pos += len;
                    ++c;
                }
                spend(c);
                if (c < item.min) return false;
                ++idx;
                continue;
            }
            const size_t base = stack.size();
            stack.push_back(pos);
            uint32_t c = 0;
            while (c < item.max && pos < n) {
                uint32_t len;
                if (!(mask_at(pos, len) & item.bit)) break;
                pos += len;
                ++c;
                stack.push_back(pos);
            }
            spend(c);
            for (uint32_t t = c + 1; t-- > item.min;) {
                if (match(seq, idx + 1, stack[base + t], k, end)) {
                    stack.resize(base);
                    return true;
                }
            }
            stack.resize(base);
            return false;
        }
    }

    // The end of the pattern's match at pos (< n), or pos when none (no alternative matches empty).
    size_t match_at(const Pattern& pat, size_t pos) const {
        uint32_t cand = cand_at(pat, pos);
        while (cand) {
            const unsigned a = static_cast<unsigned>(__builtin_ctz(cand));
            cand &= cand - 1;
            size_t end;
            if (match(&pat.alts[a], 0, pos, nullptr, &end) && end > pos) return end;
        }
        return pos;
    }

    size_t char_len(size_t i) const { return utf8_char_len(s, n, i); }

    static constexpr size_t kFail = ~size_t(0);

    // C{min,max}$? of a Simple at x: the end of its match, or kFail with the end of C's run from x in *run_end.
    inline size_t simple_run(const Simple& sm, size_t x, size_t* run_end) const {
        uint32_t c = 0;
        while (c < sm.max && x < n) {
            uint32_t len;
            if (!(mask_at(x, len) & sm.bit)) break;
            x += len;
            ++c;
        }
        *run_end = x;
        if (c < sm.min) return kFail;
        // $ after an unbounded run: at the end, or before a final newline (which the run did not take).
        if (sm.end && !(x == n || (x + 1 == n && s[x] == '\n'))) return kFail;
        return x;
    }

    // The end of the Simple's match at pos, or kFail; *skip: where the next match may start, when it failed.
    inline size_t simple_at(const Simple& sm, size_t pos, size_t* skip) const {
        size_t run_end;
        uint32_t len = 0;
        const uint32_t m = mask_at(pos, len);
        if (sm.has_opt && (m & sm.opt_bit)) {
            const size_t end = simple_run(sm, pos + len, &run_end);
            if (end != kFail) return end;
            if (sm.opt_possessive) {
                *skip = pos + len;
                return kFail;
            }
        }
        if (!(m & sm.bit)) {
            *skip = pos + len;
            return kFail;
        }
        const size_t end = simple_run(sm, pos, &run_end);
        // Every start inside the run ends the run's C at the same place (and A there is in C): none can match.
        *skip = run_end;
        return end;
    }

    // next_piece of a Simple: linear, each character classified about twice.
    size_t next_simple(const Simple& sm, size_t pos) const {
        size_t skip;
        size_t end = simple_at(sm, pos, &skip);
        if (end != kFail) {
            spend(1 + (end - pos) / 8);
            return end;
        }
        size_t i = skip;
        const uint32_t starts = sm.bit | (sm.has_opt ? sm.opt_bit : 0);
        while (i < n) {
            uint32_t len;
            if (!(mask_at(i, len) & starts)) {
                i += len;
                continue;
            }
            if (simple_at(sm, i, &skip) != kFail) break;
            i = skip;
        }
        spend(1 + (i - pos) / 8);
        return i;
    }

    // The next piece from pos (< n) under pat: a match, or the run of text before the next match.
    size_t next_piece(const Pattern& pat, size_t pos) const {
        budget.piece = size_t(s - budget.text) + pos;
        if (pat.simple.on) return next_simple(pat.simple, pos);
        const size_t end = match_at(pat, pos);
        if (end > pos) return end;
        size_t i = pos + char_len(pos);
        while (i < n) {
            const uint8_t b = s[i];
            if (b < 0x80) {
                if (!pat.cand_ascii[b]) {  // no alternative starts here: part of the gap
                    ++i;
                    spend(1);
                    continue;
                }
            }
            if (match_at(pat, i) != i) break;
            i += char_len(i);
        }
        return i;
    }
};

thread_local std::vector<size_t> t_stack;

// Every piece of s[0:n] under the patterns from `level` on, their ends (plus base) appended to out.
void split_level(const Program& p, size_t level, const uint8_t* s, size_t n, size_t base, std::vector<size_t>& out,
                 std::vector<size_t>& stack) {
    Matcher m{p, s, n, stack, t_budget};
    if (n != 0 && m.char_len(0) == n) {  // one character: every pattern leaves it whole
        out.push_back(base + n);
        return;
    }
    const Pattern& pat = p.patterns[level];
    const bool last = level + 1 == p.patterns.size();
    size_t pos = 0;
    if (pat.delegate != Pretok::kNone) {  // a hand-written stage: its pieces, each split by the next patterns
        size_t ends[64], at = 0, k;
        while ((k = pretok_split_some(pat.delegate, s, n, &at, ends, 64)) != 0) {
            m.spend(1 + (ends[k - 1] - pos) / 8);
            for (size_t j = 0; j < k; ++j) {
                if (last)
                    out.push_back(base + ends[j]);
                else
                    split_level(p, level + 1, s + pos, ends[j] - pos, base + pos, out, stack);
                pos = ends[j];
            }
        }
        return;
    }
    while (pos < n) {
        const size_t end = m.next_piece(pat, pos);
        if (last)
            out.push_back(base + end);
        else
            split_level(p, level + 1, s + pos, end - pos, base + pos, out, stack);
        pos = end;
    }
}

// Pieces of one first-level piece, served across pretok_split_some calls on one thread.
struct Pending {
    const Program* program = nullptr;
    const uint8_t* text = nullptr;
    size_t n = 0;
    std::vector<size_t> ends;
    size_t next = 0;
};
thread_local Pending t_pending;

}  // namespace

Pretok rx_register(const std::vector<int64_t>& program, const std::vector<std::vector<uint32_t>>& classes,
                   const std::string& label) {
    if (classes.empty() || classes.size() > 32)
        throw std::invalid_argument("a compiled pre-tokenizer needs 1-32 character classes");
    auto prog = std::make_unique<Program>();
    prog->label = label.empty() ? "(unnamed)" : label;
    // Class masks of every code point, painted from the ranges, then folded into equivalence ids.
    std::vector<uint32_t> mask(0x110000, 0);
    for (size_t c = 0; c < classes.size(); ++c) {
        const auto& ranges = classes[c];
        if (ranges.size() % 2) throw std::invalid_argument("class ranges come in (first, last) pairs");
        for (size_t r = 0; r < ranges.size(); r += 2) {
            if (ranges[r] > ranges[r + 1] || ranges[r + 1] >= 0x110000)
                throw std::invalid_argument("class range out of order or beyond U+10FFFF");
            for (uint32_t cp = ranges[r]; cp <= ranges[r + 1]; ++cp) mask[cp] |= 1u << c;
        }
    }
    std::unordered_map<uint32_t, uint8_t> eq_of;
    std::unordered_map<std::string, uint16_t> block_of;
    prog->stage1.resize(0x110000 >> 8);
    std::string block(256, '\0');
    for (uint32_t hi = 0; hi < (0x110000u >> 8); ++hi) {
        for (uint32_t lo = 0; lo < 256; ++lo) {
            const uint32_t m = mask[(hi << 8) | lo];
            auto it = eq_of.find(m);
            if (it == eq_of.end()) {
                if (eq_of.size() == 256) throw std::invalid_argument("more than 256 distinct class combinations");
                it = eq_of.emplace(m, static_cast<uint8_t>(eq_of.size())).first;
                prog->eq_mask.push_back(m);
            }
            block[lo] = static_cast<char>(it->second);
        }
        auto found = block_of.find(block);
        if (found == block_of.end()) {
            found = block_of.emplace(block, static_cast<uint16_t>(block_of.size())).first;
            prog->stage2.insert(prog->stage2.end(), block.begin(), block.end());
        }
        prog->stage1[hi] = found->second;
    }
    for (uint32_t b = 0; b < 128; ++b) prog->ascii[b] = mask[b];

    Reader r{program};
    const uint32_t npatterns = r.count(16);
    if (npatterns == 0) throw std::invalid_argument("a compiled pre-tokenizer needs a pattern");
    const uint32_t nclasses = static_cast<uint32_t>(classes.size());
    for (uint32_t i = 0; i < npatterns; ++i) {
        Pattern pat;
        if (r.peek() == -1) {  // -1, index: the hand-written kind pretok_names()[index]
            r.next();
            pat.delegate = pretok_named(r.count(1u << 16));
            if (pat.delegate == Pretok::kNone)
                throw std::invalid_argument("compiled pre-tokenizer program: no hand-written kind of that index");
            prog->patterns.push_back(std::move(pat));
            continue;
        }
        pat.alts = read_alts(r, nclasses, 0);
        pat.simple = simple_form(pat.alts);
        auto cand = [&](uint32_t m) {
            uint32_t bits = 0;
            for (size_t a = 0; a < pat.alts.size(); ++a)
                if (pat.alts[a].any_first || (pat.alts[a].first & m)) bits |= 1u << a;
            return bits;
        };
        for (uint32_t m : prog->eq_mask) pat.cand_eq.push_back(cand(m));
        for (uint32_t b = 0; b < 128; ++b) pat.cand_ascii[b] = cand(prog->ascii[b]);
        prog->patterns.push_back(std::move(pat));
    }
    if (r.i != program.size()) throw std::invalid_argument("compiled pre-tokenizer program has trailing values");
    std::lock_guard<std::mutex> lock(g_mutex);
    g_programs.push_back(std::move(prog));
    return static_cast<Pretok>(kRxBase + static_cast<int>(g_programs.size()) - 1);
}

Pretok rx_from_name(std::string_view name) {
    if (name.size() < 4 || name.substr(0, 3) != "rx:") return Pretok::kNone;
    size_t index = 0;
    for (char c : name.substr(3)) {
        if (c < '0' || c > '9' || index > 1000000) return Pretok::kNone;
        index = index * 10 + static_cast<size_t>(c - '0');
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    return index < g_programs.size() ? static_cast<Pretok>(kRxBase + static_cast<int>(index)) : Pretok::kNone;
}

std::string rx_name(Pretok kind) { return "rx:" + std::to_string(static_cast<int>(kind) - kRxBase); }

uint64_t rx_last_steps() { return t_budget.used; }

void rx_split(Pretok kind, const uint8_t* text, size_t n, std::vector<size_t>& ends) {
    const Program& p = program_of(kind);
    t_budget.reset(p, text, n);
    t_stack.clear();
    const size_t first = ends.size();
    try {
        split_level(p, 0, text, n, 0, ends, t_stack);
    } catch (const RxStopped&) {  // a tiling all the same: the rest as one piece
        if (ends.size() == first || ends.back() < n) ends.push_back(n);
    }
}

namespace {

size_t split_some_budgeted(const Program& p, const uint8_t* text, size_t n, size_t* pos, size_t* ends, size_t max) {
    Pending& pend = t_pending;
    std::vector<size_t>& stack = t_stack;
    const bool resume = *pos != 0 && pend.program == &p && pend.text == text && pend.n == n &&
                        pend.next < pend.ends.size() && pend.next > 0 && pend.ends[pend.next - 1] == *pos;
    size_t k = 0;
    if (!resume) pend.ends.clear(), pend.next = 0;
    while (k < max) {
        if (pend.next == pend.ends.size()) {
            if (*pos >= n) break;
            // The next first-level piece from *pos, split by the other patterns.
            pend.ends.clear();
            pend.next = 0;
            pend.program = &p;
            pend.text = text;
            pend.n = n;
            const size_t start = *pos;
            Matcher m{p, text, n, stack, t_budget};
            size_t end;
            if (p.patterns[0].delegate != Pretok::kNone) {
                size_t at = start;
                pretok_split_some(p.patterns[0].delegate, text, n, &at, &end, 1);
            } else {
                end = m.next_piece(p.patterns[0], start);
            }
            if (p.patterns.size() == 1) {
                ends[k++] = end;
                *pos = end;
                continue;
            }
            split_level(p, 1, text + start, end - start, start, pend.ends, stack);
        }
        ends[k++] = pend.ends[pend.next++];
        *pos = ends[k - 1];
    }
    return k;
}

}  // namespace

size_t rx_split_some(Pretok kind, const uint8_t* text, size_t n, size_t* pos, size_t* ends, size_t max) {
    const Program& p = program_of(kind);
    if (max == 0 || *pos >= n) return 0;
    if (*pos == 0 || !t_budget.fresh_for(p, text, n)) t_budget.reset(p, text, n);
    try {
        return split_some_budgeted(p, text, n, pos, ends, max);
    } catch (...) {
        t_pending.ends.clear(), t_pending.next = 0;
        t_stack.clear();
        t_budget.program = nullptr;
        if (!stopped()) throw;  // RxBudgetExceeded, or an allocation failure
        ends[0] = n;  // Ctrl-C: a tiling all the same, the rest as one piece
        *pos = n;
        return 1;
    }
}

}  // namespace bpe
