// The piece table: the ids of pieces of 1-15 bytes, keyed by their bytes as one 128-bit key (issue 21;
// GigaToken's ShortPretokenCache taught the layout, the code is ours).
//
// - A slot is 32 bytes, two to a 64-byte line: the key (bytes 0-7 in lo; bytes 8-14 and the length in hi), a count
//   in hi's bits 60-62 (bit 63: a tagged key, PieceTable::kTagBit) and up to 4 ids inline. A piece of more than 4 tokens keeps its ids in a spill arena.
// - Open addressing by lines, linear probing. The probe compares both slots of a line and picks the match with a
//   select, not a branch; a hit stores 4 ids unconditionally and advances by the count.
// - One table per worker (ChunkCache), seeded with the encoder's ids for every vocabulary entry of 1-15 bytes (an
//   image built once per Encoder and copied), so that only pieces that are not tokens ever miss; kept across calls.
// - Bounded: it doubles at 3/4 load while the doubled table stays under the encoder's cache limit, and is reset to
//   the seed image when it would not (a generational reset, counted).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace bpe {

constexpr size_t kPieceMax = 15;  // the longest piece the table keys

struct PieceKey {
    uint64_t lo;  // bytes 0-7, little-endian, zero-padded
    uint64_t hi;  // bytes 8-14 in the low 7 bytes, zero-padded; the length (1-15) in the top byte
};

// The key of p[0:n], n in [1, 15], from loads inside [p, p + n) only (near the end of a buffer).
inline PieceKey piece_key(const uint8_t* p, size_t n) {
    uint64_t lo, hi = 0;
    if (n >= 8) {
        std::memcpy(&lo, p, 8);
        uint64_t b;
        std::memcpy(&b, p + n - 8, 8);
        hi = n == 8 ? 0 : b >> (8 * (16 - n));
    } else if (n >= 4) {
        uint32_t a, b;
        std::memcpy(&a, p, 4);
        std::memcpy(&b, p + n - 4, 4);
        lo = a | (uint64_t(b) << (8 * (n - 4)));
    } else if (n >= 2) {
        uint16_t a;
        std::memcpy(&a, p, 2);
        lo = a | (uint64_t(p[n - 1]) << (8 * (n - 1)));
    } else {
        lo = p[0];
    }
    return PieceKey{lo, hi | (uint64_t(n) << 56)};
}

// Byte masks by length: kept bytes of lo and of hi.
struct PieceMasks {
    uint64_t lo[16];
    uint64_t hi[16];
    constexpr PieceMasks() : lo(), hi() {
        for (size_t n = 0; n < 16; ++n) {
            lo[n] = n >= 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * n)) - 1;
            hi[n] = n <= 8 ? 0 : (uint64_t(1) << (8 * (n - 8))) - 1;
        }
    }
};
inline constexpr PieceMasks kPieceMasks{};

// The same key from one 16-byte load at p (p + 16 must be readable) and two masks: no branch on the length. With
// the ladder of piece_key on every piece, its branches were 0.49 of the 2.7 mispredicts per piece (callgrind).
inline PieceKey piece_key_wide(const uint8_t* p, size_t n) {
    uint64_t a, b;
    std::memcpy(&a, p, 8);
    std::memcpy(&b, p + 8, 8);
    return PieceKey{a & kPieceMasks.lo[n], (b & kPieceMasks.hi[n]) | (uint64_t(n) << 56)};
}

inline uint64_t piece_hash(PieceKey k) {
    return (k.lo ^ (k.hi * 0xC2B2AE3D27D4EB4Full) ^ (k.hi >> 29)) * 0x9E3779B97F4A7C15ull;
}

// Memory for tables of a few MB: 2 MiB-aligned, transparent huge pages asked for before the first touch (a TLB miss
// per probe otherwise), zeroed by the kernel (no memset of a fresh table).
class HugeBuffer {
  public:
    HugeBuffer() = default;
    explicit HugeBuffer(size_t bytes) : size_(bytes) {
        if (!bytes) return;
        constexpr size_t kHuge = size_t(2) << 20;
        if (bytes < kHuge) {
            raw_ = std::calloc(1, bytes + 64);
            if (!raw_) throw std::bad_alloc();
            data_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw_) + 63) & ~uintptr_t(63));
            return;
        }
        mapped_ = bytes + kHuge;
        void* m = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) throw std::bad_alloc();
        raw_ = m;
        data_ = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(m) + kHuge - 1) & ~uintptr_t(kHuge - 1));
