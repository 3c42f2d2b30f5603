// The compiled pre-tokenizer matcher (see pretok_rx.h): a backtracking interpreter with Perl semantics (ordered
// alternation, greedy quantifiers give back one character at a time, possessive ones never), over a program that
// bpe_core/pretokenize/compiler.py builds and checks against the `regex` module.
//
// Characters: strict UTF-8 as CPython decodes (utf8.h); a byte that starts no valid sequence is one character, the
// lone surrogate U+DC00+byte that surrogateescape gives it. Each character's classes are one u32 mask: a
// 256-entry ASCII table, else two stages (code point >> 8 -> block of 256 equivalence ids -> mask).
#include "pretok_rx.h"

#include "encoder.h"  // stop_requested(): Ctrl-C while a long split runs
#include "pretok_blocks.h"
#include "utf8.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

// How a stage after the first of a list of several refines a window's piece boundaries (split_window).
enum class Form : uint8_t { kRuns, kSingles, kOptRuns, kEndRuns, kCounted, kGeneric, kDelegate, kR50k };

struct WinStage {
    Form form = Form::kGeneric;
    uint8_t c = 0, a = 0;  // the classes of C and A: indexes into Cascade::bits
    Simple sm;             // with bit and opt_bit as bits of the window's own class masks
    Pretok delegate = Pretok::kNone;
};

// A list whose stages after the first are all Simple or hand-written (or one pattern of a local form), using at most
// 8 classes: split a window of first-level pieces at a time, breadth first (every character classified once, each
// stage one pass of bit operations over the window) instead of piece by piece, depth first.
struct Cascade {
    bool on = false;
    std::vector<uint32_t> bits;  // the classes the stages use (program masks), at most 8
    std::array<uint8_t, 128> ascii8{};
    std::vector<uint8_t> eq8;  // equivalence id -> window class mask (bit u: in class bits[u])
    std::vector<uint8_t> bmp8;  // code point < 0x10000 -> its window class mask (eq8 of its class, r50k's bits): one load
    std::vector<WinStage> stages;  // from the first (form kGeneric when it is not one of the local forms)
    bool local0 = false;  // the first stage is local (runs, singles, A?C+): the window splits it too
    // GPT-2's regex as a stage (kR50k): five more window classes from the core's own flags (utf8.h), at bits r50k
    // .. r50k + 4: \p{L}, \p{N}, \s, the space, the apostrophe; -1 when no stage is one
    int r50k = -1;
    size_t nbits = 0;  // window classes: bits.size(), and the five of r50k
    bool byte_map = false;  // a stage needs the character index of a byte offset
};

struct Program {
    std::array<uint32_t, 128> ascii{};   // ASCII byte -> class mask
    std::vector<uint16_t> stage1;        // code point >> 8 -> block
    std::vector<uint8_t> stage2;         // block * 256 + (cp & 255) -> equivalence id
    std::vector<uint32_t> eq_mask;       // equivalence id -> class mask
    std::vector<Pattern> patterns;
    Cascade cascade;
    std::string label;  // the patterns, for messages
};

// Programs are never freed: a kind handed to a worker thread stays valid for the process.
std::mutex g_mutex;
std::deque<std::unique_ptr<Program>> g_programs;

// The first programs' addresses, each stored once (release) when its program is complete: a split finds its program
// without the mutex (its lock, unlock and the deque's lookup were ~150 instructions a call, 1 Ir/byte of
// fortunes_multi's short documents).
constexpr size_t kFastPrograms = 1024;
std::array<std::atomic<const Program*>, kFastPrograms> g_fast{};

