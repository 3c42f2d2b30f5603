// Python bindings of the encoder (bpe_core._native._core.Encoder): requests read here with the GIL held, the
// loops of encoder.cpp / batch.h / flat.h run with it released. Anything whose exact error message belongs to the
// Python reference (bytes without a token) is detected here and raised with the reference's words.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <nanobind/ndarray.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "batch.h"
#include "bindings.h"
#include "encoder.h"
#include "flat.h"
#include "pretok.h"
#include "superword.h"
#include "tables.h"

namespace nb = nanobind;
using namespace bpe;
using namespace bpe_bindings;

namespace {

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

// Text per GIL release on the calling thread; texts shorter than kReleaseGil keep the GIL.
constexpr size_t kChunkUnits = size_t(1) << 20;
constexpr size_t kReleaseGil = size_t(1) << 13;

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

    void clear_cache() {
        pool_.clear();
        regions_->clear();
    }
    size_t cache_size() const { return pool_.size(); }
    size_t pair_count() const { return enc_->pair_count(); }
    size_t seed_count() const { return enc_->seed_count(); }
    size_t cache_limit() const { return enc_->cache_limit(); }
    void set_cache_limit(size_t bytes) { enc_->set_cache_limit(bytes); }
    uint64_t cache_resets() const { return enc_->cache_resets(); }
    // The added tokens every text is cut at (Encoder::set_literals), once, before the first encode.
    void set_literals(nb::handle tokens) {
        if (enc_->has_literals()) throw nb::value_error("set_literals: this encoder has its added tokens already");
        std::vector<std::pair<std::string, uint32_t>> v;
        for (nb::handle item : tokens) {
            nb::tuple t = nb::cast<nb::tuple>(item);
            nb::bytes b = nb::cast<nb::bytes>(t[0]);
            v.emplace_back(std::string(b.c_str(), b.size()), nb::cast<uint32_t>(t[1]));
        }
        enc_->set_literals(v);
        clear_cache();  // the workers' tables copy the seed image, which now holds the tokens
    }
    bool has_literals() const { return enc_->has_literals(); }
    // A superword tokenizer's second level (Encoder::set_superword), once, before the first encode: the tables as
    // superword.h's make_superword_tables takes them.
    void set_superword(const std::vector<uint32_t>& token_len, nb::bytes eligible, nb::bytes letter,
                       bool run_needs_letter, const std::vector<uint32_t>& left, const std::vector<uint32_t>& right,
                       const std::vector<uint32_t>& result) {
        if (enc_->has_superword()) throw nb::value_error("set_superword: this encoder has its second level already");
        try {
            enc_->set_superword(make_superword_tables(token_len, std::string_view(eligible.c_str(), eligible.size()),
                                                      std::string_view(letter.c_str(), letter.size()),
                                                      run_needs_letter, left, right, result));
        } catch (const std::invalid_argument& e) {
            throw nb::value_error(e.what());
        }
    }
    bool has_superword() const { return enc_->has_superword(); }

