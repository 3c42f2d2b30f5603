// Python bindings of the native core (nanobind): bpe_core._native._core.
//
// Python objects are read and built here, with the GIL held; the loops in encoder.cpp and trainer.cpp run with
// the GIL released. Anything whose exact error message belongs to the Python reference (bad token ids, bad chunk
// counts) is detected here and either raised with the reference's words or handed back to Python as None.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "batch.h"
#include "counts.h"
#include "encoder.h"
#include "flat.h"
#include "pretok.h"
#include "trainer.h"

namespace nb = nanobind;
using namespace bpe;

nb::tuple sorted_table(CountsColumns&& t);  // counts_bindings.cpp
nb::tuple run_merge_loop(Words w, uint64_t budget, int64_t min_count, int tie_break,
                         const std::vector<uint32_t>& hf_rank, nb::object progress);

namespace {

// ------------------------------------------------------------------------------------------ helpers

nb::object list_of_ids(const uint32_t* ids, size_t n) {
    PyObject* list = PyList_New(static_cast<Py_ssize_t>(n));
    if (!list) throw nb::python_error();
    for (size_t i = 0; i < n; ++i) {
        PyObject* v = PyLong_FromUnsignedLong(ids[i]);
        if (!v) {
            Py_DECREF(list);
            throw nb::python_error();
        }
        PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), v);
    }
    return nb::steal(list);
}

// One Python int per token id, made once: lists of ids then cost an INCREF per token instead of an allocation
// (ids above 256 are not among CPython's cached small ints). As the reference's chunk cache, whose lists share
// their int objects, does.
class IntCache {
  public:
    IntCache() = default;
    IntCache(const IntCache&) = delete;
    IntCache& operator=(const IntCache&) = delete;
    ~IntCache() {
        for (PyObject* o : ints_) Py_XDECREF(o);
    }
    nb::object list(const uint32_t* ids, size_t n) {
        PyObject* list = PyList_New(static_cast<Py_ssize_t>(n));
        if (!list) throw nb::python_error();
        for (size_t i = 0; i < n; ++i) {
            uint32_t id = ids[i];
            if (id >= ints_.size()) ints_.resize(size_t(id) + 1, nullptr);
            PyObject*& o = ints_[id];
            if (!o) {
                o = PyLong_FromUnsignedLong(id);
                if (!o) {
                    Py_DECREF(list);
                    throw nb::python_error();
                }
            }
            Py_INCREF(o);
            PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), o);
        }
        return nb::steal(list);
    }

  private:
    std::vector<PyObject*> ints_;
};

// A sequence of Python objects as a borrowed array (lists and tuples directly, anything else through list()).
struct FastSeq {
    explicit FastSeq(nb::handle obj, const char* what) {
        PyObject* seq = PySequence_Fast(obj.ptr(), what);
        if (!seq) throw nb::python_error();
        owner = nb::steal(seq);
        size = PySequence_Fast_GET_SIZE(seq);
        items = PySequence_Fast_ITEMS(seq);
    }
    nb::object owner;
    Py_ssize_t size;
    PyObject** items;
};

std::string missing_bytes_message(const Encoder& enc, const std::string& piece) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(piece.data());
    size_t n = piece.size();
    std::set<int> missing;
    for (size_t i = 0; i < n; ++i)
        if (enc.byte_id(p[i]) < 0) missing.insert(p[i]);
    std::string msg = "this vocabulary has no token for the byte(s) [";
    char buf[16];
    bool first = true;
    for (int b : missing) {
        std::snprintf(buf, sizeof buf, "%s'0x%x'", first ? "" : ", ", b);
        msg += buf;
        first = false;
    }
    return msg + "]";
}

// ------------------------------------------------------------------------------------------ encoder

// A hand-written pre-tokenizer by name ("cl100k", ...), or kNone for None (the texts are pieces already).
Pretok parse_kind(nb::handle name) {
    if (name.is_none()) return Pretok::kNone;
    if (!PyUnicode_Check(name.ptr())) throw nb::type_error("kind must be a pre-tokenizer name (str) or None");
    const char* text = PyUnicode_AsUTF8(name.ptr());
    if (!text) throw nb::python_error();
    Pretok kind = pretok_from_name(text);
    if (kind == Pretok::kNone)
        throw nb::value_error((std::string("no hand-written pre-tokenizer is named '") + text + "'").c_str());
    return kind;
}

// Text per GIL release on the calling thread; the least text (code units) worth one more thread (spawning one
// costs about 30 us, encoding 64 K units about 1 ms); texts shorter than kReleaseGil keep the GIL.
constexpr size_t kChunkUnits = size_t(1) << 20;
constexpr size_t kUnitsPerThread = size_t(1) << 16;
constexpr size_t kReleaseGil = size_t(1) << 13;

size_t units_of(const std::vector<Source>& sources, size_t begin, size_t end) {
    size_t n = 0;
    for (size_t i = begin; i < end; ++i) n += sources[i].length;
    return n;
}

size_t threads_for(size_t wanted, size_t docs, size_t units) {
    if (wanted < 1) throw nb::value_error("num_threads must be at least 1");
    return std::min({wanted, docs, std::max<size_t>(1, units / kUnitsPerThread)});
}

PyObject* sequence_tuple(nb::handle seq, const char* what) {
    PyObject* tuple = PySequence_Tuple(seq.ptr());
    if (!tuple) {
        PyErr_Clear();
        throw nb::type_error((std::string(what) + " must be a sequence, got " + type_name(seq.ptr())).c_str());
    }
    return tuple;
}

