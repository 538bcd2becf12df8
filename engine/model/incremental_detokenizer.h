// IncrementalDetokenizer: turns a stream of generated token ids into text deltas for streaming
// (SSE, chat panes). Deltas never end inside a UTF-8 sequence: incomplete trailing bytes are held
// back until they complete, and bytes that can no longer complete become U+FFFD. Concatenated,
// the deltas equal Tokenizer::decode(all ids) (special tokens skipped, SentencePiece's one leading
// space stripped). One per request; not thread-safe; the Tokenizer must outlive it.
#pragma once

#include "model/tokenizer.h"

#include <cstdint>
#include <span>
#include <string>

namespace kvscope {

class IncrementalDetokenizer {
public:
    explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = true);
    // A stream that continues after `prompt` (a request's output): SentencePiece's leading space is
    // stripped only when the prompt decodes to no text (as decode(prompt + output) minus decode(prompt)).
    IncrementalDetokenizer(const Tokenizer& tokenizer, std::span<const int32_t> prompt, bool skip_special = true);

    // The text that token `id` completes (may be ""). Throws BadInput for an id out of range.
    std::string push(int32_t id);
    // End of the stream: whatever is held back, with an unfinished sequence as U+FFFD.
    std::string flush();

private:
    const Tokenizer* tokenizer_;
    bool skip_special_;
    bool seen_bytes_ = false;  // the leading-space strip applies to the first byte only
    std::string pending_;      // bytes of an incomplete UTF-8 sequence (at most 3)
};

}  // namespace kvscope
