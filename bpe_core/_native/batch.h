// Python texts read and encoded on native threads (included by the binding files only).
//
// The requests are read under the GIL into Sources: pointers to the code points of str objects (as CPython stores
// them: UCS1, UCS2 or UCS4) or to the bytes of bytes objects, which the request keeps alive and which are immutable.
// Workers then transcode to UTF-8, split and encode without the GIL; the calling thread keeps the GIL and builds the
// result lists in input order as the documents finish. Reading the code points in the workers, instead of calling
// PyUnicode_AsUTF8AndSize under the GIL, keeps the transcoding parallel and leaves no UTF-8 copy cached in each str.
//
// Measured on 20 MB of the shared corpora (1828 documents), on a shared 2-core machine at load 5-6, best of three:
// one thread 15.6 MB/s (cl100k) and 20.1 MB/s (o200k) of CPU time per document, 4.2x and 3.7x tiktoken's
// encode_ordinary; two threads 8.4 and 14.4 MB/s wall, 3.6x and 4.5x tiktoken's encode_ordinary_batch.
#pragma once

#include <nanobind/nanobind.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "encoder.h"
#include "transcode.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace bpe {

namespace nb = nanobind;

// One item of a request as a worker reads it.
struct Source {
    const void* data = nullptr;
    size_t length = 0;   // code units (str) or bytes
    uint8_t width = 0;   // 0: UTF-8 bytes (bytes, ASCII str); 1, 2, 4: a str's code unit size
    bool whole = false;  // a whole user text: a lone surrogate is replaced as tiktoken does (under the GIL);
                         // else a segment or piece of decoded bytes: U+DC80..U+DCFF are surrogateescape bytes
    int64_t id = -1;     // >= 0: a token id emitted as it is
    PyObject* object = nullptr;  // borrowed (the request holds it)
};

inline std::string type_name(PyObject* o) { return Py_TYPE(o)->tp_name; }

inline Source text_source(PyObject* o, bool whole) {
    Source s;
    s.whole = whole;
    s.object = o;
    if (PyUnicode_Check(o)) {
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(o) < 0) throw nb::python_error();
#endif
        s.data = PyUnicode_DATA(o);
        s.length = static_cast<size_t>(PyUnicode_GET_LENGTH(o));
        s.width = PyUnicode_IS_ASCII(o) ? 0 : static_cast<uint8_t>(PyUnicode_KIND(o));
#if PY_VERSION_HEX < 0x030E0000
        // The UTF-8 that CPython keeps in a str once something asked for it (PyUnicode_AsUTF8: GigaToken, a
        // C extension, ...): read as it is, not transcoded again. Read only where it exists; none is made here
        // (it would stay in every str for its lifetime). A str with a lone surrogate never has one.
        if (s.width != 0 && PyUnicode_IS_COMPACT(o)) {
            const auto* compact = reinterpret_cast<const PyCompactUnicodeObject*>(o);
            if (compact->utf8) {
                s.data = compact->utf8;
                s.length = static_cast<size_t>(compact->utf8_length);
                s.width = 0;
            }
        }
#endif
        return s;
    }
    if (PyBytes_Check(o)) {
        s.data = PyBytes_AS_STRING(o);
        s.length = static_cast<size_t>(PyBytes_GET_SIZE(o));
        return s;
    }
    if (whole) throw nb::type_error(("expected str or bytes, got " + type_name(o)).c_str());
    throw nb::type_error("encode requests hold str or bytes pieces and int token ids");
}