// The calling thread's scratch space (no call re-enters: nothing in an encode runs Python code).
Scratch& thread_scratch() {
    static thread_local Scratch scratch;
    return scratch;
}

class PyEncoder {
  public:
    PyEncoder(nb::handle vocab, nb::handle pair_values, bool ignore_merges) {
        std::vector<std::pair<uint32_t, std::string_view>> tokens;  // into the bytes objects in `owners`
        std::vector<nb::object> owners;  // (the dict could change while the GIL is released below)
        std::vector<std::pair<uint64_t, uint64_t>> pairs;
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        if (!PyDict_Check(vocab.ptr())) throw nb::type_error("vocab must be a dict of id -> bytes");
        tokens.reserve(PyDict_Size(vocab.ptr()));
        owners.reserve(PyDict_Size(vocab.ptr()));
        while (PyDict_Next(vocab.ptr(), &pos, &key, &value)) {
            unsigned long long id = PyLong_AsUnsignedLongLong(key);
            if (PyErr_Occurred() || id >= 0xFFFFFFFFull || !PyBytes_Check(value)) {
                PyErr_Clear();
                throw nb::value_error("the native encoder takes token ids below 2**32 - 1 with bytes values");
            }
            tokens.emplace_back(static_cast<uint32_t>(id),
                                std::string_view(PyBytes_AS_STRING(value), size_t(PyBytes_GET_SIZE(value))));
            owners.push_back(nb::borrow(value));
        }
        bool rank_only = pair_values.is_none();
        if (!rank_only) {
            if (!PyDict_Check(pair_values.ptr())) throw nb::type_error("pair_values must be a dict or None");
            pos = 0;
            pairs.reserve(PyDict_Size(pair_values.ptr()));
            while (PyDict_Next(pair_values.ptr(), &pos, &key, &value)) {
                unsigned long long k = PyLong_AsUnsignedLongLong(key), v = PyLong_AsUnsignedLongLong(value);
                if (PyErr_Occurred()) throw nb::python_error();
                pairs.emplace_back(k, v);
            }
        }
        {
            nb::gil_scoped_release release;
            enc_ = std::make_unique<Encoder>(tokens, pairs, rank_only, ignore_merges);
        }
    }

    // The ids of one request on the calling thread: a whole text (str or bytes), split by `kind`, or a sequence of
    // segments (split by `kind`) or pieces (kind None) and token ids.
    nb::object encode(nb::handle request, nb::handle kind_name) {
        Pretok kind = parse_kind(kind_name);
        std::vector<Source> sources;
        std::vector<nb::object> keep;
        read_request(request.ptr(), sources, keep);
        Scratch& scratch = thread_scratch();
        static thread_local std::vector<uint32_t> out;
        out.clear();
        std::string bad;
        CacheLease cache(pool_);
        DocStatus s;
        SignalCheck check;
        {
            std::optional<nb::gil_scoped_release> release;
            std::optional<StopScope> scope;
            if (units_of(sources, 0, sources.size()) >= kReleaseGil) release.emplace(), scope.emplace(&check);
            s = encode_sources(*enc_, kind, sources.data(), sources.size(), cache.get(), scratch, out, &bad);
        }
        check.raise_if_stopped();
        if (s == DocStatus::kNeedsGil)
            s = encode_sources_with_gil(*enc_, kind, sources.data(), sources.size(), cache.get(), scratch, out, &bad);
        if (s == DocStatus::kBadPiece) throw nb::value_error(missing_bytes_message(*enc_, bad).c_str());
        nb::object ids = ints_.list(out.data(), out.size());
        if (out.capacity() > (size_t(1) << 22)) std::vector<uint32_t>().swap(out);  // keep no 16 MB buffer
        return ids;
    }

    // One list of ids per request (as encode), in order. With num_threads > 1 and enough text, the documents are
    // encoded by native threads while this thread builds the lists (ParallelEncode); else on this thread, in
    // chunks of about kChunkUnits without the GIL.
    nb::object encode_batch(nb::handle requests, nb::handle kind_name, size_t num_threads) {
        Pretok kind = parse_kind(kind_name);
        nb::object outer = nb::steal(sequence_tuple(requests, "requests"));
        size_t n = static_cast<size_t>(PyTuple_GET_SIZE(outer.ptr()));
        std::vector<Source> sources;
        std::vector<nb::object> keep;
        std::vector<size_t> bounds{0};
        bounds.reserve(n + 1);
        for (size_t d = 0; d < n; ++d) {
            read_request(PyTuple_GET_ITEM(outer.ptr(), d), sources, keep);
            bounds.push_back(sources.size());
        }
        PyObject* result = PyList_New(static_cast<Py_ssize_t>(n));
        if (!result) throw nb::python_error();
        nb::object owner = nb::steal(result);
        size_t threads = n ? threads_for(num_threads, n, units_of(sources, 0, sources.size())) : 1;
        if (threads >= 2) {
            ParallelEncode run(*enc_, kind, pool_, sources, bounds, threads);
            for (size_t d = 0; d < n; ++d) {
                DocStatus s = run.wait(d);
                if (s == DocStatus::kFailed) run.rethrow();
                set_doc(result, d, s, sources, bounds, kind, run.ids(d), run.bad_piece(d));
            }
            return owner;
        }
        encode_on_caller(result, sources, bounds, kind);
        return owner;
    }