const Program& program_of(Pretok kind) {
    const size_t index = static_cast<size_t>(static_cast<int>(kind) - kRxBase);
    if (static_cast<int>(kind) >= kRxBase && index < kFastPrograms)
        if (const Program* fast = g_fast[index].load(std::memory_order_acquire)) return *fast;
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

// The loops of a Simple `A?C{m,M}$?` over any characters: `Chars` gives mask(i, &len) (the class mask of the
// character at i < end, its length in len), end, and final_newline(x) (x is the last character, a newline). The
// Matcher runs them on a text's bytes, a cascade's window on its characters' class masks (WinChars).
template <class Chars>
struct SimpleLoops {
    const Simple& sm;
    const Chars& ch;
    static constexpr size_t kFail = ~size_t(0);

    // C{min,max}$? at x: the end of its match, or kFail with the end of C's run from x in *run_end.
    inline size_t run(size_t x, size_t* run_end) const {
        uint32_t c = 0;
        while (c < sm.max && x < ch.end) {
            uint32_t len;
            if (!(ch.mask(x, len) & sm.bit)) break;
            x += len;
            ++c;
        }
        *run_end = x;
        if (c < sm.min) return kFail;
        // $ after an unbounded run: at the end, or before a final newline (which the run did not take).
        if (sm.end && !(x == ch.end || ch.final_newline(x))) return kFail;
        return x;
    }

    // The end of the match at pos, or kFail; *skip: where the next match may start, when it failed.
    inline size_t at(size_t pos, size_t* skip) const {
        size_t run_end;
        uint32_t len = 0;
        const uint32_t m = ch.mask(pos, len);
        if (sm.has_opt && (m & sm.opt_bit)) {
            const size_t end = run(pos + len, &run_end);
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
        const size_t end = run(pos, &run_end);
        // Every start inside the run ends the run's C at the same place (and A there is in C): none can match.
        *skip = run_end;
        return end;
    }

    // The next piece from pos (< end): the match there, or the text up to the next match. Linear, each character
    // classified about twice.
    size_t next(size_t pos) const {
        size_t skip;
        const size_t end = at(pos, &skip);
        if (end != kFail) return end;
        size_t i = skip;
        const uint32_t starts = sm.bit | (sm.has_opt ? sm.opt_bit : 0);
        while (i < ch.end) {
            uint32_t len;
            if (!(ch.mask(i, len) & starts)) {
                i += len;
                continue;
            }
            if (at(i, &skip) != kFail) break;
            i = skip;
        }
        return i;
    }
};

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

    // SimpleLoops' characters: the text's.
    struct TextChars {
        const Matcher& m;
        size_t end;
        uint32_t mask(size_t i, uint32_t& len) const { return m.mask_at(i, len); }
        bool final_newline(size_t x) const { return x + 1 == end && m.s[x] == '\n'; }
    };

    // next_piece of a Simple.
    size_t next_simple(const Simple& sm, size_t pos) const {
        const TextChars chars{*this, n};
        const size_t end = SimpleLoops<TextChars>{sm, chars}.next(pos);
        spend(1 + (end - pos) / 8);
        return end;
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
    std::vector<size_t> ends;  // ends[0:count] (a window's are written over the last's, not appended: no zero-fill)
    size_t count = 0, next = 0;
};
thread_local Pending t_pending;


// ---- cascades, a window at a time ----

constexpr size_t kWindowBytes = 8192;    // first-level pieces are gathered until the window holds this many bytes
constexpr size_t kBlockFragment = 256;  // a hand-written stage splits fragments this long with its block splitter
// The window's functions take the thread's Window by reference; cloned for their one caller, GCC made them read the
// thread-local directly, a __tls_get_addr call at each use in their loops: no interprocedural changes to them.
#define BPE_RX_NOIPA __attribute__((noipa))

// The r50k window classes of a character: its flags (utf8.h) and whether it is the space or the apostrophe.
inline uint8_t r50k_bits(const Cascade& cs, uint8_t flags, uint32_t cp) {
    const uint32_t bits = ((flags & kFlagL) ? 1u : 0u) | ((flags & kFlagN) ? 2u : 0u) | ((flags & kFlagS) ? 4u : 0u) |
                          (cp == ' ' ? 8u : 0u) | (cp == '\'' ? 16u : 0u);
    return static_cast<uint8_t>(bits << cs.r50k);
}

// The window class mask of a character that is not ASCII (classify_window; Cascade::bmp8 holds those below 0x10000).
inline uint8_t wide_class8(const Program& p, const Cascade& cs, uint32_t cp) {
    uint8_t m = cs.eq8[p.stage2[(size_t(p.stage1[cp >> 8]) << 8) | (cp & 0xFF)]];
    if (cs.r50k >= 0) m |= r50k_bits(cs, flags_of(cp), cp);
    return m;
}

void build_cascade(Program& p) {
    Cascade cs;
    auto index_of = [&](uint32_t bit) -> int {
        for (size_t u = 0; u < cs.bits.size(); ++u)
            if (cs.bits[u] == bit) return static_cast<int>(u);
        if (cs.bits.size() == 8) return -1;
        cs.bits.push_back(bit);
        return static_cast<int>(cs.bits.size()) - 1;
    };
    auto disjoint = [&](uint32_t x, uint32_t y) {
        for (uint32_t m : p.ascii)
            if ((m & x) && (m & y)) return false;
        for (uint32_t m : p.eq_mask)
            if ((m & x) && (m & y)) return false;
        return true;
    };
    for (size_t i = 0; i < p.patterns.size(); ++i) {
        const Pattern& pat = p.patterns[i];
        WinStage st;
        if (i == 0 && !pat.simple.on) {  // split piece by piece (next_piece or its splitter), then the window
            cs.stages.push_back(st);
            continue;
        }
        if (pat.delegate != Pretok::kNone) {
            st.form = Form::kDelegate;
            st.delegate = pat.delegate;
        } else if (pat.simple.on) {
            const Simple& sm = pat.simple;
            const bool plain = !sm.has_opt && !sm.end;
            if (plain && sm.min == 1 && sm.max == kUnbounded)
                st.form = Form::kRuns;
            else if (plain && sm.min == 1 && sm.max == 1)
                st.form = Form::kSingles;
            else if (plain)
                st.form = Form::kCounted;
            else if (!sm.has_opt && sm.end && sm.min == 1)
                st.form = Form::kEndRuns;  // C+$ (simple_form allows $ only after an unbounded run)
            else if (sm.has_opt && !sm.end && sm.min == 1 && sm.max == kUnbounded &&
                     (!sm.opt_possessive || disjoint(sm.bit, sm.opt_bit)))
                // A match starts at an A before a run of C or at a C; where A and C share characters, `A?+` would
                // not give A back (an A in C before a character not in C), `A?` does: the same bits for both
                st.form = Form::kOptRuns;
            else
                st.form = Form::kGeneric;
            // A first stage of another form is split piece by piece (next_piece on the program's own classes): no
            // window classes for it, which would take slots (8 at most) from the later stages.
            if (i == 0 && st.form != Form::kRuns && st.form != Form::kSingles && st.form != Form::kOptRuns) {
                cs.stages.push_back(WinStage{});
                continue;
            }
            const int c = index_of(sm.bit), a = sm.has_opt ? index_of(sm.opt_bit) : 0;
            if (c < 0 || a < 0) return;
            st.c = static_cast<uint8_t>(c), st.a = static_cast<uint8_t>(a);
            st.sm = sm;
            st.sm.bit = 1u << c;
            st.sm.opt_bit = sm.has_opt ? 1u << a : 0;
        } else {
            return;
        }
        cs.stages.push_back(st);
    }
    const Form f0 = cs.stages[0].form;
    cs.local0 = f0 == Form::kRuns || f0 == Form::kSingles || f0 == Form::kOptRuns;
    cs.nbits = cs.bits.size();
    if (cs.bits.size() + 5 <= 8)  // GPT-2's regex on bits where the window has room for its classes
        for (size_t i = 1; i < cs.stages.size(); ++i)
            if (cs.stages[i].form == Form::kDelegate && cs.stages[i].delegate == Pretok::kR50k) {
                cs.stages[i].form = Form::kR50k;
                cs.stages[i].c = static_cast<uint8_t>(cs.bits.size());
                cs.r50k = static_cast<int>(cs.bits.size());
                cs.nbits = cs.bits.size() + 5;
            }
    if (cs.stages.size() == 1 && !cs.local0) return;  // one pattern: next_piece as fast
    cs.byte_map = !cs.local0;
    for (const WinStage& st : cs.stages) cs.byte_map |= st.form == Form::kDelegate;
    auto compress = [&](uint32_t m) {
        uint8_t out = 0;
        for (size_t u = 0; u < cs.bits.size(); ++u)
            if (m & cs.bits[u]) out |= static_cast<uint8_t>(1u << u);
        return out;
    };
    for (uint32_t b = 0; b < 128; ++b) {
        cs.ascii8[b] = compress(p.ascii[b]);
        if (cs.r50k >= 0) cs.ascii8[b] |= r50k_bits(cs, kAsciiFlags[b], b);
    }
    for (uint32_t m : p.eq_mask) cs.eq8.push_back(compress(m));
    cs.bmp8.resize(0x10000);
    for (uint32_t cp = 0; cp < 0x10000; ++cp) cs.bmp8[cp] = wide_class8(p, cs, cp);
    cs.on = true;
    p.cascade = std::move(cs);
}

// One window: its characters' class masks and byte offsets, the piece starts as bits, one bit set per class.
struct Window {
    std::vector<uint8_t> cm;   // class mask of character i (Cascade::bits), zero past the end
    std::vector<uint32_t> at;  // byte offset of character i from the window's start; at[nchars] = the bytes
    std::vector<uint32_t> ci;  // byte offset of a character -> its index (Cascade::byte_map), else unset
    std::vector<uint64_t> walls, old;
    std::array<std::vector<uint64_t>, 8> bits;
    std::vector<size_t> first;  // the first-level piece ends, bytes from the window's start
    size_t nchars = 0, nw = 0;
    size_t identity = 0, identity_ci = 0;  // at[k] = k for k < identity, ci[k] = k for k < identity_ci
};
thread_local Window t_window;

inline void set_bit(uint64_t* x, size_t i) { x[i >> 6] |= uint64_t(1) << (i & 63); }
inline bool get_bit(const uint64_t* x, size_t i) { return (x[i >> 6] >> (i & 63)) & 1; }
// Bit i of the result: bit i - 1 of x (the previous character's).
inline uint64_t prev_bits(const uint64_t* x, size_t j) { return (x[j] << 1) | (j ? x[j - 1] >> 63 : 0); }
// The first set bit of x at or after i (x has a set bit there: the window's end).
inline size_t next_bit(const uint64_t* x, size_t i) {
    size_t j = i >> 6;
    uint64_t w = x[j] & (~uint64_t(0) << (i & 63));
    while (!w) w = x[++j];
    return (j << 6) | size_t(__builtin_ctzll(w));
}

// ---- the window's instruction tier ----
// "vbmi" (AVX-512 VBMI: 64 ASCII bytes classified by one two-table byte permute, 64 characters' bits of a class by
// one test) where the CPU has it, else "avx2" (32 ASCII bytes classified by eight byte shuffles, 32 characters' bits
// of a class by one movemask), else "sse2"; rx_set_tier forces a lower tier for tests (the same pieces in each).
enum Tier : int { kTierSse2 = 0, kTierVbmi = 1, kTierAvx2 = 2 };
std::atomic<int> g_tier{-1};  // -1: not chosen yet

#if defined(__x86_64__)
#define BPE_RX_VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi")))
bool cpu_has_vbmi() { return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi"); }

// The ASCII bytes of s[i:n] 64 at a time from character c: their classes (table: the 128 ASCII entries), their
// offsets, and (ci) their character indexes; how many bytes it took (a multiple of 64, 0 at a non-ASCII byte).
BPE_RX_VBMI size_t ascii_run_vbmi(const uint8_t* s, size_t i, size_t n, size_t c, const uint8_t* table, uint8_t* cm,
                                   uint32_t* at, uint32_t* ci) {
    const __m512i lo = _mm512_loadu_si512(table), hi = _mm512_loadu_si512(table + 64);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    size_t done = 0;
    for (; i + done + 64 <= n; done += 64) {
        const __m512i v = _mm512_loadu_si512(s + i + done);
        if (_mm512_movepi8_mask(v)) break;
        _mm512_storeu_si512(cm + c + done, _mm512_permutex2var_epi8(lo, v, hi));
        for (int q = 0; q < 4; ++q) {
            const __m512i off = _mm512_add_epi32(_mm512_set1_epi32(int(i + done + 16 * q)), iota);
            _mm512_storeu_si512(at + c + done + 16 * q, off);
            if (ci)
                _mm512_storeu_si512(ci + i + done + 16 * q,
                                    _mm512_add_epi32(_mm512_set1_epi32(int(c + done + 16 * q)), iota));
        }
    }
    return done;
}

// The classes of 64 ASCII bytes.
BPE_RX_VBMI void ascii_window_vbmi(const uint8_t* s, const uint8_t* table, uint8_t* cm) {
    const __m512i v = _mm512_loadu_si512(s);
    _mm512_storeu_si512(cm, _mm512_permutex2var_epi8(_mm512_loadu_si512(table), v, _mm512_loadu_si512(table + 64)));
}

// Bit u of every window class mask cm[0:64 nw] as 64-bit words: bits[u][j].
BPE_RX_VBMI void gather_bits_vbmi(const uint8_t* cm, size_t nw, size_t nbits,
                                  std::array<std::vector<uint64_t>, 8>& bits) {
    for (size_t j = 0; j < nw; ++j) {
        const __m512i v = _mm512_loadu_si512(cm + 64 * j);
        for (size_t u = 0; u < nbits; ++u)
            bits[u][j] = _mm512_test_epi8_mask(v, _mm512_set1_epi8(char(1u << u)));
    }
}

#define BPE_RX_AVX2 __attribute__((target("avx2")))
bool cpu_has_avx2() { return __builtin_cpu_supports("avx2"); }

// The classes of 32 ASCII bytes: table[16 h + l] for the byte 16 h + l, as eight 16-entry shuffles (an index whose
// high nibble is not h saturates past 0x7F, where the shuffle gives 0). On the scalar table lookups' 3.4 Ir/byte of
// an ASCII window (deepseek-llm, callgrind) this is 1.1.
struct AsciiTableAvx2 {
    __m256i rows[8];
    BPE_RX_AVX2 explicit AsciiTableAvx2(const uint8_t* table) {
        for (int h = 0; h < 8; ++h)
            rows[h] = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table + 16 * h)));
    }
    BPE_RX_AVX2 __m256i classify(__m256i v) const {
        const __m256i sat = _mm256_set1_epi8(0x70);
        __m256i r = _mm256_shuffle_epi8(rows[0], _mm256_adds_epu8(v, sat));
        for (int h = 1; h < 8; ++h) {
            const __m256i x = _mm256_xor_si256(v, _mm256_set1_epi8(char(h << 4)));
            r = _mm256_or_si256(r, _mm256_shuffle_epi8(rows[h], _mm256_adds_epu8(x, sat)));
        }
        return r;
    }
};