// A request: a whole text (str or bytes), or a sequence of segments or pieces (str, bytes) and token ids (int).
// `keep` receives the owners of what the sources point into (a tuple copy of a list: its items stay alive even if
// the list is changed while the workers read them).
inline void read_request(PyObject* request, std::vector<Source>& out, std::vector<nb::object>& keep) {
    if (PyUnicode_Check(request) || PyBytes_Check(request)) {
        out.push_back(text_source(request, true));
        return;
    }
    PyObject* tuple = PySequence_Tuple(request);
    if (!tuple) {
        PyErr_Clear();
        throw nb::type_error(("expected str or bytes, got " + type_name(request)).c_str());
    }
    keep.push_back(nb::steal(tuple));
    Py_ssize_t n = PyTuple_GET_SIZE(tuple);
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* o = PyTuple_GET_ITEM(tuple, i);
        if (PyLong_Check(o)) {
            long long id = PyLong_AsLongLong(o);
            if (id == -1 && PyErr_Occurred()) throw nb::python_error();
            if (id < 0 || id > 0xFFFFFFFFll) throw nb::value_error("token id out of range in an encode request");
            Source s;
            s.id = id;
            out.push_back(s);
        } else {
            out.push_back(text_source(o, false));
        }
    }
}

// The UTF-8 of a source without the GIL: a pointer into the object, or into buf after transcoding. False where a
// surrogate needs Python's rules (utf8_with_gil).
// Runs of ASCII code units copied 16 at a time (SSE2): the UCS-1/UCS-2 text of mostly-ASCII documents (a few
// accented letters or curly quotes make a str non-ASCII) was transcoded a unit at a time, 2.2 instructions per byte
// of a warm cl100k call on the bench's text (encoder-engine-2.md section 3). Returns how many units it took from
// s[i:] into d (d has room for them: every unit is at least one byte of UTF-8).
template <class Unit>
inline size_t ascii_run(const Unit* s, size_t i, size_t n, uint8_t* d) {
    size_t start = i;
#if defined(__SSE2__)
    if constexpr (sizeof(Unit) == 1) {
        for (; i + 16 <= n; i += 16) {
            __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
            int high = _mm_movemask_epi8(v);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (i - start)), v);
            if (high) return i - start + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(high)));
        }
    } else if constexpr (sizeof(Unit) == 2) {
        const __m128i mask = _mm_set1_epi16(static_cast<short>(0xFF80));
        const __m128i zero = _mm_setzero_si128();
        for (; i + 16 <= n; i += 16) {
            __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
            __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 8));
            __m128i high = _mm_cmpeq_epi16(_mm_and_si128(_mm_or_si128(a, b), mask), zero);
            if (_mm_movemask_epi8(high) != 0xFFFF) break;
            _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (i - start)), _mm_packus_epi16(a, b));
        }
    }
#endif
    return i - start;
}

template <class Unit>
bool transcode(const Unit* s, size_t n, bool escape, std::vector<uint8_t>& buf, size_t* size) {
    size_t need = n * (sizeof(Unit) == 1 ? 2 : sizeof(Unit) == 2 ? 3 : 4) + kTranscodeSlack;
    if (buf.size() < need) buf.resize(need);
    uint8_t* d = buf.data();
    constexpr size_t kStep = sizeof(Unit) == 1 ? 32 : 16;  // a wide step's units (transcode.h)
    for (size_t i = 0; i < n; ++i) {
        if constexpr (sizeof(Unit) <= 2) {
            if (n - i >= kStep) {  // the wide tier, up to a surrogate (or none: the scalar tier)
                size_t wrote;
                const size_t took = sizeof(Unit) == 1
                                        ? transcode_wide_ucs1(reinterpret_cast<const uint8_t*>(s), i, n, d, &wrote)
                                        : transcode_wide_ucs2(reinterpret_cast<const uint16_t*>(s), i, n, d, &wrote);
                d += wrote;
                i += took;
                if (i >= n) break;
            }
        }
        if (s[i] < 0x80) {
            const size_t run = ascii_run(s, i, n, d);
            d += run;
            i += run;
            if (i >= n) break;
        }
        uint32_t c = s[i];
        if (c < 0x80) {
            *d++ = static_cast<uint8_t>(c);
        } else if (c < 0x800) {
            *d++ = static_cast<uint8_t>(0xC0 | (c >> 6));
            *d++ = static_cast<uint8_t>(0x80 | (c & 0x3F));
        } else if (c >= 0xD800 && c <= 0xDFFF) {
            if (!escape || c < 0xDC80 || c > 0xDCFF) return false;
            *d++ = static_cast<uint8_t>(c - 0xDC00);
        } else if (c < 0x10000) {
            *d++ = static_cast<uint8_t>(0xE0 | (c >> 12));
            *d++ = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
            *d++ = static_cast<uint8_t>(0x80 | (c & 0x3F));
        } else {
            *d++ = static_cast<uint8_t>(0xF0 | (c >> 18));
            *d++ = static_cast<uint8_t>(0x80 | ((c >> 12) & 0x3F));
            *d++ = static_cast<uint8_t>(0x80 | ((c >> 6) & 0x3F));
            *d++ = static_cast<uint8_t>(0x80 | (c & 0x3F));
        }
    }
    *size = static_cast<size_t>(d - buf.data());
    return true;
}

