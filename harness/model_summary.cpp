#include "harness/model_summary.h"

namespace ssd {

double weight_bytes_per_token(const ModelConfig& c, size_t element) {
  const double hidden = c.hidden_size;
  const double per_layer = hidden * (c.q_dim() + 2.0 * c.kv_dim()) + double(c.q_dim()) * hidden +
                           3.0 * hidden * c.intermediate_size;
  return element * (c.num_hidden_layers * per_layer + double(c.vocab_size) * hidden);
}

}  // namespace ssd
