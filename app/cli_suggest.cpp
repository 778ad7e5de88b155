#include "app/cli_suggest.h"

#include <algorithm>

namespace loom {

int edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  // d[i][j]: distance between the first i characters of a and the first j of b.
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; i++) d[i][0] = int(i);
  for (size_t j = 0; j <= m; j++) d[0][j] = int(j);
  for (size_t i = 1; i <= n; i++) {
    for (size_t j = 1; j <= m; j++) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::string closest_name(const std::string& typed, const std::vector<std::string>& candidates) {
  if (typed.empty()) return "";
  std::string best;
  int best_d = std::max(1, int(typed.size()) / 3) + 1;  // accept below this
  for (const std::string& c : candidates) {
    const int d = edit_distance(typed, c);
    if (d < best_d) best = c, best_d = d;
  }
  if (!best.empty() || typed.size() < 3) return best;
  // A unique prefix ("--no-prefix" for "--no-prefix-sharing") is far in edits but plain intent.
  std::string only;
  for (const std::string& c : candidates) {
    if (c.compare(0, typed.size(), typed) != 0) continue;
    if (!only.empty()) return "";
    only = c;
  }
  return only;
}

}  // namespace loom
