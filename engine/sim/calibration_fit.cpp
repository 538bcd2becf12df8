#include "sim/calibration_fit.h"

#include "util/errors.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

namespace kvscope {

namespace {

// The fitted parameters, as the model uses them: the inverse efficiencies (each >= 1, since a factor is
// at most 1) and the overheads (>= 0). With a branch of each max() chosen per step, the predicted time
// is linear in them, so a fit is a bounded linear least-squares problem; the branches are then chosen
// again with the new values until they settle.
enum Param { kInvMfuLinear, kInvBwLinear, kInvMfuAttention, kInvBwAttention, kStepOverhead, kPerSeqOverhead, kNumParams };
constexpr std::array<const char*, kNumParams> kParamNames = {"mfu_linear", "bw_efficiency_linear", "mfu_attention",
                                                             "bw_efficiency_attention", "step_overhead_us",
                                                             "per_seq_overhead_us"};
// When two parameters' columns are (nearly) proportional the steps cannot tell them apart; the one
// earlier in this order is fitted and the later keeps its starting value. The fixed overhead first:
// a starting value far off (1.2 ms on a machine whose steps take 0.2 ms) would leave nothing to fit.
constexpr std::array<Param, kNumParams> kFitOrder = {kStepOverhead, kInvMfuLinear, kInvBwAttention, kInvMfuAttention,
                                                     kInvBwLinear, kPerSeqOverhead};
using Params = std::array<double, kNumParams>;

Params params_of(const StepTimeConstants& k) {
    return {1 / k.mfu_linear, 1 / k.bw_efficiency_linear, 1 / k.mfu_attention, 1 / k.bw_efficiency_attention,
            k.step_overhead, k.per_seq_overhead};
}

StepTimeConstants constants_of(const Params& p, StepTimeConstants k) {
    k.mfu_linear = 1 / p[kInvMfuLinear];
    k.bw_efficiency_linear = 1 / p[kInvBwLinear];
    k.mfu_attention = 1 / p[kInvMfuAttention];
    k.bw_efficiency_attention = 1 / p[kInvBwAttention];
    k.step_overhead = p[kStepOverhead];
    k.per_seq_overhead = p[kPerSeqOverhead];
    return k;
}

struct Sample {
    StepTimeTerms t;
    double y = 0;  // measured seconds minus the (unfitted) all-reduce time
    double weight = 1;  // IRLS weight: 1 / |relative error| of the previous round
};

// The step's row of the design matrix for the branches `p` makes active.
std::array<double, kNumParams> row_of(const StepTimeTerms& t, const Params& p) {
    std::array<double, kNumParams> r{};
    if (t.linear_compute * p[kInvMfuLinear] >= t.linear_memory * p[kInvBwLinear]) r[kInvMfuLinear] = t.linear_compute;
    else r[kInvBwLinear] = t.linear_memory;
    if (t.attention_compute * p[kInvMfuAttention] >= t.attention_prefill_memory * p[kInvBwAttention])
        r[kInvMfuAttention] = t.attention_compute;
    else r[kInvBwAttention] = t.attention_prefill_memory;
    r[kInvBwAttention] += t.attention_decode_memory;
    r[kStepOverhead] = 1;
    r[kPerSeqOverhead] = t.num_seqs;
    return r;
}

double predict(const StepTimeTerms& t, const Params& p) {
    return std::max(t.linear_compute * p[kInvMfuLinear], t.linear_memory * p[kInvBwLinear]) +
           std::max(t.attention_compute * p[kInvMfuAttention], t.attention_prefill_memory * p[kInvBwAttention]) +
           t.attention_decode_memory * p[kInvBwAttention] + t.allreduce + p[kStepOverhead] +
           p[kPerSeqOverhead] * t.num_seqs;
}

double relative_error(const Sample& x, const Params& p) {
    return (predict(x.t, p) - x.y - x.t.allreduce) / (x.y + x.t.allreduce);
}

// Sum of absolute relative errors: every step counts alike, however long it took, and a step that
// other processes on the machine stretched 10x moves the fit no more than any other.
double objective(const std::vector<Sample>& s, const Params& p) {
    double sum = 0;
    for (const Sample& x : s) sum += std::abs(relative_error(x, p));
    return sum;
}

// Solves the normal equations of the columns `cols` (k <= 6) by Gaussian elimination with partial
// pivoting; nullopt when singular.
std::optional<std::vector<double>> solve_normal(const std::vector<std::vector<double>>& a, const std::vector<double>& b,
                                                const std::vector<int>& cols) {
    const size_t k = cols.size();
    std::vector<std::vector<double>> m(k, std::vector<double>(k + 1, 0));
    for (size_t i = 0; i < k; ++i) {
        for (size_t j = 0; j < k; ++j)
            for (size_t r = 0; r < b.size(); ++r) m[i][j] += a[r][cols[i]] * a[r][cols[j]];
        for (size_t r = 0; r < b.size(); ++r) m[i][k] += a[r][cols[i]] * b[r];
    }
    for (size_t c = 0; c < k; ++c) {
        size_t piv = c;
        for (size_t r = c + 1; r < k; ++r)
            if (std::abs(m[r][c]) > std::abs(m[piv][c])) piv = r;
        if (std::abs(m[piv][c]) < 1e-12) return std::nullopt;
        std::swap(m[c], m[piv]);
        for (size_t r = 0; r < k; ++r)
            if (r != c) {
                const double f = m[r][c] / m[c][c];
                for (size_t j = c; j <= k; ++j) m[r][j] -= f * m[c][j];
            }
    }
    std::vector<double> x(k);
    for (size_t i = 0; i < k; ++i) x[i] = m[i][k] / m[i][i];
    return x;
}

struct Round {
    Params p{};
    std::vector<int> fitted;                     // parameters the steps determined this round
    std::vector<std::pair<int, std::string>> kept;  // the others and why
};

// One bounded least-squares fit with the branches that `start` makes active. Parameters whose column
// is empty, or (nearly) a combination of earlier ones in kFitOrder, take their value from `initial`
// (the starting constants), so that what the steps cannot determine is never an artefact of the search.
Round fit_round(const std::vector<Sample>& samples, const Params& start, const Params& initial) {
    const size_t n = samples.size();
    std::vector<std::array<double, kNumParams>> rows(n);
    for (size_t i = 0; i < n; ++i) rows[i] = row_of(samples[i].t, start);

    // Weighted (relative error) and normalised columns; Gram-Schmidt in kFitOrder finds the ones the
    // steps determine.
    Round out;
    out.p = start;
    std::vector<std::vector<double>> basis;
    std::array<double, kNumParams> scale{};
    for (Param c : kFitOrder) {
        std::vector<double> v(n);
        double norm = 0;
        for (size_t i = 0; i < n; ++i) {
            v[i] = rows[i][c] * std::sqrt(samples[i].weight) / samples[i].y;
            norm += v[i] * v[i];
        }
        norm = std::sqrt(norm);
        if (norm == 0) {
            out.kept.emplace_back(c, "no step exercised it");
            continue;
        }
        scale[c] = norm;
        for (double& x : v) x /= norm;
        for (const auto& b : basis) {
            double dot = 0;
            for (size_t i = 0; i < n; ++i) dot += v[i] * b[i];
            for (size_t i = 0; i < n; ++i) v[i] -= dot * b[i];
        }
        double rest = 0;
        for (double x : v) rest += x * x;
        if (std::sqrt(rest) < 1e-3) {
            out.kept.emplace_back(c, "the steps cannot tell it from the constants fitted before it");
            continue;
        }
        for (double& x : v) x /= std::sqrt(rest);
        basis.push_back(std::move(v));
        out.fitted.push_back(c);
    }

    // Unknowns z >= 0: the inverse efficiencies are 1 + z, the overheads z. Every column is scaled to
    // unit norm; the kept parameters and the efficiencies' lower bound 1 move to the target.
    const auto is_efficiency = [](int c) { return c < kStepOverhead; };
    std::vector<std::vector<double>> a(n, std::vector<double>(out.fitted.size()));
    std::vector<double> b(n);
    for (size_t i = 0; i < n; ++i) {
        double target = samples[i].y;
        for (int c = 0; c < kNumParams; ++c) {
            const bool fitted = std::find(out.fitted.begin(), out.fitted.end(), c) != out.fitted.end();
            if (!fitted) target -= rows[i][c] * initial[c];
            else if (is_efficiency(c)) target -= rows[i][c];
        }
        const double w = std::sqrt(samples[i].weight) / samples[i].y;
        for (size_t j = 0; j < out.fitted.size(); ++j) a[i][j] = rows[i][out.fitted[j]] / scale[out.fitted[j]] * w;
        b[i] = target * w;
    }
    // Non-negative least squares over at most 6 unknowns: the optimum is the unconstrained fit on some
    // subset of them with the rest at 0, so try every subset and keep the best feasible one.
    const size_t k = out.fitted.size();
    double best = INFINITY;
    std::vector<double> best_z(k, 0);
    for (unsigned mask = 0; mask < (1u << k); ++mask) {
        std::vector<int> cols;
        for (size_t j = 0; j < k; ++j)
            if (mask & (1u << j)) cols.push_back(static_cast<int>(j));
        std::vector<double> z(k, 0);
        if (!cols.empty()) {
            const auto x = solve_normal(a, b, cols);
            if (!x || std::any_of(x->begin(), x->end(), [](double v) { return v < 0; })) continue;
            for (size_t j = 0; j < cols.size(); ++j) z[cols[j]] = (*x)[j];
        }
        double sse = 0;
        for (size_t i = 0; i < n; ++i) {
            double r = -b[i];
            for (size_t j = 0; j < k; ++j) r += a[i][j] * z[j];
            sse += r * r;
        }
        if (sse < best) best = sse, best_z = z;
    }
    for (const auto& kept : out.kept) out.p[kept.first] = initial[kept.first];
    for (size_t j = 0; j < k; ++j) {
        const int c = out.fitted[j];
        out.p[c] = best_z[j] / scale[c] + (is_efficiency(c) ? 1.0 : 0.0);
    }
    return out;
}

struct ErrorStats {
    double mean = 0, median = 0, predicted_sum = 0;
};

ErrorStats error_stats(const std::vector<Sample>& s, const Params& p) {
    ErrorStats e;
    std::vector<double> errors;
    for (const Sample& x : s) {
        e.predicted_sum += predict(x.t, p);
        errors.push_back(std::abs(relative_error(x, p)));
        e.mean += errors.back() / static_cast<double>(s.size());
    }
    std::sort(errors.begin(), errors.end());
    e.median = errors[errors.size() / 2];
    return e;
}

}  // namespace

CalibrationFit fit_calibration(const StepTimeModel& model, const std::vector<MeasuredStep>& steps) {
    std::vector<Sample> samples;
    CalibrationFit fit;
    for (const MeasuredStep& m : steps) {
        if (m.work.num_tokens <= 0 || !(m.duration > 0) || !std::isfinite(m.duration)) continue;
        Sample s;
        s.t = model.terms(m.work);
        s.y = m.duration - s.t.allreduce;
        if (!(s.y > 0)) continue;  // faster than the all-reduce alone: nothing the fit can use
        samples.push_back(s);
        fit.measured_seconds += m.duration;
    }
    fit.num_steps = static_cast<int>(samples.size());
    if (fit.num_steps < kMinCalibrationSteps)
        throw BadInput("calibration: " + std::to_string(fit.num_steps) + " measured steps computed something; at least " +
                       std::to_string(kMinCalibrationSteps) + " are needed (run a longer benchmark with --save-timeline)");

    // Iteratively reweighted least squares toward the least absolute relative error: each round fits
    // with the branches the current values make active and weights 1 / |relative error| from the last
    // round. From the starting constants and from full efficiency; the best round by the objective wins.
    const Params initial = params_of(model.constants());
    Round best;
    double best_obj = INFINITY;
    for (Params p : {initial, Params{1, 1, 1, 1, initial[kStepOverhead], initial[kPerSeqOverhead]}}) {
        for (Sample& x : samples) x.weight = 1;
        for (int iter = 0; iter < 60; ++iter) {
            Round r = fit_round(samples, p, initial);
            const double obj = objective(samples, r.p);
            if (obj < best_obj) best_obj = obj, best = r;
            if (r.p == p) break;
            p = r.p;
            for (Sample& x : samples) x.weight = 1 / std::max(std::abs(relative_error(x, p)), 1e-3);
        }
    }
    if (best.fitted.size() < 2)
        throw BadInput("calibration: the " + std::to_string(fit.num_steps) +
                       " measured steps do not vary enough to fit more than a fixed time per step (every step did "
                       "the same work); run a workload with varied batch sizes and lengths");

    fit.constants = constants_of(best.p, model.constants());
    for (int c : best.fitted) fit.fitted.push_back(kParamNames[c]);
    for (const auto& [c, why] : best.kept) fit.kept.push_back(std::string(kParamNames[c]) + ": " + why);
    const ErrorStats before = error_stats(samples, initial), after = error_stats(samples, best.p);
    fit.mean_abs_rel_error_before = before.mean;
    fit.mean_abs_rel_error_after = after.mean;
    fit.median_abs_rel_error_before = before.median;
    fit.median_abs_rel_error_after = after.median;
    fit.predicted_seconds_before = before.predicted_sum;
    fit.predicted_seconds_after = after.predicted_sum;
    fit.constants.validate();
    return fit;
}

nlohmann::json calibration_to_json(const CalibrationFit& fit, const std::string& gpu, const std::string& source) {
    const StepTimeConstants& k = fit.constants;
    nlohmann::json j = {{"version", kStepTimeModelVersion},
                        {"gpu", gpu},
                        {"source", source},
                        {"mfu_linear", k.mfu_linear},
                        {"bw_efficiency_linear", k.bw_efficiency_linear},
                        {"mfu_attention", k.mfu_attention},
                        {"bw_efficiency_attention", k.bw_efficiency_attention},
                        {"step_overhead_us", k.step_overhead * 1e6},
                        {"per_seq_overhead_us", k.per_seq_overhead * 1e6}};
    if (k.allreduce_latency >= 0) j["allreduce_latency_us"] = k.allreduce_latency * 1e6;
    j["non_torch_mib"] = static_cast<double>(k.non_torch_bytes) / 1048576.0;
    j["fit"] = {{"num_steps", fit.num_steps},
                {"fitted", fit.fitted},
                {"kept", fit.kept},
                {"mean_abs_rel_error_before", fit.mean_abs_rel_error_before},
                {"mean_abs_rel_error_after", fit.mean_abs_rel_error_after},
                {"median_abs_rel_error_before", fit.median_abs_rel_error_before},
                {"median_abs_rel_error_after", fit.median_abs_rel_error_after},
                {"measured_seconds", fit.measured_seconds},
                {"predicted_seconds_before", fit.predicted_seconds_before},
                {"predicted_seconds_after", fit.predicted_seconds_after}};
    return j;
}

}  // namespace kvscope
