// Which serving engine a remote target runs: it decides which /metrics families are read
// (server_metrics.h) and which request fields the engine takes (openai_stream.h).
#pragma once

#include <string_view>

namespace kvscope {

enum class ServerEngine { UNKNOWN, KVSCOPE, VLLM, SGLANG, TGI, LLAMACPP };
std::string_view to_string(ServerEngine engine);

}  // namespace kvscope
