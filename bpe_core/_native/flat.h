// Flat batch encoding (included by encoder_bindings.cpp only): many documents in, one array of ids and one of offsets out
// (bpe_core/encode/flat.py, Tokenizer.encode_ordinary_flat), without a Python object per token or per document.
//
// The documents are Sources (batch.h): the code points of Python str objects, or the UTF-8 of an Arrow string
// array read in place from its buffers (validated first, validate_utf8_offsets). The ids go to one buffer reserved
// at its upper bound from the texts' sizes (out_buffer.h: a region kept mapped between calls, lent to the NumPy
// array that the call returns). With one thread the caller encodes every document into it with the GIL released;
// with more, the documents are cut into blocks of consecutive documents, handed out largest first
// (schedule_largest_first), each block encoded at its own place in the buffer, which is then compacted in place
// (compact_flat).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "batch.h"
#include "encoder.h"
#include "out_buffer.h"
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

// The most UTF-8 bytes a source can have, so the most ids it can give (a token is at least one byte): a code unit
// of a 1-, 2- or 4-byte str is at most 2, 3 or 4 bytes of UTF-8 (the replacement of a lone surrogate, 3 bytes,
// included; a surrogate pair joined by the GIL path is 4 bytes from two units).
inline size_t utf8_bound(const Source& s) {
    return s.length * (s.width == 0 ? 1 : s.width == 1 ? 2 : s.width == 2 ? 3 : 4);
}

// Consecutive documents [begin, end), encoded into the run's buffer from `base` (in ids) on; it has `room` ids
// there: its documents' bounds and kPieceSlack (the last piece may store 4 ids past its end).
struct FlatBlock {
    size_t begin = 0, end = 0;
    size_t units = 0;  // code units (the scheduling order)
    size_t base = 0, room = 0;
    size_t count = 0;       // ids written from base on (and holes left for the documents encoded with the GIL)
    int64_t bad_doc = -1;   // the first document of the block with a byte that has no token
    std::string bad_piece;  // its piece
};

// What encode_flat_blocks found out, for the caller (with the GIL). Every block writes into one buffer, at the sum
// of the earlier blocks' rooms: no block's ids ever need to be moved to another buffer, and the result is the same
// buffer compacted in place (compact_flat), because a document's ids never start before the ids of the documents
// ahead of it end.
struct FlatRun {
    std::vector<FlatBlock> blocks;
    std::vector<int64_t> counts;  // tokens per document
    std::vector<size_t> starts;   // where each document's ids are in `ids` (before compaction)
    std::vector<uint8_t> status;  // DocStatus per document
    OutBuffer ids;                // uint32 ids; then, compacted, the result's T ids
    size_t room = 0;              // ids the blocks may write
};

