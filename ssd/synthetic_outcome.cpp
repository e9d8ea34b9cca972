#include "ssd/synthetic_outcome.h"

#include <algorithm>
#include <stdexcept>

namespace ssd {

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