// The classes of the ASCII bytes s[0:n] 32 at a time into cm; how many it took (n rounded down to 32).
BPE_RX_AVX2 size_t ascii_window_avx2(const uint8_t* s, size_t n, const uint8_t* table, uint8_t* cm) {
    const AsciiTableAvx2 t(table);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(cm + i), t.classify(v));
    }
    return i;
}

// ascii_run_vbmi's work 32 bytes at a time.
BPE_RX_AVX2 size_t ascii_run_avx2(const uint8_t* s, size_t i, size_t n, size_t c, const uint8_t* table, uint8_t* cm,
                                  uint32_t* at, uint32_t* ci) {
    const AsciiTableAvx2 t(table);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    size_t done = 0;
    for (; i + done + 32 <= n; done += 32) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + done));
        if (_mm256_movemask_epi8(v)) break;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(cm + c + done), t.classify(v));
        for (int q = 0; q < 4; ++q) {
            const __m256i off = _mm256_add_epi32(_mm256_set1_epi32(int(i + done + 8 * q)), iota);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(at + c + done + 8 * q), off);
            if (ci)
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(ci + i + done + 8 * q),
                                    _mm256_add_epi32(_mm256_set1_epi32(int(c + done + 8 * q)), iota));
        }
    }
    return done;
}