// Blocks of about `target` code units of consecutive documents (a longer document is a block of its own), each
// with its place in the buffer.
inline std::vector<FlatBlock> make_blocks(const std::vector<Source>& docs, size_t target, size_t* room) {
    std::vector<FlatBlock> blocks;
    FlatBlock b;
    size_t at = 0;
    auto close = [&](size_t next) {
        b.base = at;
        b.room += kPieceSlack;
        at += b.room;
        blocks.push_back(std::move(b));
        b = FlatBlock{};
        b.begin = b.end = next;
    };
    for (size_t d = 0; d < docs.size(); ++d) {
        b.units += docs[d].length;
        b.room += utf8_bound(docs[d]);
        b.end = d + 1;
        if (b.units >= target) close(d + 1);
    }
    if (b.end > b.begin) close(b.end);
    *room = at;
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

// Encode one block's documents into the run's buffer (no GIL needed). A document whose str needs Python's
// surrogate rules gets a hole of its bound here (status kNeedsGil: the caller encodes it with the GIL into the
// hole); the block stops at its first document with a byte that has no token, and at a stop request.
inline void encode_block(const Encoder& enc, Pretok kind, const std::vector<Source>& docs, ChunkCache* cache,
                         Scratch& scratch, FlatBlock& block, FlatRun& run) {
    uint32_t* buf = run.ids.as<uint32_t>() + block.base;
    for (size_t d = block.begin; d < block.end; ++d) {
        run.starts[d] = block.base + block.count;
        const uint8_t* p;
        size_t size;
        if (!utf8_of(docs[d], scratch.utf8, &p, &size)) {
            run.status[d] = static_cast<uint8_t>(DocStatus::kNeedsGil);
            block.count += utf8_bound(docs[d]);
            continue;
        }
        uint32_t* dst = buf + block.count;  // room: this document's bound and the later ones', and kPieceSlack
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
        block.count += static_cast<size_t>(end - dst);
        run.counts[d] = static_cast<int64_t>(end - dst);
        run.status[d] = static_cast<uint8_t>(DocStatus::kDone);
    }
}

// The least text per block and the number of blocks per thread (more blocks: better balance, more copies).
constexpr size_t kFlatMinBlockUnits = size_t(1) << 15;
constexpr size_t kFlatMaxBlockUnits = size_t(1) << 20;
constexpr size_t kFlatBlocksPerThread = 16;

// Encode docs on `threads` threads (the caller included; it polls for Ctrl-C through `caller_check`, which sets
// `cancel`, and the others stop at their next poll) into a buffer from `regions`. Without the GIL.
inline void encode_flat_blocks(const Encoder& enc, Pretok kind, CachePool& pool,
                               const std::shared_ptr<RegionPool>& regions, const std::vector<Source>& docs,
                               size_t threads, size_t total_units, FlatRun& run, StopCheck* caller_check,
                               std::atomic<bool>& cancel) {
    size_t target = threads <= 1 ? ~size_t(0)
                                 : std::clamp(total_units / (threads * kFlatBlocksPerThread), kFlatMinBlockUnits,
                                              kFlatMaxBlockUnits);
    run.blocks = make_blocks(docs, target, &run.room);
    run.ids = OutBuffer(regions, std::max<size_t>(run.room, 1) * sizeof(uint32_t));
    run.counts.assign(docs.size(), 0);
    run.starts.assign(docs.size(), 0);
    run.status.assign(docs.size(), static_cast<uint8_t>(DocStatus::kPending));
    std::vector<uint32_t> order = schedule_largest_first(run.blocks);
    std::atomic<size_t> next{0};
    std::mutex mutex;
    std::exception_ptr error;
    auto work = [&](StopCheck* check, Scratch* scratch) {
        StopScope scope(check);
        try {
            CacheLease cache(pool);
            Scratch own;
            if (!scratch) scratch = &own;
            while (!cancel.load(std::memory_order_relaxed) && !stopped()) {
                size_t i = next.fetch_add(1, std::memory_order_relaxed);
                if (i >= order.size()) break;
                encode_block(enc, kind, docs, cache.get(), *scratch, run.blocks[order[i]], run);
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
            workers.emplace_back(work, checks.back().get(), nullptr);
        }
    } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) error = std::current_exception();
        cancel.store(true);
    }
    work(caller_check, &thread_scratch());  // the calling thread's scratch lives on (its pages stay mapped)
    if (caller_check && caller_check->stopped()) cancel.store(true);
    for (auto& t : workers) t.join();
    size_t written = 0;
    for (const FlatBlock& b : run.blocks) written = std::max(written, b.base + std::min(b.room, b.count + kPieceSlack));
    run.ids.wrote(written * sizeof(uint32_t));
    if (error) std::rethrow_exception(error);
}

// The ids of every document moved to their place in the result, in input order, as T, in the run's own buffer:
// the total. Document d's ids never start before the documents ahead of it end (each block starts after the bounds
// of every earlier document, and within a block each document starts after the ids or the bound of the ones ahead
// of it), and a T is never wider than the uint32 it replaces: each id is read before a write can reach it. With
// one block and no holes nothing moves (uint32) or only narrows (uint16).
template <class T>
size_t compact_flat(FlatRun& run) {
    const uint32_t* src = run.ids.as<uint32_t>();
    T* dst = run.ids.as<T>();
    size_t at = 0;
    for (size_t d = 0; d < run.counts.size(); ++d) {
        const size_t s = run.starts[d], c = static_cast<size_t>(run.counts[d]);
        if (sizeof(T) == sizeof(uint32_t)) {
            if (s != at && c) std::memmove(dst + at, src + s, c * sizeof(uint32_t));
        } else {
            for (size_t k = 0; k < c; ++k) {
                T v = static_cast<T>(src[s + k]);
                std::memcpy(dst + at + k, &v, sizeof v);
            }
        }
        at += c;
    }
    return at;
}

// A NumPy array of the first n T of `buffer`, which the array then owns (given back to its pool when NumPy frees
// it).
template <class T>
nb::object lend_array(OutBuffer&& buffer, size_t n) {
    OutBuffer* owned = new OutBuffer(std::move(buffer));
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<OutBuffer*>(p); });
    return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(owned->as<T>(), {n}, owner));
}

}  // namespace bpe
