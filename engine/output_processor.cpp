#include "output_processor.h"

#include <algorithm>
#include <span>

namespace kvscope {

void OutputProcessor::add_request(const Request& r) {
    State& st = states_[r.request_id];
    st.detokenizer = std::make_unique<IncrementalDetokenizer>(
        tokenizer_, std::span<const int32_t>(r.all_token_ids.data(), static_cast<size_t>(r.num_prompt_tokens)));
}

void OutputProcessor::remove_request(const std::string& request_id) { states_.erase(request_id); }

RequestOutput OutputProcessor::process_token(const Request& r, int32_t token) {
    State& st = states_.at(r.request_id);
    st.text += st.detokenizer->push(token);
    RequestOutput o;
    o.request_id = r.request_id;
    o.new_token_ids = {token};
    o.num_cached_tokens = std::max(0, r.num_cached_tokens);
    const std::optional<FinishReason> reason = check_stop(r, st, token, o);
    if (reason) {
        st.text += st.detokenizer->flush();
        if (*reason == FinishReason::STOP) check_stop(r, st, -1, o);  // flushed bytes may complete a stop string
    }
    // Hold back a tail that could still become a stop string.
    size_t holdback = 0;
    if (!reason)
        for (const auto& s : r.sampling_params.stop) holdback = std::max(holdback, s.size() - 1);
    size_t ready = st.text.size() > holdback ? st.text.size() - holdback : 0;
    // Never half a character: a stop string's byte count held back the end of a "“" (3 bytes), and each
    // streamed delta, serialised on its own, turned the halves into U+FFFD.
    while (ready > st.emitted && ready < st.text.size() && (static_cast<unsigned char>(st.text[ready]) & 0xC0) == 0x80) --ready;
    if (ready > st.emitted) {
        o.text_delta = st.text.substr(st.emitted, ready - st.emitted);
        st.emitted = ready;
    }
    if (reason) {
        o.finished = true;
        o.finish_reason = *reason;
    }
    return o;
}

// Stop strings cut the text where they begin, or where they end with include_stop_str_in_output. As in
// vLLM, they count only once more than min_tokens tokens are out (EOS and stop tokens from min_tokens on).
std::optional<FinishReason> OutputProcessor::check_stop(const Request& r, State& st, int32_t token, RequestOutput& o) const {
    const SamplingParams& p = r.sampling_params;
    if (r.num_output_tokens() > p.min_tokens)
        for (const auto& s : p.stop) {
            const size_t from = st.emitted > s.size() ? st.emitted - s.size() : 0;
            if (size_t pos = st.text.find(s, from); pos != std::string::npos) {
                st.text.resize(pos + (p.include_stop_str_in_output ? s.size() : 0));
                o.stop_string = s;
                o.stop_token.reset();
                return FinishReason::STOP;
            }
        }
    if (token < 0) return std::nullopt;
    if (r.num_output_tokens() >= p.min_tokens) {
        if (!p.ignore_eos && tokenizer_.is_eos(token)) return FinishReason::STOP;
        if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end()) {
            o.stop_token = token;
            return FinishReason::STOP;
        }
    }
    if (r.num_output_tokens() >= p.max_tokens || r.num_tokens() >= max_model_len_) return FinishReason::LENGTH;
    return std::nullopt;
}

}  // namespace kvscope