// gather_bits_vbmi's work by movemasks of 32 bytes.
BPE_RX_AVX2 void gather_bits_avx2(const uint8_t* cm, size_t nw, size_t nbits,
                                  std::array<std::vector<uint64_t>, 8>& bits) {
    for (size_t u = 0; u < nbits; ++u) {
        const __m128i shift = _mm_cvtsi32_si128(int(7 - u));
        uint64_t* b = bits[u].data();
        for (size_t j = 0; j < nw; ++j) {
            const auto* q = reinterpret_cast<const __m256i*>(cm + 64 * j);
            const uint32_t lo = uint32_t(_mm256_movemask_epi8(_mm256_sll_epi16(_mm256_loadu_si256(q), shift)));
            const uint32_t hi = uint32_t(_mm256_movemask_epi8(_mm256_sll_epi16(_mm256_loadu_si256(q + 1), shift)));
            b[j] = uint64_t(lo) | (uint64_t(hi) << 32);
        }
    }
}
#else
bool cpu_has_vbmi() { return false; }
bool cpu_has_avx2() { return false; }
#endif

inline int window_tier() {
    int t = g_tier.load(std::memory_order_relaxed);
    if (t < 0) {
        t = cpu_has_vbmi() ? kTierVbmi : cpu_has_avx2() ? kTierAvx2 : kTierSse2;
        g_tier.store(t, std::memory_order_relaxed);
    }
    return t;
}

// Whether p[0:32] is ASCII.
inline bool ascii32(const uint8_t* p) {
    uint64_t x[4];
    std::memcpy(x, p, 32);
    return !((x[0] | x[1] | x[2] | x[3]) & 0x8080808080808080ull);
}