    // (ids, offsets) of whole texts (str or bytes) split by `kind` (flat.h): ids uint32, or uint16 unless `wide`.
    nb::object encode_flat(nb::handle texts, nb::handle kind_name, size_t num_threads, bool wide) {
        Pretok kind = parse_kind(kind_name);
        if (kind == Pretok::kNone) throw nb::value_error("encode_flat needs a hand-written pre-tokenizer name");
        nb::object outer = nb::steal(sequence_tuple(texts, "texts"));
        size_t n = static_cast<size_t>(PyTuple_GET_SIZE(outer.ptr()));
        std::vector<Source> docs;
        docs.reserve(n);
        for (size_t d = 0; d < n; ++d) docs.push_back(text_source(PyTuple_GET_ITEM(outer.ptr(), d), true));
        return run_flat(docs, kind, num_threads, wide);
    }

    // The same for an Arrow string array given by its buffers' addresses (the caller keeps the array alive):
    // `n + 1` offsets of `width` bytes (4 or 8) and `data_size` bytes of data. Every element is checked first
    // (validate_utf8_offsets); a bad one gives (None, index, problem, byte offset) instead of (ids, offsets).
    nb::object encode_flat_arrow(uintptr_t offsets, int width, uintptr_t data, size_t data_size, size_t n,
                                 nb::handle kind_name, size_t num_threads, bool wide) {
        Pretok kind = parse_kind(kind_name);
        if (kind == Pretok::kNone) throw nb::value_error("encode_flat needs a hand-written pre-tokenizer name");
        if (width != 4 && width != 8) throw nb::value_error("Arrow offsets are 4 or 8 bytes wide");
        if (n > 0 && (!offsets || (!data && data_size))) throw nb::value_error("null Arrow buffer address");
        const void* off = reinterpret_cast<const void*>(offsets);
        const uint8_t* bytes = reinterpret_cast<const uint8_t*>(data);
        std::string problem;
        int64_t bad = -1, at = 0;
        {
            nb::gil_scoped_release release;
            bad = validate_utf8_offsets(off, width, bytes, data_size, n, &problem, &at);
        }
        if (bad >= 0) return nb::make_tuple(nb::none(), bad, problem, at);
        std::vector<Source> docs(n);
        for (size_t d = 0; d < n; ++d) {
            int64_t a = arrow_offset(off, width, d), b = arrow_offset(off, width, d + 1);
            docs[d].data = bytes + a;
            docs[d].length = static_cast<size_t>(b - a);
            docs[d].whole = true;
        }
        return run_flat(docs, kind, num_threads, wide);
    }

    // BPE of one piece's bytes without cache or whole-piece lookup, with the heap's work: (ids, pushes, pops).
    nb::object merge_bytes(nb::bytes data, bool with_stats) {
        std::vector<uint32_t> out;
        int missing = -1;
        MergeStats stats;
        const uint8_t* p = reinterpret_cast<const uint8_t*>(data.c_str());
        if (!enc_->merge_bytes(p, data.size(), out, &missing, with_stats ? &stats : nullptr))
            throw nb::value_error(missing_bytes_message(*enc_, std::string(data.c_str(), data.size())).c_str());
        return nb::make_tuple(list_of_ids(out.data(), out.size()), stats.pushes, stats.pops);
    }

    void clear_cache() { pool_.clear(); }
    size_t cache_size() const { return pool_.size(); }
    size_t pair_count() const { return enc_->pair_count(); }

  private:
    // encode_flat's work: the documents on threads without the GIL, then (with it) the documents whose str needs
    // Python's surrogate rules, the first byte without a token in input order, and the two arrays.
    nb::object run_flat(const std::vector<Source>& docs, Pretok kind, size_t num_threads, bool wide) {
        size_t n = docs.size();
        size_t units = units_of(docs, 0, n);
        size_t threads = n ? threads_for(num_threads, n, units) : 1;
        FlatRun run;
        std::atomic<bool> cancel{false};
        SignalCheck check(&cancel);
        {
            nb::gil_scoped_release release;
            encode_flat_blocks(*enc_, kind, pool_, docs, threads, units, run, &check, cancel);
        }
        check.raise_if_stopped();
        std::vector<std::pair<size_t, std::vector<uint32_t>>> late;
        std::string bad;
        for (size_t d = 0; d < n; ++d) {
            DocStatus s = static_cast<DocStatus>(run.status[d]);
            if (s == DocStatus::kNeedsGil) {
                CacheLease cache(pool_);
                late.emplace_back(d, std::vector<uint32_t>());
                s = encode_sources_with_gil(*enc_, kind, &docs[d], 1, cache.get(), thread_scratch(),
                                            late.back().second, &bad);
                run.counts[d] = static_cast<int64_t>(late.back().second.size());
            } else if (s == DocStatus::kBadPiece) {
                for (const FlatBlock& b : run.blocks)
                    if (b.bad_doc == static_cast<int64_t>(d)) bad = b.bad_piece;
            } else if (s != DocStatus::kDone) {
                throw std::runtime_error("encode_flat: a document was not encoded (internal error)");
            }
            if (s == DocStatus::kBadPiece) throw nb::value_error(missing_bytes_message(*enc_, bad).c_str());
        }
        int64_t* offsets = new int64_t[n + 1];
        offsets[0] = 0;
        for (size_t d = 0; d < n; ++d) offsets[d + 1] = offsets[d] + run.counts[d];
        nb::object offsets_array = owned_array(offsets, n + 1);
        nb::object ids = wide ? assemble_flat<uint32_t>(run, late, offsets[n])
                              : assemble_flat<uint16_t>(run, late, offsets[n]);
        return nb::make_tuple(ids, offsets_array);
    }

