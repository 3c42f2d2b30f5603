// Flat batch encoding (included by encoder_bindings.cpp only): many documents in, one array of ids and one of offsets out
// (bpe_core/encode/flat.py, Tokenizer.encode_ordinary_flat), without a Python object per token or per document.
//
// The documents are Sources (batch.h): the code points of Python str objects, or the UTF-8 of an Arrow string
// array read in place from its buffers (validated first, validate_utf8_offsets). With one thread the caller
// encodes every document into one buffer with the GIL released; with more, the documents are cut into blocks of
// consecutive documents, handed out largest first (schedule_largest_first), each block encoded into its own
// buffer, and the buffers copied once into the result in input order (assemble_flat).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "batch.h"
#include "encoder.h"
#include "utf8.h"

namespace bpe {

// ------------------------------------------------------------------------------------------ arrow validation

// The offsets of an Arrow string array (int32 or int64, `n + 1` of them) as int64.
inline int64_t arrow_offset(const void* offsets, int width, size_t i) {
    if (width == 4) {
        int32_t v;
        std::memcpy(&v, static_cast<const uint8_t*>(offsets) + 4 * i, 4);
        return v;
    }
    int64_t v;
    std::memcpy(&v, static_cast<const uint8_t*>(offsets) + 8 * i, 8);
    return v;
}

// An Arrow string array's elements checked: offsets that never decrease and stay inside the data buffer
// (`data_size` bytes), and strict UTF-8. Returns -1, or the first bad element's index with what is wrong with it
// in `problem` (and the byte offset inside the element in `at`).
inline int64_t validate_utf8_offsets(const void* offsets, int width, const uint8_t* data, size_t data_size, size_t n,
                                     std::string* problem, int64_t* at) {
    for (size_t i = 0; i < n; ++i) {
        int64_t a = arrow_offset(offsets, width, i), b = arrow_offset(offsets, width, i + 1);
        if (a < 0 || b < a || static_cast<uint64_t>(b) > data_size) {
            *problem = "offsets";
            *at = 0;
            return static_cast<int64_t>(i);
        }
        size_t len = static_cast<size_t>(b - a);
        size_t bad = utf8_first_invalid(data + a, len);
        if (bad != len) {
            *problem = "utf8";
            *at = static_cast<int64_t>(bad);
            return static_cast<int64_t>(i);
        }
    }
    return -1;
}

// ------------------------------------------------------------------------------------------ flat encoding

// A growable array of ids that is never zero-filled: std::vector::resize wrote every slot before the encoder did
// (6% of a warm cl100k encode's instructions). malloc'd, so that the result array can take it over (release).
class IdBuffer {
  public:
    IdBuffer() = default;
    IdBuffer(IdBuffer&& o) noexcept : data_(o.data_), size_(o.size_), cap_(o.cap_) { o.data_ = nullptr; }
    IdBuffer& operator=(IdBuffer&& o) noexcept {
        std::swap(data_, o.data_);
        std::swap(size_, o.size_);
        std::swap(cap_, o.cap_);
        return *this;
    }
    ~IdBuffer() { std::free(data_); }
    // Room for `extra` more ids at the end (written by the caller, then commit).
    uint32_t* room(size_t extra) {
        if (size_ + extra > cap_) grow(size_ + extra);
        return data_ + size_;
    }
    void commit(uint32_t* end) { size_ = static_cast<size_t>(end - data_); }
    size_t size() const { return size_; }
    const uint32_t* data() const { return data_; }
    uint32_t* release() {
        uint32_t* p = data_;
        data_ = nullptr;
        size_ = cap_ = 0;
        return p;
    }