inline bool utf8_of(const Source& s, std::vector<uint8_t>& buf, const uint8_t** p, size_t* n) {
    bool ok;
    switch (s.width) {
        case 0:
            *p = static_cast<const uint8_t*>(s.data);
            *n = s.length;
            return true;
        case 1:
            ok = transcode(static_cast<const uint8_t*>(s.data), s.length, false, buf, n);
            break;
        case 2:
            ok = transcode(static_cast<const uint16_t*>(s.data), s.length, !s.whole, buf, n);
            break;
        default:
            ok = transcode(static_cast<const uint32_t*>(s.data), s.length, !s.whole, buf, n);
            break;
    }
    *p = buf.data();
    return ok;
}

// The UTF-8 of a str source that has surrogates, with the GIL: a whole text gets tiktoken's replacement (through
// UTF-16, so a high surrogate followed by a low one becomes their character: as Tokenizer's _as_str); a segment is
// encoded with surrogateescape, which raises UnicodeEncodeError for a surrogate outside U+DC80..U+DCFF.
inline nb::bytes utf8_with_gil(const Source& s) {
    PyObject* o = s.object;
    if (!s.whole) {
        PyObject* b = PyUnicode_AsEncodedString(o, "utf-8", "surrogateescape");
        if (!b) throw nb::python_error();
        return nb::steal<nb::bytes>(b);
    }
    nb::object utf16 = nb::steal(PyUnicode_AsEncodedString(o, "utf-16", "surrogatepass"));
    if (!utf16.is_valid()) throw nb::python_error();
    nb::object fixed = nb::steal(PyUnicode_Decode(PyBytes_AS_STRING(utf16.ptr()), PyBytes_GET_SIZE(utf16.ptr()),
                                                  "utf-16", "replace"));
    if (!fixed.is_valid()) throw nb::python_error();
    PyObject* b = PyUnicode_AsUTF8String(fixed.ptr());
    if (!b) throw nb::python_error();
    return nb::steal<nb::bytes>(b);
}

enum class DocStatus : uint8_t { kPending = 0, kDone, kBadPiece, kNeedsGil, kFailed, kStopped };

// How often a thread that runs or waits for an encode without the GIL looks for Ctrl-C.
constexpr auto kSignalPoll = std::chrono::milliseconds(50);

// The check of the thread that called in from Python and released the GIL: every kSignalPoll it takes the GIL
// and runs the signal handlers (PyErr_CheckSignals: KeyboardInterrupt on Ctrl-C). On an exception it stops, leaves
// the exception set for raise_if_stopped, and sets `also` (the flag the call's other threads poll), if any.
class SignalCheck final : public StopCheck {
  public:
    explicit SignalCheck(std::atomic<bool>* also = nullptr)
        : also_(also), next_(std::chrono::steady_clock::now() + kSignalPoll) {}
    // With the GIL held again: raise the exception that stopped the loops.
    void raise_if_stopped() {
        if (stopped()) throw nb::python_error();
    }

  private:
    bool check() override {
        auto now = std::chrono::steady_clock::now();
        if (now < next_) return false;
        next_ = now + kSignalPoll;
        nb::gil_scoped_acquire acquire;
        if (PyErr_CheckSignals() == 0) return false;
        if (also_) also_->store(true, std::memory_order_relaxed);
        return true;
    }
    std::atomic<bool>* also_;
    std::chrono::steady_clock::time_point next_;
};

