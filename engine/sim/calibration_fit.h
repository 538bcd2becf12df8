// Fits the step-time model's constants (efficiency factors and overheads) to measured engine steps:
// a bench timeline (`--save-timeline`) records each step's work (StepWorkSummary) and its measured
// duration, and the fit finds the constants that predict those durations best: least squares on the
// relative error, reweighted (IRLS) toward the least absolute relative error so that steps which other
// processes stretched do not pull the constants. The result is a calibration file the sim backend reads (`--sim-calibration`,
// docs/DESIGN.md section 9). Pure; any thread.
#pragma once

#include "metrics/step_stats.h"
#include "sim/step_time_model.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kvscope {

struct MeasuredStep {
    StepWorkSummary work;
    double duration = 0;  // seconds
};

// The steps a fit needs at least; fewer are refused.
inline constexpr int kMinCalibrationSteps = 16;

struct CalibrationFit {
    // Fitted where the steps determine them; the others keep their starting values.
    StepTimeConstants constants;
    std::vector<std::string> fitted;  // the constants the fit set (calibration file names)
    std::vector<std::string> kept;    // "name: why" for those these steps cannot determine
    int num_steps = 0;                // steps used (those that computed something)
    // Over those steps: mean and median |predicted - measured| / measured, with the starting and the
    // fitted constants.
    double mean_abs_rel_error_before = 0, mean_abs_rel_error_after = 0;
    double median_abs_rel_error_before = 0, median_abs_rel_error_after = 0;
    double measured_seconds = 0, predicted_seconds_before = 0, predicted_seconds_after = 0;  // sums
};

// Predicts every step with `model` (whose constants are the starting values), fits, and returns the
// constants. Throws BadInput when there are fewer than kMinCalibrationSteps steps that computed
// something, or when the steps do not vary enough to determine more than a constant per-step time.
CalibrationFit fit_calibration(const StepTimeModel& model, const std::vector<MeasuredStep>& steps);

// The calibration file (docs/DESIGN.md section 9's format): version, gpu, source, the constants, and a
// "fit" object (steps, errors before and after, which constants were fitted or kept), which
// read_calibration accepts and ignores.
nlohmann::json calibration_to_json(const CalibrationFit& fit, const std::string& gpu, const std::string& source);

}  // namespace kvscope
