#include "ssd/synthetic_outcome.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ssd {

Verdict draw_synthetic_verdict(const OutcomeModel& m, SpeculationSource source, int K,
                               UniformStream& u, int& rank) {
  const bool backup = source == SpeculationSource::Backup;
  const double alpha = backup ? m.alpha_backup : m.alpha;
  Verdict v;
  while (v.accepted < K && u.next() < alpha) ++v.accepted;
  // The same draws in the same order whatever RA is: a run with r_all = r is the one-law run.
  const double r = backup ? m.r_backup : v.accepted == K ? m.r_all : m.r;
  // P(rank >= j) = j^(-r) for j >= 1, so rank = floor(U^(-1/r)) with U uniform on (0, 1].
  const double U = 1.0 - u.next();
  rank = int(std::min(1e9, std::floor(std::pow(U, -1.0 / r))));
  v.bonus = -1;
  return v;
}

int32_t resolve_ranked_bonus(const std::vector<int32_t>& candidates, int32_t excluded, int rank,
                             int vocab, UniformStream& uniforms) {
  if (rank < 1) throw std::invalid_argument("resolve_ranked_bonus: rank must be >= 1");
  int seen = 0;
  for (int32_t t : candidates) {
    if (t == excluded) continue;
    if (++seen == rank) return t;
  }
  if (int(candidates.size()) + 1 >= vocab)
    throw std::runtime_error("resolve_ranked_bonus: the candidate list covers the vocabulary");
  for (;;) {
    const int32_t t = int32_t(uniforms.next() * vocab);
    if (t != excluded && std::find(candidates.begin(), candidates.end(), t) == candidates.end())
      return t;
  }
}

}  // namespace ssd