  private:
    // encode_flat's work: the documents on threads without the GIL, then (with it) the documents whose str needs
    // Python's surrogate rules, into the holes left for them, and the first byte without a token in input order;
    // then the buffer compacted in place into the ids array (no copy into another one), and the offsets.
    nb::object run_flat(const std::vector<Source>& docs, Pretok kind, size_t num_threads, bool wide) {
        size_t n = docs.size();
        size_t units = units_of(docs, 0, n);
        size_t threads = n ? threads_for(num_threads, n, units) : 1;
        FlatRun run;
        std::atomic<bool> cancel{false};
        SignalCheck check(&cancel);
        {
            nb::gil_scoped_release release;
            encode_flat_blocks(*enc_, kind, pool_, regions_, docs, threads, units, run, &check, cancel);
        }
        check.raise_if_stopped();
        std::string bad;
        for (size_t d = 0; d < n; ++d) {
            DocStatus s = static_cast<DocStatus>(run.status[d]);
            if (s == DocStatus::kNeedsGil) {
                CacheLease cache(pool_);
                Scratch& scratch = thread_scratch();
                std::vector<uint32_t>& late = scratch.ids;
                late.clear();
                s = encode_sources_with_gil(*enc_, kind, &docs[d], 1, cache.get(), scratch, late, &bad);
                if (s == DocStatus::kDone) {
                    if (late.size() > utf8_bound(docs[d]))
                        throw std::runtime_error("encode_flat: more ids than the text's bound (internal error)");
                    std::memcpy(run.ids.as<uint32_t>() + run.starts[d], late.data(), late.size() * sizeof(uint32_t));
                    run.counts[d] = static_cast<int64_t>(late.size());
                }
            } else if (s == DocStatus::kBadPiece) {
                for (const FlatBlock& b : run.blocks)
                    if (b.bad_doc == static_cast<int64_t>(d)) bad = b.bad_piece;
            } else if (s != DocStatus::kDone) {
                throw std::runtime_error("encode_flat: a document was not encoded (internal error)");
            }
            if (s == DocStatus::kBadPiece) throw nb::value_error(missing_bytes_message(*enc_, bad).c_str());
        }
        OutBuffer offsets_buffer(regions_, (n + 1) * sizeof(int64_t));
        int64_t* offsets = offsets_buffer.as<int64_t>();
        offsets[0] = 0;
        for (size_t d = 0; d < n; ++d) offsets[d + 1] = offsets[d] + run.counts[d];
        offsets_buffer.wrote((n + 1) * sizeof(int64_t));
        size_t total = wide ? compact_flat<uint32_t>(run) : compact_flat<uint16_t>(run);
        nb::object ids = wide ? lend_array<uint32_t>(std::move(run.ids), total)
                              : lend_array<uint16_t>(std::move(run.ids), total);
        return nb::make_tuple(ids, lend_array<int64_t>(std::move(offsets_buffer), n + 1));
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
    // The flat encode's output memory, kept mapped between calls (shared: an array may outlive the encoder).
    std::shared_ptr<RegionPool> regions_ = std::make_shared<RegionPool>();
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

// ------------------------------------------------------------------------------------------ rank files

// One standard base64 field, strictly: whole groups of 4 of [A-Za-z0-9+/], '=' padding only at the end (and "="
// alone, the empty token), appended to out. False for anything else: base64.b64decode's lenient reading is left to
// Python.
bool decode_base64_strict(const uint8_t* p, size_t n, std::string& out) {
    static const auto table = [] {
        std::array<int8_t, 256> t{};
        t.fill(-1);
        const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        for (int i = 0; i < 64; ++i) t[static_cast<uint8_t>(alphabet[i])] = static_cast<int8_t>(i);
        return t;
    }();
    if (n == 1 && p[0] == '=') return true;
    if (n == 0 || n % 4 != 0) return false;
    const size_t pad = p[n - 1] == '=' ? (p[n - 2] == '=' ? 2 : 1) : 0;
    for (size_t i = 0; i < n; i += 4) {
        const size_t real = i + 4 == n ? 4 - pad : 4;
        uint32_t v = 0;  // unsigned: an invalid character's -1 is never shifted (the field is refused first)
        int8_t bad = 0;
        for (size_t k = 0; k < 4; ++k) {
            const int8_t t = k < real ? table[p[i + k]] : 0;
            bad |= t;
            v = v << 6 | (static_cast<uint32_t>(t) & 63u);
        }
        if (bad < 0) return false;
        out.push_back(static_cast<char>(v >> 16));
        if (real > 2) out.push_back(static_cast<char>(v >> 8));
        if (real > 3) out.push_back(static_cast<char>(v));
    }
    return true;
}

// A .tiktoken rank file's rank -> token bytes, in file order, or None where anything about it is not the plain
// form (a field that is not strict base64 or plain digits, a line that is not two fields, a rank or token listed
// twice, no tokens): then bpe_core.formats.tiktoken_file.parse_tiktoken reads it in Python, with its exact
// errors and warnings. Lines are cut as bytes.splitlines cuts them (\n, \r, \r\n); blank lines are skipped.
// Measured: cl100k 0.28-0.33 s in Python at load 19 (base64.b64decode per line).
nb::object parse_rank_file(nb::bytes data) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(data.c_str());
    const size_t n = data.size();
    auto space = [](uint8_t c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f'; };
    struct Entry {
        uint64_t rank;
        uint32_t offset, size;
    };
    std::vector<Entry> entries;
    entries.reserve(n / 8);
    std::string arena;
    arena.reserve(n);
    uint64_t max_rank = 0;
    for (size_t i = 0; i < n;) {
        size_t end = i;
        while (end < n && p[end] != '\n' && p[end] != '\r') ++end;
        const size_t next = end + 1 < n && p[end] == '\r' && p[end + 1] == '\n' ? end + 2 : end + 1;
        size_t a = i;
        while (a < end && space(p[a])) ++a;
        i = next;
        if (a == end) continue;
        size_t b = a;
        while (b < end && !space(p[b])) ++b;
        size_t c = b;
        while (c < end && space(p[c])) ++c;
        size_t d = c;
        while (d < end && !space(p[d])) ++d;
        size_t e = d;
        while (e < end && space(p[e])) ++e;
        if (c == end || e != end || d - c > 9) return nb::none();  // ranks below 10**9: the rest is left to Python
        uint64_t rank = 0;
        for (size_t k = c; k < d; ++k) {
            if (p[k] < '0' || p[k] > '9') return nb::none();
            rank = rank * 10 + (p[k] - '0');
        }
        const size_t offset = arena.size();
        if (!decode_base64_strict(p + a, b - a, arena)) return nb::none();
        entries.push_back(Entry{rank, static_cast<uint32_t>(offset), static_cast<uint32_t>(arena.size() - offset)});
        max_rank = std::max(max_rank, rank);
    }
    if (entries.empty() || max_rank > 8 * entries.size() + (size_t(1) << 20)) return nb::none();
    std::vector<bool> rank_seen(max_rank + 1);
    BytesMap tokens(entries.size());
    for (const Entry& x : entries) {
        const uint8_t* t = reinterpret_cast<const uint8_t*>(arena.data()) + x.offset;
        if (rank_seen[x.rank] || tokens.find(t, x.size) != BytesMap::kMissing) return nb::none();
        rank_seen[x.rank] = true;
        tokens.insert(t, x.size, 0);
    }
    nb::dict out;
    for (const Entry& x : entries) {
        nb::object key = nb::steal(PyLong_FromUnsignedLongLong(x.rank));
        nb::object value = nb::steal(PyBytes_FromStringAndSize(arena.data() + x.offset, x.size));
        if (!key.is_valid() || !value.is_valid() || PyDict_SetItem(out.ptr(), key.ptr(), value.ptr()) < 0)
            throw nb::python_error();
    }
    return out;
}
// GGUF string arrays (bpe_core/formats/gguf_reader.py): up to `count` strings from data[pos:], each a uint64
// length (byte order `big_endian`) and that many bytes of strict UTF-8. Stops before a string that does not fit in
// the buffer, is not UTF-8 or is longer than max_length: the reader handles that one (refill, or its error) and
// calls again. Returns (strings, pos after the last). Measured: Qwen 3.5's 151,936 tokens + 151,387 merges took
// 0.10-0.12 s in the reader's Python loop.
nb::tuple gguf_strings(nb::bytes data, size_t pos, size_t count, bool big_endian, uint64_t max_length) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(data.c_str());
    const size_t n = data.size();
    nb::list out;
    for (size_t k = 0; k < count && pos <= n && n - pos >= 8; ++k) {
        uint64_t length;
        std::memcpy(&length, p + pos, 8);
        if (big_endian) length = __builtin_bswap64(length);
        if (length > max_length || length > n - pos - 8) break;
        PyObject* text = PyUnicode_DecodeUTF8(reinterpret_cast<const char*>(p + pos + 8), Py_ssize_t(length), "strict");
        if (text == nullptr) {
            PyErr_Clear();
            break;
        }
        if (PyList_Append(out.ptr(), text) < 0) {
            Py_DECREF(text);
            throw nb::python_error();
        }
        Py_DECREF(text);
        pos += 8 + length;
    }
    return nb::make_tuple(out, pos);
}

// GPT-2's byte-level spelling read back (bpe_core/model/bytelevel.py token_strings_to_bytes): each str's
// characters, every one a character of GPT-2's byte map (bytes_to_unicode: the printable Latin-1 bytes as
// themselves, the other 68 bytes as U+0100.. in byte order), as the bytes they stand for. None where a character is
// not one of the map's: the caller decodes token by token. Measured: 0.031-0.065 s for Qwen 3.5's 151,643 tokens
// as one codecs.charmap_encode each.
nb::object byte_level_bytes(nb::list texts) {
    static const std::array<int16_t, 0x144> table = [] {
        std::array<int16_t, 0x144> t;
        t.fill(-1);
        int extra = 0;
        for (int b = 0; b < 256; ++b) {
            const bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            t[keep ? b : 256 + extra++] = int16_t(b);
        }
        return t;
    }();
    const Py_ssize_t n = PyList_GET_SIZE(texts.ptr());
    nb::list out = nb::steal<nb::list>(PyList_New(n));
    std::string buf;
    for (Py_ssize_t k = 0; k < n; ++k) {
        PyObject* text = PyList_GET_ITEM(texts.ptr(), k);
        if (!PyUnicode_CheckExact(text)) return nb::none();
        const Py_ssize_t size = PyUnicode_GET_LENGTH(text);
        const int kind = PyUnicode_KIND(text);
        const void* data = PyUnicode_DATA(text);
        buf.resize(size_t(size));
        for (Py_ssize_t i = 0; i < size; ++i) {
            const Py_UCS4 c = PyUnicode_READ(kind, data, i);
            const int b = c < table.size() ? table[c] : -1;
            if (b < 0) return nb::none();
            buf[size_t(i)] = char(b);
        }
        PyObject* bytes = PyBytes_FromStringAndSize(buf.data(), size);
        if (bytes == nullptr) throw nb::python_error();
        PyList_SET_ITEM(out.ptr(), k, bytes);
    }
    return out;
}

// The UTF-8 of a str, or false (a lone surrogate: the caller's Python path decides).
bool utf8_of(PyObject* text, std::string_view* out) {
    if (!PyUnicode_CheckExact(text)) return false;
    Py_ssize_t size = 0;
    const char* data = PyUnicode_AsUTF8AndSize(text, &size);
    if (data == nullptr) {
        PyErr_Clear();
        return false;
    }
    *out = std::string_view(data, size_t(size));
    return true;
}

// A GGUF merge list as id pairs (bpe_core/formats/gguf_file.py): tokens[id] is the text of the BPE token `id` for
// each id of vocab_ids (a text given twice: the last id, as a dict built in id order keeps); each entry is two such
// texts separated by exactly one space. None where anything is otherwise: the Python loop names the problem.
// Measured: 0.11-0.14 s for Qwen 3.5's 151,387 merges as dict lookups per string.
nb::object gguf_merge_pairs(nb::list tokens, nb::list vocab_ids, nb::list entries) {
    const Py_ssize_t n_tokens = PyList_GET_SIZE(tokens.ptr()), n_ids = PyList_GET_SIZE(vocab_ids.ptr());
    BytesMap text_to_id{size_t(n_ids)};
    for (Py_ssize_t k = n_ids - 1; k >= 0; --k) {  // the last id of a text first: BytesMap keeps the first insert
        PyObject* item = PyList_GET_ITEM(vocab_ids.ptr(), k);
        if (!PyLong_CheckExact(item)) return nb::none();
        const long long id = PyLong_AsLongLong(item);
        if (id < 0 || id >= n_tokens || id > 0xFFFFFFFELL) {
            PyErr_Clear();
            return nb::none();
        }
        std::string_view text;
        if (!utf8_of(PyList_GET_ITEM(tokens.ptr(), id), &text)) return nb::none();
        if (!text_to_id.insert(reinterpret_cast<const uint8_t*>(text.data()), text.size(), uint32_t(id)))
            return nb::none();
    }
    const Py_ssize_t n = PyList_GET_SIZE(entries.ptr());
    nb::list out = nb::steal<nb::list>(PyList_New(n));
    for (Py_ssize_t k = 0; k < n; ++k) {
        std::string_view entry;
        if (!utf8_of(PyList_GET_ITEM(entries.ptr(), k), &entry)) return nb::none();
        const size_t space = entry.find(' ');
        if (space == std::string_view::npos || entry.find(' ', space + 1) != std::string_view::npos) return nb::none();
        const auto* e = reinterpret_cast<const uint8_t*>(entry.data());
        const uint32_t left = text_to_id.find(e, space), right = text_to_id.find(e + space + 1, entry.size() - space - 1);
        if (left == BytesMap::kMissing || right == BytesMap::kMissing) return nb::none();
        PyObject* pair = PyTuple_New(2);
        if (pair == nullptr) throw nb::python_error();
        PyList_SET_ITEM(out.ptr(), k, pair);
        PyObject *a = PyLong_FromUnsignedLong(left), *b = PyLong_FromUnsignedLong(right);
        if (a == nullptr || b == nullptr) {
            Py_XDECREF(a);
            Py_XDECREF(b);
            throw nb::python_error();
        }
        PyTuple_SET_ITEM(pair, 0, a);
        PyTuple_SET_ITEM(pair, 1, b);
        PyObject_GC_UnTrack(pair);  // two ints: no cycle; untracked now rather than by the collections it triggers
    }
    return out;
}

// A token id as a Python int (exactly int, 0 to 0xFFFFFFFE) in *id; false for anything else (no error set).
bool token_id_of(PyObject* x, uint32_t* id) {
    if (!PyLong_CheckExact(x)) return false;
    const long long v = PyLong_AsLongLong(x);
    if (v < 0 || v > 0xFFFFFFFELL) {
        PyErr_Clear();  // (an int past long long)
        return false;
    }
    *id = uint32_t(v);
    return true;
}

// The merge values of bpe_core/model/vocab.py (build_tables): (left << 32 | right) -> rank << 32 | the id of the
// token that left's bytes + right's make, for merges given as (int, int) pairs of ids of vocab (a dict id -> bytes),
// bytes_to_id the tokens that own their bytes. None where anything is otherwise (a merge of a missing id, a result
// that is no token, a merge listed twice, not exactly this shape): the Python loop names the problem. Measured:
// 0.10-0.12 s for Qwen 3.5's 151,387 merges in Python (a bytes concatenation, hash and dict lookup each).
nb::object merge_values(nb::dict vocab, nb::dict bytes_to_id, nb::handle merges) {
    std::vector<std::string_view> id_to_bytes;  // into the bytes objects of vocab (borrowed: the GIL is held)
    std::vector<bool> present;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(vocab.ptr(), &pos, &key, &value)) {
        uint32_t id;
        if (!PyBytes_CheckExact(value) || !token_id_of(key, &id)) return nb::none();
        if (size_t(id) >= id_to_bytes.size()) {
            id_to_bytes.resize(size_t(id) + 1);
            present.resize(size_t(id) + 1);
        }
        id_to_bytes[size_t(id)] = std::string_view(PyBytes_AS_STRING(value), size_t(PyBytes_GET_SIZE(value)));
        present[size_t(id)] = true;
    }
    BytesMap owners(size_t(PyDict_Size(bytes_to_id.ptr())));
    pos = 0;
    while (PyDict_Next(bytes_to_id.ptr(), &pos, &key, &value)) {
        uint32_t id;
        if (!PyBytes_CheckExact(key) || !token_id_of(value, &id)) return nb::none();
        if (!owners.insert(reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(key)), size_t(PyBytes_GET_SIZE(key)), id))
            return nb::none();
    }
    if (!PyList_CheckExact(merges.ptr()) && !PyTuple_CheckExact(merges.ptr())) return nb::none();
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(merges.ptr());
    PyObject** items = PySequence_Fast_ITEMS(merges.ptr());
    std::string merged;
    nb::dict out;
    for (Py_ssize_t rank = 0; rank < n; ++rank) {
        PyObject* pair = items[rank];
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2) return nb::none();
        PyObject *l = PyTuple_GET_ITEM(pair, 0), *r = PyTuple_GET_ITEM(pair, 1);
        if (!PyLong_CheckExact(l) || !PyLong_CheckExact(r)) return nb::none();
        const long long left = PyLong_AsLongLong(l), right = PyLong_AsLongLong(r);
        if (left < 0 || right < 0 || size_t(left) >= present.size() || size_t(right) >= present.size() ||
            !present[size_t(left)] || !present[size_t(right)]) {
            PyErr_Clear();
            return nb::none();
        }
        merged.assign(id_to_bytes[size_t(left)]);
        merged.append(id_to_bytes[size_t(right)]);
        const uint32_t made = owners.find(reinterpret_cast<const uint8_t*>(merged.data()), merged.size());
        const uint64_t pair_key = uint64_t(left) << 32 | uint64_t(right);
        if (made == BytesMap::kMissing) return nb::none();
        nb::object k = nb::steal(PyLong_FromUnsignedLongLong(pair_key));
        nb::object v = nb::steal(PyLong_FromUnsignedLongLong(uint64_t(rank) << 32 | made));
        if (!k.is_valid() || !v.is_valid() || PyDict_SetItem(out.ptr(), k.ptr(), v.ptr()) < 0)
            throw nb::python_error();
    }
    if (PyDict_Size(out.ptr()) != n) return nb::none();  // a merge listed twice
    return out;
}
}  // namespace