    // Put doc d's list into result (finishing it with the GIL if its str needs Python's surrogate rules), or
    // raise the reference's error for a byte without a token.
    void set_doc(PyObject* result, size_t d, DocStatus s, const std::vector<Source>& sources,
                 const std::vector<size_t>& bounds, Pretok kind, std::vector<uint32_t>& ids, std::string bad) {
        if (s == DocStatus::kNeedsGil) {
            CacheLease cache(pool_);
            s = encode_sources_with_gil(*enc_, kind, sources.data() + bounds[d], bounds[d + 1] - bounds[d],
                                        cache.get(), thread_scratch(), ids, &bad);
        }
        if (s == DocStatus::kBadPiece) throw nb::value_error(missing_bytes_message(*enc_, bad).c_str());
        PyList_SET_ITEM(result, static_cast<Py_ssize_t>(d), ints_.list(ids.data(), ids.size()).release().ptr());
        std::vector<uint32_t>().swap(ids);
    }

    // One thread: chunks of documents encoded into one buffer without the GIL, then their lists built.
    void encode_on_caller(PyObject* result, const std::vector<Source>& sources, const std::vector<size_t>& bounds,
                          Pretok kind) {
        size_t n = bounds.size() - 1;
        CacheLease cache(pool_);
        Scratch& scratch = thread_scratch();
        std::vector<uint32_t> out, doc_ids;
        std::vector<size_t> starts;
        std::vector<DocStatus> status;
        std::string bad;
        SignalCheck check;
        for (size_t begin = 0; begin < n;) {
            size_t end = begin, units = 0;
            while (end < n && (end == begin || units < kChunkUnits)) units += units_of(sources, bounds[end], bounds[end + 1]), ++end;
            out.clear();
            starts.assign(1, 0);
            status.clear();
            {
                std::optional<nb::gil_scoped_release> release;
                std::optional<StopScope> scope;
                if (units >= kReleaseGil) release.emplace(), scope.emplace(&check);
                for (size_t d = begin; d < end && !stopped(); ++d) {
                    DocStatus s = encode_sources(*enc_, kind, sources.data() + bounds[d], bounds[d + 1] - bounds[d],
                                                 cache.get(), scratch, out, &bad);
                    if (s == DocStatus::kNeedsGil) out.resize(starts.back());
                    status.push_back(s);
                    starts.push_back(out.size());
                    if (s == DocStatus::kBadPiece) break;
                }
            }
            check.raise_if_stopped();
            for (size_t i = 0; i < status.size(); ++i) {
                doc_ids.assign(out.begin() + starts[i], out.begin() + starts[i + 1]);
                set_doc(result, begin + i, status[i], sources, bounds, kind, doc_ids, bad);
            }
            begin = end;
        }
    }

    std::unique_ptr<Encoder> enc_;
    IntCache ints_;
    CachePool pool_;
};

// ------------------------------------------------------------------------------------------ chunk counting

// count_chunks with a hand-written pre-tokenizer: every piece of every text counted in a native hash map (one per
// thread, merged when read), without the GIL. Texts are whole user texts: str (lone surrogates replaced as
// tiktoken does) or bytes (invalid UTF-8 split as its surrogateescape decoding).
class PyChunkCounter {
  public:
    explicit PyChunkCounter(nb::handle kind_name) : kind_(parse_kind(kind_name)) {
        if (kind_ == Pretok::kNone) throw nb::value_error("ChunkCounter needs a hand-written pre-tokenizer name");
        maps_.push_back(std::make_unique<CountMap>());
    }
    PyChunkCounter(const PyChunkCounter&) = delete;
    PyChunkCounter& operator=(const PyChunkCounter&) = delete;

    void add(nb::handle texts, size_t num_threads) {
        nb::object tuple = nb::steal(sequence_tuple(texts, "texts"));
        size_t n = static_cast<size_t>(PyTuple_GET_SIZE(tuple.ptr()));
        std::vector<Source> sources;
        sources.reserve(n);
        for (size_t d = 0; d < n; ++d) sources.push_back(text_source(PyTuple_GET_ITEM(tuple.ptr(), d), true));
        if (n == 0) return;
        size_t threads = threads_for(num_threads, n, units_of(sources, 0, n));
        while (maps_.size() < threads) maps_.push_back(std::make_unique<CountMap>());
        std::vector<size_t> needs_gil;
        std::exception_ptr error;
        std::mutex mutex;
        std::atomic<size_t> next{0};
        std::atomic<bool> stop{false};
        SignalCheck caller_check(&stop);  // the calling thread (worker 0) runs the signal handlers
        auto work = [&](size_t w) {
            FlagCheck flag_check(stop);
            StopScope scope(w == 0 ? static_cast<StopCheck*>(&caller_check) : &flag_check);
            try {
                Scratch scratch;
                CountMap& map = *maps_[w];
                for (size_t d; !stop.load(std::memory_order_relaxed) && (d = next.fetch_add(1)) < n;) {
                    const uint8_t* p;
                    size_t size;
                    if (!utf8_of(sources[d], scratch.utf8, &p, &size)) {
                        std::lock_guard<std::mutex> lock(mutex);
                        needs_gil.push_back(d);
                        continue;
                    }
                    count(p, size, scratch.ends, map);
                    if (stop_requested()) break;
                }
            } catch (...) {
                std::lock_guard<std::mutex> lock(mutex);
                if (!error) error = std::current_exception();
                stop.store(true);
            }
        };
        {
            nb::gil_scoped_release release;
            std::vector<std::thread> workers;
            try {
                for (size_t w = 1; w < threads; ++w) workers.emplace_back(work, w);
            } catch (...) {
                std::lock_guard<std::mutex> lock(mutex);
                if (!error) error = std::current_exception();
            }
            work(0);
            for (auto& t : workers) t.join();
        }
        caller_check.raise_if_stopped();  // the counts are partial: the caller's counter is dropped
        if (error) std::rethrow_exception(error);
        std::sort(needs_gil.begin(), needs_gil.end());
        std::vector<size_t> ends;
        for (size_t d : needs_gil) {
            nb::bytes data = utf8_with_gil(sources[d]);
            count(reinterpret_cast<const uint8_t*>(data.c_str()), data.size(), ends, *maps_[0]);
        }
    }