// Classify the window s[0:n] (whose first-level piece ends are w.first) into w.
BPE_RX_NOIPA void classify_window(const Program& p, const uint8_t* s, size_t n, Window& w) {
    const Cascade& cs = p.cascade;
    // Grown, never shrunk (a resize up zero-fills): cm holds whole words of characters past the end.
    if (w.cm.size() < 64 * (n / 64 + 3)) w.cm.resize(64 * (n / 64 + 3));
    if (w.at.size() < n + 1) w.at.resize(n + 1);
    if (cs.byte_map && w.ci.size() < n + 1) w.ci.resize(n + 1);
    uint8_t* cm = w.cm.data();
    uint32_t* at = w.at.data();
    size_t c = 0, i = 0;
    // An ASCII window (most are): each character a byte, at and ci the identity, which they stay from the last
    // ASCII window (kept up to w.identity): only the classes are written.
    size_t ascii = 0;
#if defined(__SSE2__)
    // 64 bytes a test (8 at a time was 0.75 Ir/byte)
    for (; ascii + 64 <= n; ascii += 64) {
        const auto* q = reinterpret_cast<const __m128i*>(s + ascii);
        const __m128i v = _mm_or_si128(_mm_or_si128(_mm_loadu_si128(q), _mm_loadu_si128(q + 1)),
                                       _mm_or_si128(_mm_loadu_si128(q + 2), _mm_loadu_si128(q + 3)));
        if (_mm_movemask_epi8(v)) break;
    }
#endif
    while (ascii + 8 <= n) {
        uint64_t x;
        std::memcpy(&x, s + ascii, 8);
        if (x & 0x8080808080808080ull) break;
        ascii += 8;
    }
    while (ascii < n && s[ascii] < 0x80) ++ascii;
    const int tier = window_tier();
    const bool vbmi = tier == kTierVbmi;
    if (ascii == n) {
        const uint8_t* table = cs.ascii8.data();
#if defined(__x86_64__)
        if (vbmi)
            for (; i + 64 <= n; i += 64)
                ascii_window_vbmi(s + i, table, cm + i);
        if (tier == kTierAvx2) i = ascii_window_avx2(s, n, table, cm);
#endif
        // a byte stored per byte: 3 instructions each, where 8 shifted into a word and stored were 4
        for (; i + 8 <= n; i += 8)
            for (size_t k = 0; k < 8; ++k) cm[i + k] = table[s[i + k]];
        for (; i < n; ++i) cm[i] = table[s[i]];
        for (size_t k = w.identity; k <= n; ++k) at[k] = uint32_t(k);
        w.identity = std::max(w.identity, n + 1);
        if (cs.byte_map) {
            for (size_t k = w.identity_ci; k <= n; ++k) w.ci[k] = uint32_t(k);
            w.identity_ci = std::max(w.identity_ci, n + 1);
        }
        c = n;
    }
    if (c < n) {  // the loop below writes at (and ci)
        w.identity = 0;
        if (cs.byte_map) w.identity_ci = 0;
    }
    while (i < n) {
        uint64_t x8 = 0x80;  // the next 8 bytes (a high bit set where fewer are left)
        if (i + 8 <= n) std::memcpy(&x8, s + i, 8);
        const bool ascii8 = !(x8 & 0x8080808080808080ull);
#if defined(__x86_64__)
        // The vector runs only where their first 32 bytes are ASCII, tested here: called wherever 8 ASCII bytes
        // followed, most calls in Latin text with diacritics took nothing (13% of multi_udhr's split, deepseek-llm)
        if (ascii8 && tier != kTierSse2 && i + 32 <= n && ascii32(s + i)) {
            uint32_t* ci = cs.byte_map ? w.ci.data() : nullptr;
            const size_t took = vbmi && i + 64 <= n ? ascii_run_vbmi(s, i, n, c, cs.ascii8.data(), cm, at, ci) : 0;
            const size_t more = ascii_run_avx2(s, i + took, n, c + took, cs.ascii8.data(), cm, at, ci);
            i += took + more, c += took + more;
            continue;
        }
#endif
        {
            if (ascii8) {
                uint64_t m = 0;
                for (size_t k = 0; k < 8; ++k) m |= uint64_t(cs.ascii8[s[i + k]]) << (8 * k);
                std::memcpy(cm + c, &m, 8);
#if defined(__SSE2__)
                const __m128i first = _mm_add_epi32(_mm_set1_epi32(int(i)), _mm_setr_epi32(0, 1, 2, 3));
                _mm_storeu_si128(reinterpret_cast<__m128i*>(at + c), first);
                _mm_storeu_si128(reinterpret_cast<__m128i*>(at + c + 4), _mm_add_epi32(first, _mm_set1_epi32(4)));
#else
                for (size_t k = 0; k < 8; ++k) at[c + k] = uint32_t(i + k);
#endif
                if (cs.byte_map)
                    for (size_t k = 0; k < 8; ++k) w.ci[i + k] = uint32_t(c + k);
                c += 8, i += 8;
                continue;
            }
        }
        if (i + 8 <= n && s[i] < 0x80) {  // the ASCII bytes before the word's first other byte, at once
            const size_t k = size_t(__builtin_ctzll(x8 & 0x8080808080808080ull)) >> 3;
            uint64_t m = 0;
            for (size_t q = 0; q < 8; ++q) m |= uint64_t(cs.ascii8[s[i + q] & 0x7F]) << (8 * q);
            std::memcpy(cm + c, &m, 8);  // the bytes past k are the next characters' to write (cm has room)
            for (size_t q = 0; q < k; ++q) at[c + q] = uint32_t(i + q);
            if (cs.byte_map)
                for (size_t q = 0; q < k; ++q) w.ci[i + q] = uint32_t(c + q);
            c += k, i += k;  // s[i] >= 0x80 now
        }
        at[c] = uint32_t(i);
        if (cs.byte_map) w.ci[i] = uint32_t(c);
        if (s[i] < 0x80) {
            cm[c++] = cs.ascii8[s[i++]];
            continue;
        }
        uint32_t len;
        const uint32_t cp = utf8_decode(s, n, i, len);
        cm[c] = cp < 0x10000 ? cs.bmp8[cp] : wide_class8(p, cs, cp);
        ++c;
        i += len;
    }
    if (w.identity == 0) {
        at[c] = uint32_t(n);
        if (cs.byte_map) w.ci[n] = uint32_t(c);
    }
    w.nchars = c;
    w.nw = c / 64 + 1;  // up to the end's bit (c): every loop over the words stops at nw, none reads past it
    std::memset(cm + c, 0, 64 * w.nw - c);
    for (size_t u = 0; u < cs.nbits; ++u)
        if (w.bits[u].size() < w.nw) w.bits[u].resize(w.nw);
#if defined(__x86_64__)
    if (vbmi) {
        gather_bits_vbmi(cm, w.nw, cs.nbits, w.bits);
    } else if (tier == kTierAvx2) {
        gather_bits_avx2(cm, w.nw, cs.nbits, w.bits);
    } else
#endif
    for (size_t u = 0; u < cs.nbits; ++u) {
        auto& b = w.bits[u];
        for (size_t j = 0; j < w.nw; ++j) {
#if defined(__SSE2__)
            const __m128i shift = _mm_cvtsi32_si128(int(7 - u));
            uint64_t x = 0;
            for (size_t q = 0; q < 4; ++q) {
                const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cm + 64 * j + 16 * q));
                x |= uint64_t(uint32_t(_mm_movemask_epi8(_mm_sll_epi16(v, shift)))) << (16 * q);
            }
            b[j] = x;
#else
            uint64_t x = 0;
            for (size_t t = 0; t < 64; ++t) x |= uint64_t((cm[64 * j + t] >> u) & 1) << t;
            b[j] = x;
#endif
        }
    }
    // The first-level pieces' starts (when the stage was split piece by piece), and the end.
    w.walls.assign(w.nw, 0);
    set_bit(w.walls.data(), 0);
    set_bit(w.walls.data(), c);
    if (!cs.local0)
        for (size_t e : w.first)
            if (w.ci[e] <= c && at[w.ci[e]] == e) set_bit(w.walls.data(), w.ci[e]);
}