// One thread's scratch space.
struct Scratch {
    std::vector<size_t> ends;
    std::vector<uint8_t> utf8;
    std::vector<uint32_t> ids;
};

// The calling thread's scratch space, kept between calls so that its pages stay mapped (no call re-enters: nothing
// in an encode runs Python code).
inline Scratch& thread_scratch() {
    static thread_local Scratch scratch;
    return scratch;
}

// Encode the UTF-8 bytes of one text or piece; on a byte with no token, the piece is copied into bad.
inline bool encode_bytes(const Encoder& enc, Pretok kind, const uint8_t* p, size_t n, ChunkCache* cache,
                         std::vector<size_t>& ends, std::vector<uint32_t>& out, std::string* bad) {
    BadPiece piece;
    int missing = -1;
    bool ok = kind == Pretok::kNone ? enc.encode_piece(p, n, cache, out, &missing)
                                    : enc.encode_text(kind, p, n, cache, ends, out, &piece);
    if (ok) return true;
    if (kind == Pretok::kNone) piece = BadPiece{p, n};
    bad->assign(reinterpret_cast<const char*>(piece.data), piece.size);
    return false;
}

// Encode a document's sources (no GIL needed). kind kNone: every text item is one piece; else a text to split.
inline DocStatus encode_sources(const Encoder& enc, Pretok kind, const Source* s, size_t n, ChunkCache* cache,
                                Scratch& scratch, std::vector<uint32_t>& out, std::string* bad) {
    for (size_t i = 0; i < n; ++i) {
        if (s[i].id >= 0) {
            out.push_back(static_cast<uint32_t>(s[i].id));
            continue;
        }
        if (i % kPollPieces == kPollPieces - 1 && stop_requested()) return DocStatus::kStopped;
        const uint8_t* p;
        size_t size;
        if (!utf8_of(s[i], scratch.utf8, &p, &size)) return DocStatus::kNeedsGil;
        if (!encode_bytes(enc, kind, p, size, cache, scratch.ends, out, bad)) return DocStatus::kBadPiece;
        if (stopped()) return DocStatus::kStopped;
    }
    return DocStatus::kDone;
}

// The same with the GIL held, for a document whose str has surrogates: Python's rules give its UTF-8 (or raise).
inline DocStatus encode_sources_with_gil(const Encoder& enc, Pretok kind, const Source* s, size_t n,
                                         ChunkCache* cache, Scratch& scratch, std::vector<uint32_t>& out,
                                         std::string* bad) {
    out.clear();
    for (size_t i = 0; i < n; ++i) {
        if (s[i].id >= 0) {
            out.push_back(static_cast<uint32_t>(s[i].id));
            continue;
        }
        const uint8_t* p;
        size_t size;
        nb::bytes owner;
        if (!utf8_of(s[i], scratch.utf8, &p, &size)) {
            owner = utf8_with_gil(s[i]);
            p = reinterpret_cast<const uint8_t*>(owner.c_str());
            size = owner.size();
        }
        if (!encode_bytes(enc, kind, p, size, cache, scratch.ends, out, bad)) return DocStatus::kBadPiece;
    }
    return DocStatus::kDone;
}

// Documents encoded by `threads` worker threads, each taking the next document from an atomic index (dynamic:
// a long document does not hold up the others' share) with its own chunk cache from the pool. The owner waits for
// documents in order; a failure at document d stops the workers from starting documents after d, so the first
// failure in input order is always found, as with one thread. The owner looks for Ctrl-C while it waits; on
// KeyboardInterrupt the workers stop at their next poll, are joined, and the exception is raised (wait). The
// destructor stops and joins the workers.
class ParallelEncode {
  public:
    ParallelEncode(const Encoder& enc, Pretok kind, CachePool& pool, const std::vector<Source>& sources,
                   const std::vector<size_t>& bounds, size_t threads)
        : enc_(enc), kind_(kind), pool_(pool), sources_(sources), bounds_(bounds), docs_(bounds.size() - 1),
          ids_(docs_), bad_(docs_), status_(new std::atomic<uint8_t>[docs_]) {
        for (size_t d = 0; d < docs_; ++d) status_[d].store(0, std::memory_order_relaxed);
        workers_.reserve(threads);
        try {
            for (size_t t = 0; t < threads; ++t) workers_.emplace_back([this] { work(); });
        } catch (...) {
            stop_all();
            throw;
        }
    }
    ~ParallelEncode() { stop_all(); }
    ParallelEncode(const ParallelEncode&) = delete;
    ParallelEncode& operator=(const ParallelEncode&) = delete;

