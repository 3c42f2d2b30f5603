// Python bindings of the decoder and the streaming decoder's byte state (bpe_core._native._core.Decoder,
// StreamState): ids read with the reference's rules, text made by CPython's own UTF-8 decoder.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <nanobind/ndarray.h>

#include <cstring>
#include <string>
#include <vector>

#include "bindings.h"

namespace nb = nanobind;

namespace {

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
}  // namespace

void bind_decoder(nb::module_& m) {
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
}
