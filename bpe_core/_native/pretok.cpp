// Hand-written pre-tokenizers (see pretok.h).
#include "pretok.h"

#include <stdexcept>

namespace bpe {

const std::vector<std::string_view>& pretok_names() {
    static const std::vector<std::string_view> names{"r50k", "cl100k", "o200k", "llama3", "qwen2"};
    return names;
}

Pretok pretok_from_name(std::string_view name) {
    const auto& names = pretok_names();
    for (size_t i = 0; i < names.size(); ++i)
        if (names[i] == name) return static_cast<Pretok>(i);
    return Pretok::kNone;
}

void pretok_split(Pretok, const uint8_t*, size_t, std::vector<size_t>&) {
    throw std::logic_error("pretok_split: not implemented yet");  // placeholder until the matchers land
}

}  // namespace bpe