// Keep the window's first `cut` characters (their piece starts are final): the rest is the next window's.
BPE_RX_NOIPA void truncate_window(const Cascade& cs, Window& w, size_t cut) {
    const size_t j = cut >> 6;
    const uint64_t keep = (uint64_t(1) << (cut & 63)) - 1;
    auto clip = [&](std::vector<uint64_t>& b) {
        b[j] &= keep;
        std::fill(b.begin() + long(j) + 1, b.begin() + long(w.nw), 0);
    };
    for (size_t u = 0; u < cs.nbits; ++u) clip(w.bits[u]);
    clip(w.walls);
    set_bit(w.walls.data(), cut);
    w.nchars = cut;
}

// SimpleLoops' characters: a window's, [.., end) of one fragment, by their class masks (Cascade::bits).
struct WinChars {
    const uint8_t* cm;
    const uint32_t* at;
    const uint8_t* s;  // the window's bytes
    size_t end;
    uint32_t mask(size_t i, uint32_t& len) const {
        len = 1;
        return cm[i];
    }
    bool final_newline(size_t x) const { return x + 1 == end && s[at[x]] == '\n'; }
};

// Bit i of the result: bit i + 1 of x (the next character's).
inline uint64_t next_bits(const uint64_t* x, size_t j, size_t nw) {
    return (x[j] >> 1) | (j + 1 < nw ? x[j + 1] << 63 : 0);
}

// GPT-2's regex (r50k) on each fragment, on bits: a piece starts where the character's kind (\p{L}, \p{N}, \s,
// other) changes; in a run of \s followed by another kind, its last character starts a piece of its own, and joins
// the run after it when it is the space (` ?\p{L}+`, ...); then a contraction ('s 't 'm 'd 'll 've 're) at a piece
// start that is an apostrophe is a piece. w.old: the fragments' starts; `base`: the bit of \p{L} (Cascade::r50k).
void r50k_stage(Window& w, const uint8_t* s, size_t base) {
    uint64_t* W = w.walls.data();
    const uint64_t* O = w.old.data();
    const uint64_t *L = w.bits[base].data(), *N = w.bits[base + 1].data(), *S = w.bits[base + 2].data();
    const uint64_t *SP = w.bits[base + 3].data(), *AP = w.bits[base + 4].data();
    const size_t nw = w.nw;
    uint64_t join_carry = 0;  // a joining space at bit 63 of the last word: the piece start it removes is at bit 0
    for (size_t j = 0; j < nw; ++j) {
        const uint64_t change = (L[j] ^ prev_bits(L, j)) | (N[j] ^ prev_bits(N, j)) | (S[j] ^ prev_bits(S, j));
        // the last \s of a run that a character of another kind follows in the same fragment
        const uint64_t last_ws = S[j] & ~next_bits(S, j, nw) & ~next_bits(O, j, nw);
        const uint64_t joins = last_ws & SP[j];
        W[j] = (O[j] | change | last_ws) & ~((joins << 1) | join_carry);
        join_carry = joins >> 63;
    }
    // contractions: few apostrophes, one at a time
    const uint32_t* at = w.at.data();
    const size_t nchars = w.nchars;
    for (size_t j = 0; j < nw; ++j) {
        uint64_t x = AP[j] & W[j];
        while (x) {
            const size_t p = (j << 6) | size_t(__builtin_ctzll(x));
            x &= x - 1;
            if (p + 1 >= nchars || get_bit(O, p + 1)) continue;
            const uint8_t a = s[at[p + 1]];
            size_t k = 0;
            if (a == 's' || a == 'd' || a == 'm' || a == 't') {
                k = 2;
            } else if (p + 2 < nchars && !get_bit(O, p + 2)) {
                const uint8_t b = s[at[p + 2]];
                if ((a == 'l' && b == 'l') || (a == 'v' && b == 'e') || (a == 'r' && b == 'e')) k = 3;
            }
            if (!k) continue;
            W[(p + 1) >> 6] &= ~(uint64_t(1) << ((p + 1) & 63));
            if (k == 3) W[(p + 2) >> 6] &= ~(uint64_t(1) << ((p + 2) & 63));
            set_bit(W, p + k);
        }
    }
}