    // piece bytes -> count
    nb::dict to_dict() {
        merge_threads();
        nb::dict out;
        maps_[0]->for_each([&](const uint8_t* p, size_t n, uint64_t c) {
            nb::object key = nb::steal(PyBytes_FromStringAndSize(reinterpret_cast<const char*>(p), Py_ssize_t(n)));
            nb::object value = nb::steal(PyLong_FromUnsignedLongLong(c));
            if (!key.is_valid() || !value.is_valid() || PyDict_SetItem(out.ptr(), key.ptr(), value.ptr()) < 0)
                throw nb::python_error();
        });
        return out;
    }

    // Distinct pieces so far (after merging the threads' maps).
    size_t size() {
        merge_threads();
        return maps_[0]->size();
    }

    // The counts as sorted tables, one per hash shard (crc32 % num_shards), counts times weight, and their weighted
    // sum; the counter is emptied. [(shard, (offsets, data, counts)), ...] for the non-empty shards.
    nb::tuple take_sorted(uint32_t num_shards, int64_t weight) {
        if (num_shards == 0) throw nb::value_error("num_shards must be at least 1");
        if (weight < 1) throw nb::value_error("weight must be a positive integer");
        merge_threads();
        std::vector<CountsColumns> shards;
        unsigned __int128 total = 0;
        {
            nb::gil_scoped_release release;
            shards = sorted_shards(*maps_[0], num_shards, weight, &total);
            maps_[0] = std::make_unique<CountMap>();
        }
        nb::list out;
        for (uint32_t k = 0; k < num_shards; ++k)
            if (!shards[k].counts.empty()) out.append(nb::make_tuple(k, sorted_table(std::move(shards[k]))));
        nb::object hi = nb::steal(PyLong_FromUnsignedLongLong(static_cast<uint64_t>(total >> 64)));
        nb::object lo = nb::steal(PyLong_FromUnsignedLongLong(static_cast<uint64_t>(total)));
        return nb::make_tuple(out, (hi << nb::int_(64)) | lo);
    }

  private:
    void merge_threads() {
        nb::gil_scoped_release release;
        for (size_t w = 1; w < maps_.size(); ++w) {
            maps_[0]->merge(*maps_[w]);
            maps_[w] = std::make_unique<CountMap>();
        }
    }

    void count(const uint8_t* p, size_t n, std::vector<size_t>& ends, CountMap& map) const {
        ends.clear();
        pretok_split(kind_, p, n, ends);
        size_t start = 0, pieces = 0;
        for (size_t end : ends) {
            if (++pieces % (64 * kPollPieces) == 0 && stop_requested()) return;
            map.add(p + start, end - start);
            start = end;
        }
    }

    Pretok kind_;
    std::vector<std::unique_ptr<CountMap>> maps_;
};

// ------------------------------------------------------------------------------------------ decoder

class Decoder {
  public:
    // id_to_bytes: list indexed by id of bytes or None (ids without a token); special_ids: ids of special tokens.
    Decoder(nb::handle id_to_bytes, nb::handle special_ids) {
        FastSeq seq(id_to_bytes, "id_to_bytes must be a sequence");
        offsets_.reserve(seq.size + 1);
        offsets_.push_back(0);
        flags_.assign(seq.size, 0);
        for (Py_ssize_t i = 0; i < seq.size; ++i) {
            PyObject* o = seq.items[i];
            if (PyBytes_Check(o)) {
                arena_.append(PyBytes_AS_STRING(o), size_t(PyBytes_GET_SIZE(o)));
                flags_[i] = kValid;
            } else if (o != Py_None) {
                throw nb::type_error("id_to_bytes holds bytes or None");
            }
            offsets_.push_back(arena_.size());
        }
        FastSeq specials(special_ids, "special_ids must be a sequence");
        for (Py_ssize_t i = 0; i < specials.size; ++i) {
            long long id = PyLong_AsLongLong(specials.items[i]);
            if (id == -1 && PyErr_Occurred()) throw nb::python_error();
            if (id >= 0 && id < static_cast<long long>(flags_.size())) flags_[id] |= kSpecial;
        }
    }

    // Ids as uint32, or false if any is not a token (the caller raises the reference's message).
    bool read_ids(nb::handle ids, std::vector<uint32_t>& out, bool skip_special) const {
        FastSeq seq(ids, "ids must be a sequence of ints");
        out.reserve(out.size() + seq.size);
        for (Py_ssize_t i = 0; i < seq.size; ++i) {
            long long id;
            if (!read_id(seq.items[i], &id)) return false;
            if (skip_special && (flags_[id] & kSpecial)) continue;
            out.push_back(static_cast<uint32_t>(id));
        }
        return true;
    }