#ifdef MADV_HUGEPAGE
        madvise(data_, bytes, MADV_HUGEPAGE);
#endif
    }
    HugeBuffer(const HugeBuffer&) = delete;
    HugeBuffer& operator=(const HugeBuffer&) = delete;
    HugeBuffer(HugeBuffer&& o) noexcept { swap(o); }
    HugeBuffer& operator=(HugeBuffer&& o) noexcept {
        HugeBuffer tmp(std::move(o));
        swap(tmp);
        return *this;
    }
    ~HugeBuffer() {
        if (mapped_)
            munmap(raw_, mapped_);
        else
            std::free(raw_);
    }
    uint8_t* data() const { return data_; }
    size_t size() const { return size_; }

  private:
    void swap(HugeBuffer& o) noexcept {
        std::swap(raw_, o.raw_);
        std::swap(data_, o.data_);
        std::swap(size_, o.size_);
        std::swap(mapped_, o.mapped_);
    }
    void* raw_ = nullptr;
    uint8_t* data_ = nullptr;
    size_t size_ = 0;
    size_t mapped_ = 0;
};

class PieceTable {
  public:
    static constexpr unsigned kCountShift = 60;  // the count in bits 60-62
    // A second key space: bit 63 of hi, which no piece's key has (the encoder's added tokens, Encoder::set_literals).
    static constexpr uint64_t kTagBit = uint64_t(1) << 63;
    static constexpr uint64_t kKeyHiMask = ~(uint64_t(7) << kCountShift);
    static constexpr size_t kInline = 4;
    static constexpr size_t kMinLines = 16;

    struct Slot {
        uint64_t lo;
        uint64_t hi;  // key hi | count << 60 (count 1-4: inline ids; 0: ids[0] = spill offset, ids[1] = count)
        uint32_t ids[kInline];
    };
    static_assert(sizeof(Slot) == 32, "two slots a cache line");

    PieceTable() { allocate(kMinLines); }
    explicit PieceTable(size_t expected) { allocate(lines_for(expected)); }

    // Lines for `expected` pieces at load <= 1/2.
    static size_t lines_for(size_t expected) {
        size_t lines = kMinLines;
        while (lines * 2 < 2 * expected) lines <<= 1;
        return lines;
    }

    size_t line_of(uint64_t h) const { return static_cast<size_t>(h >> shift_); }
    void prefetch(uint64_t h) const { __builtin_prefetch(slots_ + 2 * line_of(h), 0, 3); }
    void prefetch_l2(uint64_t h) const { __builtin_prefetch(slots_ + 2 * line_of(h), 0, 2); }

    // A copy of where the slots are, for a loop that also stores ids: through `this`, every store to a uint32_t
    // output could alias the table's fields and forced them to be reloaded per piece.
    struct View {
        const Slot* slots;
        unsigned shift;
        const Slot* line(uint64_t h) const { return slots + 2 * static_cast<size_t>(h >> shift); }
    };
    View view() const { return View{slots_, shift_}; }

    // The fast path: a hit with inline ids stores 4 ids at dst (dst has room) and returns dst + count; anything else
    // (a miss, a key further along its probe run, a spilled piece) returns nullptr for the slow path. Both slots are
    // compared without a branch and the match picked by a select: with `&&` compares, 0.17 mispredicts per piece.
    static uint32_t* emit(const Slot* s, PieceKey k, uint32_t* dst) {
        const bool m0 = ((s[0].lo ^ k.lo) | ((s[0].hi ^ k.hi) & kKeyHiMask)) == 0;
        const bool m1 = ((s[1].lo ^ k.lo) | ((s[1].hi ^ k.hi) & kKeyHiMask)) == 0;
        const Slot* hit = s + m1;  // arithmetic, not `?:`: GCC made both selects branches (0.14 mispredicts a piece)
        const size_t count = static_cast<size_t>(hit->hi >> kCountShift) & 7 & (size_t(0) - size_t(m0 | m1));
        if (__builtin_expect(count == 0, 0)) return nullptr;
        std::memcpy(dst, hit->ids, sizeof hit->ids);
        return dst + count;
    }
    uint32_t* emit(PieceKey k, uint64_t h, uint32_t* dst) const { return emit(view().line(h), k, dst); }

