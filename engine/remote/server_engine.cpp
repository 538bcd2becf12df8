#include "remote/server_engine.h"

namespace kvscope {

std::string_view to_string(ServerEngine e) {
    switch (e) {
        case ServerEngine::KVSCOPE: return "kvscope";
        case ServerEngine::VLLM: return "vllm";
        case ServerEngine::SGLANG: return "sglang";
        case ServerEngine::TGI: return "tgi";
        case ServerEngine::LLAMACPP: return "llama.cpp";
        case ServerEngine::UNKNOWN: break;
    }
    return "unknown";
}

}  // namespace kvscope
