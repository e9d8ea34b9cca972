#include "tests/test_support.h"

namespace ssd::test {

std::filesystem::path fresh_dir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::path(SSD_BINARY_DIR) / "test-work" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

ForwardSession::ForwardSession(const Model& m, int sequences, int capacity)
    : model(m), cache(create_kv_cache(m, sequences, capacity)) {}

ForwardSession::~ForwardSession() {
  release_activations(acts, *model.backend);
  release_kv_cache(cache, *model.backend);
}

std::vector<float> ForwardSession::run(const ForwardBatch& batch) {
  std::vector<float> logits;
  forward(model, cache, batch, acts, logits);
  return logits;
}

std::vector<float> ForwardSession::append(int s, const std::vector<int32_t>& tokens) {
  ForwardBatch b;
  b.add_causal(s, cache.length[size_t(s)], tokens, ForwardBatch::Logits::Last);
  std::vector<float> logits = run(b);
  cache.length[size_t(s)] += int(tokens.size());
  return logits;
}

}  // namespace ssd::test
