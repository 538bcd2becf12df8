// "Did you mean ...?": the known name nearest to a misspelt one, by edit distance. Used for unknown
// options and unknown subcommands; CLI11 has no suggestions of its own.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kvscope::command_line {

// Edit distance: insert, delete, substitute, or swap two neighbours, 1 each (optimal string alignment).
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate nearest to `word`, if one is near enough to be a plausible typo: at most a quarter of
// the word's letters (at least 2) and at most half of them differ. Ties go to the candidate closest in
// length, then to the earlier one.
std::optional<std::string> closest_name(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace kvscope::command_line
