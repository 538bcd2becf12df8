#include "bench_spec.h"

namespace kvscope::ui {

QJsonObject BenchSpec::toJson() const {
    return {{"name", name},           {"dataset", dataset}, {"dataset_path", datasetPath},
            {"num_prompts", numPrompts}, {"input_len", inputLen},
            {"output_len", outputLen},   {"range_ratio", rangeRatio},
            {"prefix_len", prefixLen},   {"request_rate", requestRate},
            {"burstiness", burstiness},  {"max_concurrency", maxConcurrency},
            {"seed", double(seed)}};
}

BenchSpec BenchSpec::fromJson(const QJsonObject& o) {
    BenchSpec s;
    s.name = o.value("name").toString(s.name);
    s.dataset = o.value("dataset").toString(s.dataset);
    s.datasetPath = o.value("dataset_path").toString();
    s.numPrompts = o.value("num_prompts").toInt(s.numPrompts);
    s.inputLen = o.value("input_len").toInt(s.inputLen);
    s.outputLen = o.value("output_len").toInt(s.outputLen);
    s.rangeRatio = o.value("range_ratio").toDouble(s.rangeRatio);
    s.prefixLen = o.value("prefix_len").toInt(s.prefixLen);
    s.requestRate = o.value("request_rate").toDouble(s.requestRate);
    s.burstiness = o.value("burstiness").toDouble(s.burstiness);
    s.maxConcurrency = o.value("max_concurrency").toInt(s.maxConcurrency);
    s.seed = quint64(o.value("seed").toDouble(double(s.seed)));
    return s;
}

}  // namespace kvscope::ui