// Refine w.walls by one stage: each fragment (from a piece start to the next) split by the stage's pattern.
BPE_RX_NOIPA void window_stage(const WinStage& st, const uint8_t* s, Window& w) {
    uint64_t* W = w.walls.data();
    const size_t nw = w.nw, nchars = w.nchars;
    const uint64_t* C = w.bits[st.c].data();
    switch (st.form) {
        case Form::kRuns:  // C+: a piece starts wherever membership changes
            for (size_t j = 0; j < nw; ++j) W[j] |= C[j] ^ prev_bits(C, j);
            return;
        case Form::kSingles:  // C: each C character is a piece
            for (size_t j = 0; j < nw; ++j) W[j] |= C[j] | prev_bits(C, j);
            return;
        case Form::kOptRuns: {  // A?C+, A and C disjoint: a run's piece starts one early behind an A of its fragment
            const uint64_t* A = w.bits[st.a].data();
            uint64_t sh_next = 0;
            for (size_t j = nw; j-- > 0;) {
                const uint64_t wall = W[j], cp = prev_bits(C, j), ap = prev_bits(A, j);
                const uint64_t starts = C[j] & (~cp | wall);
                const uint64_t early = starts & ap & ~wall;
                W[j] = wall | (~C[j] & cp) | (starts & ~early) | (early >> 1) | (sh_next << 63);
                sh_next = early;
            }
            return;
        }
        default:
            break;
    }
    w.old.assign(W, W + nw);
    const uint64_t* O = w.old.data();
    if (st.form == Form::kR50k) {
        r50k_stage(w, s, st.c);
        return;
    }
    if (st.form == Form::kEndRuns) {  // C+$: the run of C that ends its fragment (or its final newline) is a piece
        const uint32_t* at = w.at.data();
        for (size_t j = 0; j < nw; ++j) {
            // x: the last character of a fragment, in C; or a newline ending one, after a C of the same fragment
            const uint64_t last = (O[j] >> 1) | (j + 1 < nw ? O[j + 1] << 63 : 0);
            // (a fragment of one character, x itself a start, is one piece already)
            uint64_t cand = last & ~O[j] & (C[j] | prev_bits(C, j));
            while (cand) {
                const size_t x = (j << 6) | size_t(__builtin_ctzll(cand));
                cand &= cand - 1;
                if (x >= nchars) break;
                size_t end = x + 1;
                if (!get_bit(C, x)) {  // x is not C: a match only when it is the final newline
                    if (s[at[x]] != '\n') continue;
                    end = x;
                }
                // The run's first character: the last start of a run of C (a C after a non-C or at a piece start)
                // at or before end - 1, found a word at a time (a walk back a character at a time over indented
                // code's space runs was 2.6 of deepseek-llm's 18.2 Ir/byte).
                size_t k = (end - 1) >> 6;
                uint64_t rs = (C[k] & (~prev_bits(C, k) | O[k])) & ((uint64_t(2) << ((end - 1) & 63)) - 1);
                while (!rs) --k, rs = C[k] & (~prev_bits(C, k) | O[k]);
                set_bit(W, (k << 6) | size_t(63 - __builtin_clzll(rs)));
                set_bit(W, end);
            }
        }
        return;
    }
    if (st.form == Form::kCounted) {  // C{m,M}: a run's matches from its start; a short rest joins the gap after it
        for (size_t j = 0; j < nw; ++j) {
            uint64_t starts = C[j] & (~prev_bits(C, j) | O[j]);
            while (starts) {
                const size_t r = (j << 6) | size_t(__builtin_ctzll(starts));
                starts &= starts - 1;
                if (r >= nchars) break;
                size_t e = r + 1;
                while (e < nchars && get_bit(C, e) && !get_bit(O, e)) ++e;
                size_t pos = r;
                while (e - pos >= st.sm.min) {
                    set_bit(W, pos);
                    pos += std::min<size_t>(st.sm.max, e - pos);
                    set_bit(W, pos);
                }
            }
        }
        return;
    }
    for (size_t a = 0; a < nchars;) {
        const size_t b = next_bit(O, a + 1);
        if (st.form == Form::kDelegate) {
            const uint32_t* at = w.at.data();
            const uint32_t* ci = w.ci.data();
            const size_t off = at[a], len = at[b] - off;
            size_t ends[64], pos = 0;
            while (pos < len) {
                // the block splitter where the fragment is long enough for its blocks (it is exactly the scalar one)
                const size_t k = len >= kBlockFragment
                                     ? pretok_blocks_split_some(st.delegate, s + off, len, &pos, ends, 64)
                                     : pretok_split_some(st.delegate, s + off, len, &pos, ends, 64);
                for (size_t q = 0; q < k; ++q) {
                    if (ends[q] >= len) continue;
                    const uint32_t ch = ci[off + ends[q]];  // a character's start (checked: ci is stale elsewhere)
                    if (ch < b && at[ch] == off + ends[q]) set_bit(W, ch);
                }
                if (k == 0) break;
            }
        } else {
            const WinChars chars{w.cm.data(), w.at.data(), s, b};
            const SimpleLoops<WinChars> loops{st.sm, chars};
            for (size_t pos = a; pos < b;) {
                pos = loops.next(pos);
                if (pos < b) set_bit(W, pos);
            }
        }
        a = b;
    }
}

// The pieces of the window s[0:n] (first-level piece ends in w.first), as absolute ends base + .. written to out from
// its start (grown, never shrunk); returns how many.
BPE_RX_NOIPA size_t split_window(const Program& p, const uint8_t* s, size_t n, size_t base, Window& w,
                                  std::vector<size_t>& out, const Matcher& m) {
    const Cascade& cs = p.cascade;
    for (size_t i = 1; i < cs.stages.size(); ++i) {
        m.spend(1 + n / 8);
        window_stage(cs.stages[i], s, w);
    }
    // The piece starts after the first, then the end (bit nchars, the last): counted, then written through a pointer
    // (a push_back per piece re-derived a thread-local's address each time: a __tls_get_addr call per piece).
    const uint64_t* W = w.walls.data();
    const uint32_t* at = w.at.data();
    // Room for a piece per character (grown, never shrunk) instead of a count of the bits first: popcount is a
    // libgcc call without -mpopcnt (0.33 Ir/byte).
    const size_t last = w.nchars >> 6;
    if (out.size() < w.nchars) out.resize(w.nchars);
    size_t* const first = out.data();
    size_t* o = first;
    if (w.identity > w.nchars) {  // an ASCII window: a character's offset is its index (no load of at[] a piece)
        for (size_t j = 0; j <= last; ++j) {
            uint64_t x = W[j] & (j == 0 ? ~uint64_t(1) : ~uint64_t(0));
            while (x) {
                *o++ = base + ((j << 6) | size_t(__builtin_ctzll(x)));
                x &= x - 1;
            }
        }
        return size_t(o - first);
    }
    for (size_t j = 0; j <= last; ++j) {
        uint64_t x = W[j] & (j == 0 ? ~uint64_t(1) : ~uint64_t(0));
        while (x) {
            const size_t i = (j << 6) | size_t(__builtin_ctzll(x));
            x &= x - 1;
            *o++ = base + at[i];  // at[nchars] = n
        }
    }
    return size_t(o - first);
}

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
    build_cascade(*prog);
    std::lock_guard<std::mutex> lock(g_mutex);
    g_programs.push_back(std::move(prog));
    const size_t index = g_programs.size() - 1;
    if (index < kFastPrograms) g_fast[index].store(g_programs.back().get(), std::memory_order_release);
    return static_cast<Pretok>(kRxBase + static_cast<int>(index));
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

const char* rx_tier() {
    const int t = window_tier();
    return t == kTierVbmi ? "vbmi" : t == kTierAvx2 ? "avx2" : "sse2";
}

void rx_set_tier(const std::string& tier) {
    if (tier == "sse2")
        g_tier.store(kTierSse2);
    else if (tier == "avx2" && cpu_has_avx2())
        g_tier.store(kTierAvx2);
    else if (tier == "auto")
        g_tier.store(cpu_has_vbmi() ? kTierVbmi : cpu_has_avx2() ? kTierAvx2 : kTierSse2);
    else
        throw std::invalid_argument("pretok_rx_tier: a tier of auto, avx2 (on a CPU that has it) or sse2, not '" +
                                    tier + "'");
}