  private:
    void grow(size_t need) {
        size_t cap = std::max({need, cap_ * 2, size_t(1024)});
        void* p = std::realloc(data_, cap * sizeof(uint32_t));
        if (!p) throw std::bad_alloc();
        data_ = static_cast<uint32_t*>(p);
        cap_ = cap;
    }
    uint32_t* data_ = nullptr;
    size_t size_ = 0, cap_ = 0;
};

// Consecutive documents [begin, end) encoded into one buffer.
struct FlatBlock {
    size_t begin = 0, end = 0;
    size_t units = 0;
    IdBuffer ids;
    int64_t bad_doc = -1;   // the first document of the block with a byte that has no token
    std::string bad_piece;  // its piece
};

// What encode_flat found out, for the caller (with the GIL): the ids of every document that was encoded.
struct FlatRun {
    std::vector<FlatBlock> blocks;
    std::vector<int64_t> counts;    // tokens per document
    std::vector<uint8_t> status;    // DocStatus per document
};

// Blocks of about `target` code units of consecutive documents (a longer document is a block of its own).
inline std::vector<FlatBlock> make_blocks(const std::vector<Source>& docs, size_t target) {
    std::vector<FlatBlock> blocks;
    FlatBlock b;
    for (size_t d = 0; d < docs.size(); ++d) {
        b.units += docs[d].length;
        b.end = d + 1;
        if (b.units >= target) {
            blocks.push_back(std::move(b));
            b = FlatBlock{};
            b.begin = b.end = d + 1;
        }
    }
    if (b.end > b.begin) blocks.push_back(std::move(b));
    return blocks;
}

// The order in which threads take the blocks: largest first, so that a long document is not the last thing a
// thread starts while the others idle (LPT scheduling). Blocks of equal size keep input order.
inline std::vector<uint32_t> schedule_largest_first(const std::vector<FlatBlock>& blocks) {
    std::vector<uint32_t> order(blocks.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return blocks[a].units > blocks[b].units; });
    return order;
}

// Encode one block's documents into block.ids (no GIL needed). A document whose str needs Python's surrogate rules
// gets no ids here (status kNeedsGil: the caller encodes it with the GIL); the block stops at its first document
// with a byte that has no token, and at a stop request.
inline void encode_block(const Encoder& enc, Pretok kind, const std::vector<Source>& docs, ChunkCache* cache,
                         Scratch& scratch, FlatBlock& block, FlatRun& run) {
    for (size_t d = block.begin; d < block.end; ++d) {
        const uint8_t* p;
        size_t size;
        if (!utf8_of(docs[d], scratch.utf8, &p, &size)) {
            run.status[d] = static_cast<uint8_t>(DocStatus::kNeedsGil);
            continue;
        }
        uint32_t* dst = block.ids.room(size + kPieceSlack);
        BadPiece piece;
        uint32_t* end = enc.encode_text_to(kind, p, size, cache, dst, &piece);
        if (stopped()) {
            run.status[d] = static_cast<uint8_t>(DocStatus::kStopped);
            return;
        }
        if (!end) {
            block.bad_doc = static_cast<int64_t>(d);
            block.bad_piece.assign(reinterpret_cast<const char*>(piece.data), piece.size);
            run.status[d] = static_cast<uint8_t>(DocStatus::kBadPiece);
            return;
        }
        block.ids.commit(end);
        run.counts[d] = static_cast<int64_t>(end - dst);
        run.status[d] = static_cast<uint8_t>(DocStatus::kDone);
    }
}

// The least text per block and the number of blocks per thread (more blocks: better balance, more copies).
constexpr size_t kFlatMinBlockUnits = size_t(1) << 15;
constexpr size_t kFlatMaxBlockUnits = size_t(1) << 20;
constexpr size_t kFlatBlocksPerThread = 16;