    // strict: Python ints only (Tokenizer.token_bytes refuses other integer types; list indexing takes them).
    bool read_id(PyObject* o, long long* id, bool strict = false) const {
        if (PyLong_Check(o)) {
            int overflow = 0;
            *id = PyLong_AsLongLongAndOverflow(o, &overflow);
            if (overflow) return false;
        } else {
            if (strict || !PyIndex_Check(o) || PyFloat_Check(o)) return false;
            PyObject* index = PyNumber_Index(o);
            if (!index) {
                PyErr_Clear();
                return false;
            }
            int overflow = 0;
            *id = PyLong_AsLongLongAndOverflow(index, &overflow);
            Py_DECREF(index);
            if (overflow) return false;
        }
        return *id >= 0 && *id < static_cast<long long>(flags_.size()) && (flags_[*id] & kValid);
    }

    void append(const std::vector<uint32_t>& ids, std::string& out) const {
        size_t total = out.size();
        for (uint32_t id : ids) total += offsets_[id + 1] - offsets_[id];
        out.reserve(total);
        for (uint32_t id : ids) out.append(arena_, offsets_[id], offsets_[id + 1] - offsets_[id]);
    }

    nb::object decode_bytes(nb::handle ids) const {
        std::vector<uint32_t> v;
        if (!read_ids(ids, v, false)) return nb::none();
        size_t total = 0;
        for (uint32_t id : v) total += offsets_[id + 1] - offsets_[id];
        PyObject* b = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(total));
        if (!b) throw nb::python_error();
        char* dst = PyBytes_AS_STRING(b);
        for (uint32_t id : v) {
            size_t n = offsets_[id + 1] - offsets_[id];
            std::memcpy(dst, arena_.data() + offsets_[id], n);
            dst += n;
        }
        return nb::steal(b);
    }

    // One str per document of flat ids (uint16 or uint32) and int64 offsets (decode_flat): (list, -1), or
    // (None, d) where document d holds an id without a token (the caller raises the reference's message for it).
    nb::object decode_flat(nb::ndarray<nb::ndim<1>, nb::c_contig, nb::device::cpu> ids,
                           nb::ndarray<const int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> offsets,
                           const std::string& errors) const {
        const bool narrow = ids.dtype() == nb::dtype<uint16_t>();
        if (!narrow && ids.dtype() != nb::dtype<uint32_t>()) throw nb::type_error("ids must be uint16 or uint32");
        const size_t n_ids = ids.shape(0), n_off = offsets.shape(0);
        if (n_off == 0) throw nb::value_error("offsets must hold at least one value (len(texts) + 1 of them)");
        const int64_t* off = offsets.data();
        for (size_t i = 0; i < n_off; ++i) {
            if (off[i] < 0 || static_cast<uint64_t>(off[i]) > n_ids || (i > 0 && off[i] < off[i - 1]))
                throw nb::value_error(("offsets must rise from 0 to at most len(ids) = " + std::to_string(n_ids) +
                                       "; offsets[" + std::to_string(i) + "] = " + std::to_string(off[i]))
                                          .c_str());
        }
        const void* data = ids.data();
        auto id_at = [&](size_t k) -> uint32_t {
            return narrow ? static_cast<const uint16_t*>(data)[k] : static_cast<const uint32_t*>(data)[k];
        };
        for (size_t d = 0; d + 1 < n_off; ++d)
            for (int64_t k = off[d]; k < off[d + 1]; ++k) {
                uint32_t id = id_at(static_cast<size_t>(k));
                if (id >= flags_.size() || !(flags_[id] & kValid)) return nb::make_tuple(nb::none(), d);
            }
        PyObject* list = PyList_New(static_cast<Py_ssize_t>(n_off - 1));
        if (!list) throw nb::python_error();
        nb::object owner = nb::steal(list);
        std::string buf;
        for (size_t d = 0; d + 1 < n_off; ++d) {
            buf.clear();
            for (int64_t k = off[d]; k < off[d + 1]; ++k) {
                uint32_t id = id_at(static_cast<size_t>(k));
                buf.append(arena_, offsets_[id], offsets_[id + 1] - offsets_[id]);
            }
            PyObject* text = PyUnicode_DecodeUTF8(buf.data(), static_cast<Py_ssize_t>(buf.size()), errors.c_str());
            if (!text) throw nb::python_error();
            PyList_SET_ITEM(list, static_cast<Py_ssize_t>(d), text);
        }
        return nb::make_tuple(owner, -1);
    }

    bool is_special(uint32_t id) const { return flags_[id] & kSpecial; }
    const std::string& arena() const { return arena_; }
    size_t offset(uint32_t id) const { return offsets_[id]; }

  private:
    static constexpr uint8_t kValid = 1, kSpecial = 2;
    std::string arena_;
    std::vector<uint64_t> offsets_;
    std::vector<uint8_t> flags_;
};

// The byte side of StreamingDecoder: pending bytes plus CPython's own stateful UTF-8 decoder, which is exactly
// what codecs' incremental decoder calls, so the output equals the reference's for every `errors` handler.
class StreamState {
  public:
    StreamState(const Decoder& decoder, std::string errors, bool skip_special)
        : dec_(decoder), errors_(std::move(errors)), skip_special_(skip_special) {}

    nb::object step(nb::handle id_obj) {
        long long id;
        if (!dec_.read_id(id_obj.ptr(), &id, true)) return nb::none();
        if (skip_special_ && dec_.is_special(static_cast<uint32_t>(id))) return nb::str("");
        size_t before = pending_.size();
        pending_.append(dec_.arena(), dec_.offset(id), dec_.offset(id + 1) - dec_.offset(id));
        return decode(before, false);
    }