void bind_encoder(nb::module_& m) {
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
        .def("set_literals", &PyEncoder::set_literals, nb::arg("tokens"),
             "Cut every text at these (bytes, id) added tokens, leftmost-longest (once, before the first encode).")
        .def_prop_ro("has_literals", &PyEncoder::has_literals)
        .def("set_superword", &PyEncoder::set_superword, nb::arg("token_len"), nb::arg("eligible"), nb::arg("letter"),
             nb::arg("run_needs_letter"), nb::arg("left"), nb::arg("right"), nb::arg("result"),
             "A superword tokenizer's second level (once, before the first encode): every text's runs of pieces "
             "that became one eligible word token each get the supermerges (left, right -> result, by rank).")
        .def_prop_ro("has_superword", &PyEncoder::has_superword)
        .def_prop_ro("cache_size", &PyEncoder::cache_size)
        .def_prop_ro("pair_count", &PyEncoder::pair_count)
        .def_prop_ro("seed_count", &PyEncoder::seed_count,
                     "Vocabulary entries of 1-15 bytes in the seed image of each worker's piece table.")
        .def_prop_rw("cache_limit", &PyEncoder::cache_limit, &PyEncoder::set_cache_limit,
                     "Bytes each worker's cache may hold (never less than the seed image); over it, the cache is "
                     "reset to the seed image.")
        .def_prop_ro("cache_resets", &PyEncoder::cache_resets,
                     "Generational resets of the workers' piece tables at the limit, since the encoder was built.");
    m.def("parse_rank_file", &parse_rank_file, nb::arg("data"));
    m.def("gguf_strings", &gguf_strings, nb::arg("data"), nb::arg("pos"), nb::arg("count"), nb::arg("big_endian"),
          nb::arg("max_length"));
    m.def("gguf_merge_pairs", &gguf_merge_pairs, nb::arg("tokens"), nb::arg("vocab_ids"), nb::arg("entries"));
    m.def("byte_level_bytes", &byte_level_bytes, nb::arg("texts"));
    m.def("merge_values", &merge_values, nb::arg("vocab"), nb::arg("bytes_to_id"), nb::arg("merges"));
    m.def("validate_arrow_strings", &validate_arrow_strings, nb::arg("offsets"), nb::arg("width"), nb::arg("data"),
          nb::arg("data_size"), nb::arg("n"));
    m.def(
        "transcode_tier",
        [](const std::string& tier) {
            if (!tier.empty()) {
                try {
                    bpe::transcode_set_tier(tier);
                } catch (const std::invalid_argument& e) {
                    throw nb::value_error(e.what());
                }
            }
            return std::string(bpe::transcode_tier());
        },
        nb::arg("tier") = "",
        "The str -> UTF-8 transcoder's tier ('vbmi2' or 'scalar'); with `tier` ('scalar', or 'auto': the best this "
        "CPU has), set it first (tests compare the tiers' ids).");
}
