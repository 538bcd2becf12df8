// What a chat pane shows when the mouse rests on a generated token: its probability and the
// alternatives the model weighed at that position (the engine's TokenLogprobs, from the raw logits, so
// the figures are the model's own whatever the pane's temperature), as a rich-text tooltip.
#pragma once

#include "model/tokenizer.h"
#include "runner/logprobs.h"

#include <QString>

namespace kvscope::ui {

// A token as text a person can read in a table: spaces as U+2423, newlines and tabs as arrows, bytes
// that are not whole UTF-8 as <0xNN>.
QString visibleToken(const std::string& bytes);

QString tokenAlternativesToolTip(const TokenLogprobs& logprobs, const Tokenizer& tokenizer);

}  // namespace kvscope::ui
