// Python bindings of the hand-written pre-tokenizers (called from module.cpp's NB_MODULE): for tests, the fuzzer and
// PreTokenizer.split_bytes. Bulk encoding calls pretok_split from C++ directly, without a Python object per piece.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "batch.h"  // SignalCheck: Ctrl-C during a split
#include "pretok.h"
#include "pretok_rx.h"
#include "pretok_blocks.h"

namespace nb = nanobind;

void bind_pretok(nb::module_& m);

namespace {

nb::list names_list() {
    nb::list out;
    for (std::string_view name : bpe::pretok_names()) out.append(nb::str(name.data(), name.size()));
    return out;
}

// The pieces of `data` under the preset `name`, as bytes objects.
nb::list split_to_bytes(const std::string& name, nb::bytes data) {
    const bpe::Pretok kind = bpe::pretok_from_name(name);  // a preset's name, or a compiled program's "rx:N"
    if (kind == bpe::Pretok::kNone) {
        std::string known;
        for (std::string_view n : bpe::pretok_names()) known += (known.empty() ? "" : ", ") + std::string(n);
        throw nb::value_error(("pretok_split: no hand-written pre-tokenizer named '" + name + "'; use one of " + known +
                               " (PreTokenizer.native_kind gives it)")
                                  .c_str());
    }
    const auto* text = reinterpret_cast<const uint8_t*>(data.c_str());
    const size_t n = data.size();
    std::vector<size_t> ends;
    bpe::SignalCheck check;
    {
        nb::gil_scoped_release release;  // `data` stays referenced (and immutable) by the caller's frame
        bpe::StopScope scope(&check);
        bpe::pretok_split(kind, text, n, ends);
    }
    check.raise_if_stopped();
    PyObject* list = PyList_New(static_cast<Py_ssize_t>(ends.size()));
    if (!list) throw nb::python_error();
    size_t start = 0;
    for (size_t k = 0; k < ends.size(); ++k) {
        PyObject* piece = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(text + start),
                                                    static_cast<Py_ssize_t>(ends[k] - start));
        if (!piece) {
            Py_DECREF(list);
            throw nb::python_error();
        }
        PyList_SET_ITEM(list, static_cast<Py_ssize_t>(k), piece);
        start = ends[k];
    }
    return nb::steal<nb::list>(list);
}

// RxBudgetExceeded -> bpe_core.pretokenize.pretokenizer.PreTokenizeTimeout (a TimeoutError): the error the regex
// path raises past its time limit, so that callers (the encoding pipeline's dead letters) treat both alike.
void translate_budget(const std::exception_ptr& p, void*) {
    try {
        std::rethrow_exception(p);
    } catch (const bpe::RxBudgetExceeded& e) {
        PyObject* type = PyExc_TimeoutError;
        nb::object cls;
        try {
            cls = nb::module_::import_("bpe_core.pretokenize.pretokenizer").attr("PreTokenizeTimeout");
            type = cls.ptr();
        } catch (...) {
        }
        PyErr_SetString(type, e.what());
    }
}

}  // namespace

void bind_pretok(nb::module_& m) {
    nb::register_exception_translator(&translate_budget);
    m.def("pretok_names", &names_list, "Names of the presets with a hand-written pre-tokenizer, in enum order.");
    m.def("pretok_split", &split_to_bytes, nb::arg("name"), nb::arg("data"),
          "The pieces of UTF-8 `data` under the preset `name` (invalid bytes split as their surrogateescape "
          "characters would).");
    m.def(
        "pretok_compile",
        [](const std::vector<int64_t>& program, const std::vector<std::vector<uint32_t>>& classes,
           const std::string& label) { return bpe::rx_name(bpe::rx_register(program, classes, label)); },
        nb::arg("program"), nb::arg("classes"), nb::arg("label") = "",
        "Register a pre-tokenizer program of bpe_core/pretokenize/compiler.py; returns the name ('rx:N') that "
        "pretok_split and the encoders take; `label` names it in errors. Programs live for the process.");
    m.def("pretok_rx_last_steps", &bpe::rx_last_steps,
          "Steps the compiled matcher took on the last text it split on this thread (tests of its budget).");
    m.def(
        "pretok_rx_tier",
        [](const std::string& tier) {
            if (!tier.empty()) bpe::rx_set_tier(tier);
            return std::string(bpe::rx_tier());
        },
        nb::arg("tier") = "",
        "The compiled cascades' window tier ('vbmi' or 'sse2'); with `tier` ('sse2', or 'auto': the best this CPU "
        "has), set it first (tests compare the tiers' pieces).");
    m.def("pretok_rx_budget", []() { return nb::make_tuple(bpe::kRxStepsBase, bpe::kRxStepsPerByte); },
          "(base, per_byte): the compiled matcher gives up past base + per_byte * n steps on a text of n bytes.");
    m.def(
        "pretok_split_ends",
        [](const std::string& name, nb::bytes data, const std::string& tier, size_t batch) {
            const bpe::Pretok kind = bpe::pretok_from_name(name);
            if (kind == bpe::Pretok::kNone || batch == 0 || (tier != "scalar" && tier != "auto" && tier != "sse2"))
                throw nb::value_error(("pretok_split_ends: preset '" + name + "', tier '" + tier + "', batch " +
                                       std::to_string(batch) + ": use a pretok_names() preset, a tier of scalar, "
                                       "auto or sse2, and a batch of at least 1")
                                          .c_str());
            const auto* text = reinterpret_cast<const uint8_t*>(data.c_str());
            std::vector<size_t> ends(batch), all;
            size_t pos = 0, k, covered = 0;
            {
                nb::gil_scoped_release release;
                const char* t = tier.c_str();
                const bool scalar = tier == "scalar";
                while ((k = scalar ? bpe::pretok_split_some(kind, text, data.size(), &pos, ends.data(), batch)
                                   : bpe::pretok_blocks_split_some_tier(kind, text, data.size(), &pos, ends.data(),
                                                                        batch, t, &covered)))
                    all.insert(all.end(), ends.begin(), ends.begin() + k);
            }
            return nb::make_tuple(nb::bytes(reinterpret_cast<const char*>(all.data()), all.size() * sizeof(size_t)),
                                  covered);
        },
        nb::arg("name"), nb::arg("data"), nb::arg("tier") = "auto", nb::arg("batch") = 256,
        "(ends, covered): the piece end offsets of `data` (native-endian size_t bytes), `batch` at a time as the "
        "encoder takes them, from the 64-byte block splitter (pretok_blocks.cpp) in `tier` (auto: the best this CPU "
        "has; sse2) or from the scalar one (tier='scalar'), and how many bytes the blocks themselves split (the rest "
        "went to the scalar fallback). For tests and callgrind.");
    m.def("pretok_blocks_tier", &bpe::pretok_blocks_tier, "The block classifier's instruction tier on this CPU.");
    m.def(
        "unicode_tables_info",
        []() {
            nb::dict info;
            info["regex_version"] = bpe::pretok_regex_version();
            info["unicode_version"] = bpe::pretok_unicode_version();
            info["digest"] = bpe::pretok_tables_digest();
            return info;
        },
        "The `regex` version and Unicode version the pre-tokenizers' property tables were generated from, and their "
        "sha256.");
}