namespace {
// The thread's matcher state, found once a call: each thread-local named in a function was a __tls_get_addr call
// (4.5% of fortunes_multi's short documents under deepseek-llm).
struct ThreadRefs {
    Budget& budget;
    Pending& pending;
    std::vector<size_t>& stack;
    Window& window;
};
ThreadRefs thread_refs() { return {t_budget, t_pending, t_stack, t_window}; }

size_t split_some_budgeted(const ThreadRefs& t, const Program& p, const uint8_t* text, size_t n, size_t* pos,
                           size_t* ends, size_t max);
}  // namespace

void rx_split(Pretok kind, const uint8_t* text, size_t n, std::vector<size_t>& ends) {
    const Program& p = program_of(kind);
    const ThreadRefs t = thread_refs();
    t.budget.reset(p, text, n);
    t.stack.clear();
    const size_t first = ends.size();
    try {
        if (p.cascade.on && n) {
            size_t pos = 0, batch[256];
            t.pending.count = 0, t.pending.next = 0;
            while (pos < n) {
                const size_t k = split_some_budgeted(t, p, text, n, &pos, batch, 256);
                ends.insert(ends.end(), batch, batch + k);
            }
        } else {
            split_level(p, 0, text, n, 0, ends, t.stack);
        }
    } catch (const RxStopped&) {  // a tiling all the same: the rest as one piece
        t.pending.count = 0, t.pending.next = 0;
        if (ends.size() == first || ends.back() < n) ends.push_back(n);
    } catch (...) {
        t.pending.count = 0, t.pending.next = 0;
        throw;
    }
}

namespace {

size_t split_some_budgeted(const ThreadRefs& t, const Program& p, const uint8_t* text, size_t n, size_t* pos,
                           size_t* ends, size_t max) {
    Pending& pend = t.pending;
    std::vector<size_t>& stack = t.stack;
    const bool resume = *pos != 0 && pend.program == &p && pend.text == text && pend.n == n &&
                        pend.next < pend.count && pend.next > 0 && pend.ends[pend.next - 1] == *pos;
    size_t k = 0;
    if (!resume) pend.count = 0, pend.next = 0;
    while (k < max) {
        if (pend.next == pend.count) {
            if (*pos >= n) break;
            // The next first-level piece from *pos, split by the other patterns.
            pend.count = 0;
            pend.next = 0;
            pend.program = &p;
            pend.text = text;
            pend.n = n;
            const size_t start = *pos;
            Matcher m{p, text, n, stack, t.budget};
            if (p.cascade.on && p.cascade.local0) {  // the first stage too on the window, cut where it is final
                Window& w = t.window;
                size_t want = kWindowBytes;
                for (;;) {
                    size_t end = start + std::min(want, n - start);
                    while (end < n && (text[end] & 0xC0) == 0x80) ++end;  // a character boundary
                    classify_window(p, text + start, end - start, w);
                    window_stage(p.cascade.stages[0], text + start, w);
                    if (end == n) break;
                    // A piece start at i depends on characters i - 1 to i + 1: those before the last two are final.
                    size_t cut = 0;
                    if (w.nchars >= 3) {
                        const size_t lim = w.nchars - 2;
                        size_t j = lim >> 6;
                        uint64_t x = w.walls[j] & ((uint64_t(2) << (lim & 63)) - 1);
                        if (j == 0) x &= ~uint64_t(1);  // the window's own start
                        while (!x && j > 0) {
                            --j;
                            x = w.walls[j] & (j == 0 ? ~uint64_t(1) : ~uint64_t(0));
                        }
                        if (x) cut = (j << 6) | size_t(63 - __builtin_clzll(x));
                    }
                    if (cut) {
                        truncate_window(p.cascade, w, cut);
                        break;
                    }
                    want *= 2;
                }
                const size_t bytes = w.at[w.nchars];
                m.spend(1 + bytes / 8);
                pend.count = split_window(p, text + start, bytes, start, w, pend.ends, m);
                continue;
            }
            if (p.cascade.on) {  // first-level pieces until the window is full, then the other stages on it
                Window& w = t.window;
                w.first.clear();
                size_t at = start;
                while (at < n && at - start < kWindowBytes) {
                    if (p.patterns[0].delegate != Pretok::kNone) {
                        size_t got[64];
                        const size_t k0 = pretok_split_some(p.patterns[0].delegate, text, n, &at, got, 64);
                        for (size_t q = 0; q < k0; ++q) w.first.push_back(got[q] - start);
                    } else {
                        at = m.next_piece(p.patterns[0], at);
                        w.first.push_back(at - start);
                    }
                }
                classify_window(p, text + start, at - start, w);
                pend.count = split_window(p, text + start, at - start, start, w, pend.ends, m);
                continue;
            }
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
            pend.ends.clear();
            split_level(p, 1, text + start, end - start, start, pend.ends, stack);
            pend.count = pend.ends.size();
        }
        const size_t take = std::min(max - k, pend.count - pend.next);
        std::memcpy(ends + k, pend.ends.data() + pend.next, take * sizeof(size_t));
        k += take, pend.next += take;
        *pos = ends[k - 1];
    }
    return k;
}

}  // namespace

size_t rx_split_some(Pretok kind, const uint8_t* text, size_t n, size_t* pos, size_t* ends, size_t max) {
    const Program& p = program_of(kind);
    if (max == 0 || *pos >= n) return 0;
    const ThreadRefs t = thread_refs();
    if (*pos == 0 || !t.budget.fresh_for(p, text, n)) t.budget.reset(p, text, n);
    try {
        return split_some_budgeted(t, p, text, n, pos, ends, max);
    } catch (...) {
        t.pending.count = 0, t.pending.next = 0;
        t.stack.clear();
        t.budget.program = nullptr;
        if (!stopped()) throw;  // RxBudgetExceeded, or an allocation failure
        ends[0] = n;  // Ctrl-C: a tiling all the same, the rest as one piece
        *pos = n;
        return 1;
    }
}

}  // namespace bpe
