// Streaming detokenizer (see incremental_detokenizer.h). utf8_scan's Truncated status is the only
// case held back; a complete or definitely invalid prefix is emitted at once, which is why the
// deltas concatenate to utf8_lossy of all bytes, i.e. to decode().
#include "model/incremental_detokenizer.h"

#include "util/utf8.h"

namespace kvscope {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(&tokenizer), skip_special_(skip_special) {}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                                               bool skip_special)
    : IncrementalDetokenizer(tokenizer, skip_special) {
    for (int32_t id : prompt)
        if (!(skip_special_ && tokenizer.is_special(id)) && !tokenizer.token_to_bytes(id).empty()) seen_bytes_ = true;
}

std::string IncrementalDetokenizer::push(int32_t id) {
    const std::string& bytes = tokenizer_->token_to_bytes(id);  // validates the id
    if (skip_special_ && tokenizer_->is_special(id)) return {};
    if (bytes.empty()) return {};
    std::string_view add = bytes;
    if (!seen_bytes_) {
        seen_bytes_ = true;
        if (tokenizer_->strips_leading_space() && add.front() == ' ') add.remove_prefix(1);
    }
    pending_.append(add);

    std::string out;
    size_t pos = 0;
    while (pos < pending_.size()) {
        const Utf8Scan s = utf8_scan(pending_, pos);
        if (s.status == Utf8Status::Truncated) break;  // may still complete: hold back
        if (s.status == Utf8Status::Complete) out.append(pending_, pos, s.length);
        else out.append(kUtf8Replacement);
        pos += s.length;
    }
    pending_.erase(0, pos);
    return out;
}

std::string IncrementalDetokenizer::flush() {
    std::string out = utf8_lossy(pending_);
    pending_.clear();
    return out;
}

}  // namespace kvscope