    // The slow path's lookup: the ids of k stored at dst (dst has room for 15 + kInline) and the end, or nullptr if
    // k is absent (then *free_slot is where it goes).
    uint32_t* find(PieceKey k, uint64_t h, uint32_t* dst, size_t* free_slot) const {
        for (size_t line = line_of(h);; line = (line + 1) & line_mask_) {
            for (size_t w = 0; w < 2; ++w) {
                const Slot& s = slots_[2 * line + w];
                if (s.hi == 0) {
                    *free_slot = 2 * line + w;
                    return nullptr;
                }
                if (s.lo == k.lo && ((s.hi ^ k.hi) & kKeyHiMask) == 0) return ids_of(s, dst);
            }
        }
    }

    // Insert k (absent; free_slot from find) with ids[0:count], count in [1, 15]. False when the table is full
    // (3/4 load): the caller grows or resets it and inserts again.
    bool insert_at(size_t free_slot, PieceKey k, const uint32_t* ids, size_t count) {
        if (4 * (size_ + 1) > 3 * 2 * lines_) return false;
        place(slots_[free_slot], k, ids, count);
        ++size_;
        return true;
    }
    bool insert(PieceKey k, uint64_t h, const uint32_t* ids, size_t count) {
        uint32_t scratch[kPieceMax + kInline];
        size_t free_slot = 0;
        if (find(k, h, scratch, &free_slot)) return true;  // the first one stays
        return insert_at(free_slot, k, ids, count);
    }

    // The table doubled (every entry rehashed), at the same spill arena.
    void grow() {
        PieceTable bigger;
        bigger.allocate(lines_ * 2);
        for (size_t i = 0; i < 2 * lines_; ++i) {
            const Slot& s = slots_[i];
            if (s.hi == 0) continue;
            PieceKey k{s.lo, s.hi & kKeyHiMask};
            for (size_t line = bigger.line_of(piece_hash(k));; line = (line + 1) & bigger.line_mask_) {
                Slot* t = bigger.slots_ + 2 * line;
                if (t[0].hi == 0) {
                    t[0] = s;
                    break;
                }
                if (t[1].hi == 0) {
                    t[1] = s;
                    break;
                }
            }
        }
        bigger.size_ = size_;
        bigger.spill_ = std::move(spill_);
        *this = std::move(bigger);
    }

    // This table made a copy of `image` (the seed image: same slots, same spill arena).
    void copy_from(const PieceTable& image) {
        if (lines_ != image.lines_) allocate(image.lines_);
        std::memcpy(slots_, image.slots_, 2 * lines_ * sizeof(Slot));
        size_ = image.size_;
        spill_ = image.spill_;
    }

    size_t size() const { return size_; }
    size_t lines() const { return lines_; }
    size_t bytes() const { return 2 * lines_ * sizeof(Slot) + spill_.capacity() * sizeof(uint32_t); }
    size_t bytes_if_grown() const { return 4 * lines_ * sizeof(Slot) + spill_.capacity() * sizeof(uint32_t); }

  private:
    void allocate(size_t lines) {
        buffer_ = HugeBuffer(2 * lines * sizeof(Slot));
        slots_ = reinterpret_cast<Slot*>(buffer_.data());
        lines_ = lines;
        line_mask_ = lines - 1;
        shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(lines));
        size_ = 0;
    }
    uint32_t* ids_of(const Slot& s, uint32_t* dst) const {
        const size_t count = static_cast<size_t>(s.hi >> kCountShift) & 7;
        if (count) {
            std::memcpy(dst, s.ids, sizeof s.ids);
            return dst + count;
        }
        std::memcpy(dst, spill_.data() + s.ids[0], s.ids[1] * sizeof(uint32_t));
        return dst + s.ids[1];
    }
    void place(Slot& s, PieceKey k, const uint32_t* ids, size_t count) {
        s.lo = k.lo;
        if (count <= kInline) {
            s.hi = k.hi | (uint64_t(count) << kCountShift);
            for (size_t i = 0; i < kInline; ++i) s.ids[i] = i < count ? ids[i] : 0;
            return;
        }
        s.hi = k.hi;  // count 0: spilled
        s.ids[0] = static_cast<uint32_t>(spill_.size());
        s.ids[1] = static_cast<uint32_t>(count);
        s.ids[2] = s.ids[3] = 0;
        spill_.insert(spill_.end(), ids, ids + count);
    }

    HugeBuffer buffer_;
    Slot* slots_ = nullptr;
    size_t lines_ = 0;
    size_t line_mask_ = 0;
    unsigned shift_ = 64;
    size_t size_ = 0;
    std::vector<uint32_t> spill_;  // ids of pieces of more than kInline tokens
};

}  // namespace bpe