    // Doc d's status once it is finished; the GIL is released only while actually waiting, and taken every
    // kSignalPoll to run the signal handlers: an exception from one (KeyboardInterrupt) stops the workers, joins
    // them and is raised.
    DocStatus wait(size_t d) {
        uint8_t s = status_[d].load(std::memory_order_acquire);
        while (s == 0) {
            {
                nb::gil_scoped_release release;
                std::unique_lock<std::mutex> lock(mutex_);
                waiting_.store(true);
                cv_.wait_for(lock, kSignalPoll,
                             [&] { return (s = status_[d].load(std::memory_order_acquire)) != 0; });
                waiting_.store(false);
            }
            if (s == 0 && PyErr_CheckSignals() != 0) {
                {
                    nb::gil_scoped_release release;
                    stop_all();
                }
                throw nb::python_error();
            }
        }
        return static_cast<DocStatus>(s);
    }
    std::vector<uint32_t>& ids(size_t d) { return ids_[d]; }
    const std::string& bad_piece(size_t d) const { return bad_[d]; }
    [[noreturn]] void rethrow() {
        std::lock_guard<std::mutex> lock(mutex_);
        std::rethrow_exception(error_);
    }

  private:
    void work() {
        FlagCheck check(cancel_);
        StopScope scope(&check);
        std::unique_ptr<CacheLease> cache;
        Scratch scratch;
        try {
            cache = std::make_unique<CacheLease>(pool_);
        } catch (...) {
            record(std::current_exception());
        }
        while (true) {
            size_t d = next_.fetch_add(1, std::memory_order_relaxed);
            if (d >= docs_ || d > stop_.load(std::memory_order_relaxed) || cancel_.load(std::memory_order_relaxed))
                break;
            DocStatus s = DocStatus::kFailed;
            if (cache) {
                try {
                    s = encode_sources(enc_, kind_, sources_.data() + bounds_[d], bounds_[d + 1] - bounds_[d],
                                       cache->get(), scratch, ids_[d], &bad_[d]);
                } catch (...) {
                    record(std::current_exception());
                }
            }
            if (s == DocStatus::kBadPiece || s == DocStatus::kFailed) lower_stop(d);
            finish(d, s);
        }
    }
    void record(std::exception_ptr e) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = e;
    }
    void finish(size_t d, DocStatus s) {
        status_[d].store(static_cast<uint8_t>(s), std::memory_order_seq_cst);
        if (waiting_.load(std::memory_order_seq_cst)) {
            std::lock_guard<std::mutex> lock(mutex_);
            cv_.notify_one();
        }
    }
    void lower_stop(size_t d) {
        size_t cur = stop_.load();
        while (d < cur && !stop_.compare_exchange_weak(cur, d)) {
        }
    }
    void stop_all() {
        stop_.store(0);
        cancel_.store(true);
        for (auto& t : workers_)
            if (t.joinable()) t.join();
    }

    const Encoder& enc_;
    Pretok kind_;
    CachePool& pool_;
    const std::vector<Source>& sources_;
    const std::vector<size_t>& bounds_;
    size_t docs_;
    std::vector<std::vector<uint32_t>> ids_;
    std::vector<std::string> bad_;
    std::unique_ptr<std::atomic<uint8_t>[]> status_;
    std::atomic<size_t> next_{0};
    std::atomic<size_t> stop_{~size_t(0)};
    std::atomic<bool> waiting_{false};
    std::atomic<bool> cancel_{false};  // set by stop_all: workers give up inside a document too
    std::mutex mutex_;
    std::condition_variable cv_;
    std::exception_ptr error_;
    std::vector<std::thread> workers_;
};

}  // namespace bpe