    nb::object feed(nb::handle ids) {
        std::vector<uint32_t> v;
        if (!dec_.read_ids(ids, v, skip_special_)) return nb::none();
        size_t before = pending_.size();
        dec_.append(v, pending_);
        return decode(before, false);
    }

    nb::object flush() {
        nb::object text = decode(pending_.size(), true);
        pending_.clear();
        return text;
    }

    nb::bytes pending() const { return nb::bytes(pending_.data(), pending_.size()); }

  private:
    // Decode what is complete; on an error (errors="strict"), forget the new bytes as codecs does.
    nb::object decode(size_t before, bool final) {
        Py_ssize_t consumed = 0;
        PyObject* text = PyUnicode_DecodeUTF8Stateful(pending_.data(), static_cast<Py_ssize_t>(pending_.size()),
                                                      errors_.c_str(), final ? nullptr : &consumed);
        if (!text) {
            pending_.resize(before);
            throw nb::python_error();
        }
        if (final)
            consumed = static_cast<Py_ssize_t>(pending_.size());
        pending_.erase(0, static_cast<size_t>(consumed));
        return nb::steal(text);
    }

    const Decoder& dec_;
    std::string errors_;
    bool skip_special_;
    std::string pending_;
};

// Arrow string buffers checked as encode_flat_arrow checks them: (-1, "", 0), or (index, problem, byte offset).
nb::tuple validate_arrow_strings(uintptr_t offsets, int width, uintptr_t data, size_t data_size, size_t n) {
    if (width != 4 && width != 8) throw nb::value_error("Arrow offsets are 4 or 8 bytes wide");
    if (n > 0 && (!offsets || (!data && data_size))) throw nb::value_error("null Arrow buffer address");
    std::string problem;
    int64_t bad = -1, at = 0;
    {
        nb::gil_scoped_release release;
        bad = validate_utf8_offsets(reinterpret_cast<const void*>(offsets), width,
                                    reinterpret_cast<const uint8_t*>(data), data_size, n, &problem, &at);
    }
    return nb::make_tuple(bad, problem, at);
}

// ------------------------------------------------------------------------------------------ trainer

[[noreturn]] void raise_bad_chunk(PyObject* key, PyObject* value, bool key_is_bad) {
    nb::handle k(key), v(value);
    std::string msg;
    if (key_is_bad) {
        msg = "chunk_counts keys must be bytes, got " + std::string(Py_TYPE(key)->tp_name) + " " +
              nb::repr(k).c_str();
        throw nb::type_error(msg.c_str());
    }
    msg = std::string("chunk count must be a non-negative integer, got ") + nb::repr(v).c_str() + " for " +
          nb::repr(k).c_str();
    throw nb::value_error(msg.c_str());
}

// Counts beyond 64 bits: train() catches the OverflowError and runs the reference, whose ints have no limit.
[[noreturn]] void raise_overflow(const char* what) {
    PyErr_SetString(PyExc_OverflowError, what);
    throw nb::python_error();
}

// Visit (bytes, count) of the chunks that have pairs (count > 0, two bytes or more), validating every entry.
template <class F>
void for_each_chunk(nb::handle counts, F&& f) {
    if (!PyDict_Check(counts.ptr())) throw nb::type_error("chunk_counts must be a dict of bytes -> int");
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(counts.ptr(), &pos, &key, &value)) {
        if (!PyBytes_Check(key)) raise_bad_chunk(key, value, true);
        if (!PyLong_Check(value)) raise_bad_chunk(key, value, false);
        int overflow = 0;
        long long n = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow > 0) raise_overflow("a chunk count does not fit in 64 bits");
        if (overflow < 0 || n < 0) raise_bad_chunk(key, value, false);
        Py_ssize_t size = PyBytes_GET_SIZE(key);
        if (n > 0 && size >= 2) f(reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(key)), size_t(size), n);
    }
}

nb::tuple train_sizes(nb::handle counts) {
    uint64_t words = 0, tokens = 0;
    for_each_chunk(counts, [&](const uint8_t*, size_t n, long long) {
        ++words;
        tokens += n;
    });
    return nb::make_tuple(words, tokens);
}

nb::tuple train(nb::handle counts, uint64_t budget, int64_t min_count, int tie_break,
                const std::vector<uint32_t>& hf_rank, nb::object progress) {
    Words w;
    uint64_t n_words = 0, n_tokens = 0;  // reserve exactly: growth by doubling left 2x slack (34 MB for 13 MB)
    for_each_chunk(counts, [&](const uint8_t*, size_t n, long long) {
        ++n_words;
        n_tokens += n;
    });
    w.narrow = Words::fits_narrow(budget);
    w.words.reserve(n_words);
    w.reserve_tokens(n_tokens);
    int64_t total = 0;  // the sum of all pair counts bounds every pair count: check it once for overflow
    for_each_chunk(counts, [&](const uint8_t* p, size_t n, long long c) {
        if (w.words.size() >= 0xFFFFFFFFull) throw nb::value_error("more than 2**32 - 1 unique chunks");
        int64_t weight;
        if (__builtin_mul_overflow(static_cast<int64_t>(n - 1), static_cast<int64_t>(c), &weight) ||
            __builtin_add_overflow(total, weight, &total))
            raise_overflow("the chunk counts add up to more than 2**63 pairs");
        if (n > Words::kMaxLen || w.token_count() + n > Words::kMaxStart)  // train() runs the reference instead
            raise_overflow("the native merge loop takes chunks of at most 16 MiB and 2**40 bytes in all");
        w.words.push_back(Words::Word{w.token_count(), n, static_cast<int64_t>(c)});
        w.append(p, n);
    });
    return run_merge_loop(std::move(w), budget, min_count, tie_break, hf_rank, progress);
}

}  // namespace

