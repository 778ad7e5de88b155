// "Did you mean": the closest of a few known names to what the user typed (CLI11 2.1 has no
// such helper). Distance is optimal-string-alignment edit distance, so a swapped pair of
// letters ("rnu" for "run") costs one edit, as a typist would count it.
#pragma once

#include <string>
#include <vector>

namespace loom {

// Insertions, deletions, substitutions and swaps of adjacent characters turning a into b.
int edit_distance(const std::string& a, const std::string& b);

// The candidate a typo of `typed` most likely meant, or "" when none is close: within about one
// edit per three characters, or the only candidate that `typed` (3+ characters) begins.
std::string closest_name(const std::string& typed, const std::vector<std::string>& candidates);

}  // namespace loom
