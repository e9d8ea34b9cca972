// perturb:SIGMA drafts: the target's weights with seeded multiplicative Gaussian noise. A
// calibration device, not a real draft model: SIGMA moves the draft's distribution away from
// the target's smoothly, so it sets the acceptance rate (SIGMA = 0 accepts everything) while
// the draft keeps the target's exact shapes and cost.
#include <map>

#include "model/counter_rng.h"
#include "model/weights.h"

namespace ssd {
namespace {

class PerturbedSource : public WeightSource {
 public:
  PerturbedSource(std::unique_ptr<WeightSource> base, double sigma, uint64_t seed)
      : base_(std::move(base)), sigma_(sigma), seed_(seed) {
    for (const TensorSpec& t : expected_tensors(base_->config())) cols_[t.name] = t.shape.back();
  }

  std::string describe() const override {
    return "perturb:" + std::to_string(sigma_) + " of " + base_->describe() +
           " noise-seed=" + std::to_string(seed_);
  }
  const ModelConfig& config() const override { return base_->config(); }
  DType dtype() const override { return base_->dtype(); }

  // w' = w * (1 + sigma * z), z standard normal per element: relative noise, so every tensor
  // (norm weights included) is perturbed in proportion to its own scale.
  void read_into(const std::string& name, const Slice& s, std::vector<float>& values) override {
    base_->read_into(name, s, values);
    const int64_t cols = cols_.at(name);
    const uint64_t key = tensor_key(seed_ ^ 0x7065727475726200ULL, name);
    for (int64_t r = 0; r < s.row_count; ++r) {
      const uint64_t first = uint64_t((s.row_begin + r) * cols + s.col_begin);
      for (int64_t c = 0; c < s.col_count; ++c)
        values[size_t(r * s.col_count + c)] *=
            1.0f + float(sigma_) * counter_normal(key, first + uint64_t(c));
    }
  }

 private:
  std::unique_ptr<WeightSource> base_;
  double sigma_;
  uint64_t seed_;
  std::map<std::string, int64_t> cols_;
};

}  // namespace

std::unique_ptr<WeightSource> perturb_weight_source(std::unique_ptr<WeightSource> base,
                                                    double sigma, uint64_t seed) {
  return std::make_unique<PerturbedSource>(std::move(base), sigma, seed);
}

}  // namespace ssd