// The merge loop on words built from a dict (train) or from counts tables (counts_bindings.cpp train_table).
nb::tuple run_merge_loop(Words w, uint64_t budget, int64_t min_count, int tie_break,
                         const std::vector<uint32_t>& hf_rank, nb::object progress) {
    if (tie_break < 0 || tie_break > 2) throw nb::value_error("tie_break must be 0 (ids), 1 (huggingface) or 2 (bytes)");
    std::unique_ptr<MergeLoop> loop;
    {
        nb::gil_scoped_release release;
        loop = std::make_unique<MergeLoop>(std::move(w), static_cast<TieBreak>(tie_break), hf_rank);
        std::function<void(uint64_t)> report;
        if (!progress.is_none()) {
            report = [&](uint64_t new_tokens) {
                nb::gil_scoped_acquire acquire;
                progress(new_tokens, budget);
            };
        }
        loop->run(budget, min_count, report);
    }
    const auto& merges = loop->merges();
    PyObject* mlist = PyList_New(static_cast<Py_ssize_t>(merges.size()));
    nb::object mowner = nb::steal(mlist);
    for (size_t i = 0; i < merges.size(); ++i)
        PyList_SET_ITEM(mlist, i, nb::make_tuple(merges[i].first, merges[i].second).release().ptr());
    const auto& tb = loop->token_bytes();
    PyObject* blist = PyList_New(static_cast<Py_ssize_t>(tb.size()));
    nb::object bowner = nb::steal(blist);
    for (size_t i = 0; i < tb.size(); ++i)
        PyList_SET_ITEM(blist, i, nb::bytes(tb[i].data(), tb[i].size()).release().ptr());
    return nb::make_tuple(mowner, bowner);
}


void bind_pretok(nb::module_& m);  // pretok_bindings.cpp
void bind_counts(nb::module_& m);  // counts_bindings.cpp
void bind_superword(nb::module_& m);  // superword_bindings.cpp

NB_MODULE(_core, m) {
    m.doc() = "beam-bpe native core: BPE encoder, decoder and merge loop (see bpe_core/native.py)";
#ifndef BPE_SANITIZE
    // A run that fails exits with tokenizers still referenced by tracebacks and per-process caches; nanobind then
    // printed "leaked N instances ... See https://nanobind.readthedocs.io/en/latest/refleaks.html" (no newline)
    // onto the CLI's one-line failure. The sanitizer build keeps the report, where leaks are looked for.
    nb::set_leak_warnings(false);
#endif

    nb::class_<PyEncoder>(m, "Encoder")
        .def(nb::init<nb::handle, nb::handle, bool>(), nb::arg("vocab"), nb::arg("pair_values").none(),
             nb::arg("ignore_merges"))
        .def("encode", &PyEncoder::encode, nb::arg("request"), nb::arg("kind").none())
        .def("encode_batch", &PyEncoder::encode_batch, nb::arg("requests"), nb::arg("kind").none(),
             nb::arg("num_threads"))
        .def("encode_flat", &PyEncoder::encode_flat, nb::arg("texts"), nb::arg("kind"), nb::arg("num_threads"),
             nb::arg("wide"))
        .def("encode_flat_arrow", &PyEncoder::encode_flat_arrow, nb::arg("offsets"), nb::arg("width"),
             nb::arg("data"), nb::arg("data_size"), nb::arg("n"), nb::arg("kind"), nb::arg("num_threads"),
             nb::arg("wide"))
        .def("merge_bytes", &PyEncoder::merge_bytes, nb::arg("data"), nb::arg("with_stats") = false)
        .def("clear_cache", &PyEncoder::clear_cache)
        .def_prop_ro("cache_size", &PyEncoder::cache_size)
        .def_prop_ro("pair_count", &PyEncoder::pair_count);

    nb::class_<PyChunkCounter>(m, "ChunkCounter")
        .def(nb::init<nb::handle>(), nb::arg("kind"))
        .def("add", &PyChunkCounter::add, nb::arg("texts"), nb::arg("num_threads"))
        .def("to_dict", &PyChunkCounter::to_dict)
        .def("size", &PyChunkCounter::size)
        .def("take_sorted", &PyChunkCounter::take_sorted, nb::arg("num_shards"), nb::arg("weight"));

    nb::class_<Decoder>(m, "Decoder")
        .def(nb::init<nb::handle, nb::handle>())
        .def("decode_bytes", &Decoder::decode_bytes)
        .def("decode_flat", &Decoder::decode_flat, nb::arg("ids"), nb::arg("offsets"), nb::arg("errors"));

    nb::class_<StreamState>(m, "StreamState")
        .def(nb::init<const Decoder&, std::string, bool>(), nb::keep_alive<1, 2>())
        .def("step", &StreamState::step)
        .def("feed", &StreamState::feed)
        .def("flush", &StreamState::flush)
        .def_prop_ro("pending", &StreamState::pending);

    m.def("validate_arrow_strings", &validate_arrow_strings, nb::arg("offsets"), nb::arg("width"), nb::arg("data"),
          nb::arg("data_size"), nb::arg("n"));
    m.def("train_sizes", &train_sizes);
    m.def("estimate_train_memory", &estimate_train_memory);
    m.def("train", &train, nb::arg("chunk_counts"), nb::arg("budget"), nb::arg("min_count"), nb::arg("tie_break"),
          nb::arg("hf_rank"), nb::arg("progress").none());
    bind_pretok(m);
    bind_counts(m);
    bind_superword(m);
}