// Encode docs on `threads` threads (the caller included; it polls for Ctrl-C through `caller_check`, which sets
// `cancel`, and the others stop at their next poll). Without the GIL.
inline void encode_flat_blocks(const Encoder& enc, Pretok kind, CachePool& pool, const std::vector<Source>& docs,
                               size_t threads, size_t total_units, FlatRun& run, StopCheck* caller_check,
                               std::atomic<bool>& cancel) {
    size_t target = threads <= 1 ? ~size_t(0)
                                 : std::clamp(total_units / (threads * kFlatBlocksPerThread), kFlatMinBlockUnits,
                                              kFlatMaxBlockUnits);
    run.blocks = make_blocks(docs, target);
    run.counts.assign(docs.size(), 0);
    run.status.assign(docs.size(), static_cast<uint8_t>(DocStatus::kPending));
    std::vector<uint32_t> order = schedule_largest_first(run.blocks);
    std::atomic<size_t> next{0};
    std::mutex mutex;
    std::exception_ptr error;
    auto work = [&](StopCheck* check) {
        StopScope scope(check);
        try {
            CacheLease cache(pool);
            Scratch scratch;
            while (!cancel.load(std::memory_order_relaxed) && !stopped()) {
                size_t i = next.fetch_add(1, std::memory_order_relaxed);
                if (i >= order.size()) break;
                encode_block(enc, kind, docs, cache.get(), scratch, run.blocks[order[i]], run);
            }
        } catch (...) {
            std::lock_guard<std::mutex> lock(mutex);
            if (!error) error = std::current_exception();
            cancel.store(true);
        }
    };
    std::vector<std::thread> workers;
    std::vector<std::unique_ptr<FlagCheck>> checks;
    try {
        for (size_t t = 1; t < std::min(threads, run.blocks.size()); ++t) {
            checks.push_back(std::make_unique<FlagCheck>(cancel));
            workers.emplace_back(work, checks.back().get());
        }
    } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
        cancel.store(true);
    }
    work(caller_check);
    if (caller_check && caller_check->stopped()) cancel.store(true);
    for (auto& t : workers) t.join();
    if (error) std::rethrow_exception(error);
}

// A NumPy array that owns `data` (allocated with new[]).
template <class T>
nb::object owned_array(T* data, size_t n) {
    nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<T*>(p); });
    return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(data, {n}, owner));
}

// The blocks' ids copied in input order into one array of T, with the ids of the documents encoded afterwards with
// the GIL (`late`: document -> ids) in their places.
// A NumPy array that owns `data` (allocated with malloc).
template <class T>
nb::object malloc_array(T* data, size_t n) {
    nb::capsule owner(data, [](void* p) noexcept { std::free(p); });
    return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(data, {n}, owner));
}

// One block (one thread) and nothing encoded late: its buffer becomes the result, narrowed in place to T (each
// id is read before a narrower write can reach it), without a second array.
template <class T>
nb::object take_single_block(FlatRun& run, int64_t total) {
    uint32_t* ids = run.blocks[0].ids.release();
    if (!ids) ids = static_cast<uint32_t*>(std::malloc(sizeof(uint32_t)));
    if (!ids) throw std::bad_alloc();
    T* out = reinterpret_cast<T*>(ids);
    if (sizeof(T) < sizeof(uint32_t)) {
        for (int64_t k = 0; k < total; ++k) {
            T v = static_cast<T>(ids[k]);
            std::memcpy(out + k, &v, sizeof v);
        }
    }
    if (void* shrunk = std::realloc(out, std::max<size_t>(1, static_cast<size_t>(total)) * sizeof(T)))
        out = static_cast<T*>(shrunk);  // the slack of the doubling growth back to the allocator
    return malloc_array(out, static_cast<size_t>(total));
}

template <class T>
nb::object assemble_flat(FlatRun& run, const std::vector<std::pair<size_t, std::vector<uint32_t>>>& late,
                         int64_t total) {
    if (run.blocks.size() == 1 && late.empty()) return take_single_block<T>(run, total);
    T* out = new T[std::max<int64_t>(total, 1)];
    T* dst = out;
    size_t next_late = 0;
    for (const FlatBlock& b : run.blocks) {
        bool any_late = next_late < late.size() && late[next_late].first < b.end;
        if (!any_late) {
            const uint32_t* ids = b.ids.data();
            for (size_t k = 0; k < b.ids.size(); ++k) *dst++ = static_cast<T>(ids[k]);
            continue;
        }
        size_t cursor = 0;
        for (size_t d = b.begin; d < b.end; ++d) {
            if (next_late < late.size() && late[next_late].first == d) {
                for (uint32_t id : late[next_late].second) *dst++ = static_cast<T>(id);
                ++next_late;
                continue;
            }
            for (int64_t k = 0; k < run.counts[d]; ++k) *dst++ = static_cast<T>(b.ids.data()[cursor++]);
        }
    }
    return owned_array(out, static_cast<size_t>(total));
}

}  // namespace bpe
