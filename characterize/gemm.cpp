// GEMM throughput at a model's linear shapes through Backend::matmul, the call the forward pass
// makes: weights uploaded with upload_matrix (in the model's weight format and the backend's
// GEMM layout, as the model loads them), and
// several copies cycled through so each call streams its weights from memory, as in a decode
// step, instead of finding them in cache.
#include <algorithm>
#include <memory>

#include "characterize/parts.h"

namespace ssd {
namespace {

constexpr size_t kMatrixCap = size_t(512) << 20;      // elements of the largest matrix measured
constexpr size_t kRotationBytes = size_t(256) << 20;  // weight copies cycled through per shape
constexpr int kMaxCopies = 256;                       // bounds set-up for tiny shapes

// The weight copies of one shape, released on every path out.
class WeightCopies {
 public:
  WeightCopies(Backend& backend, const std::vector<float>& host, int out_dim, int in, int copies,
               DType storage)
      : backend_(backend) {
    for (int i = 0; i < copies; ++i)
      buffers_.push_back(backend.upload_matrix(host.data(), out_dim, in, storage));
  }
  ~WeightCopies() {
    for (Buffer& b : buffers_) backend_.release(b);
  }
  WeightCopies(const WeightCopies&) = delete;
  WeightCopies& operator=(const WeightCopies&) = delete;
  const Buffer& next() { return buffers_[next_++ % buffers_.size()]; }

 private:
  Backend& backend_;
  std::vector<Buffer> buffers_;
  size_t next_ = 0;
};

}  // namespace

std::vector<LinearShape> linear_shapes(const ModelConfig& c, int tp) {
  const int h = c.hidden_size, L = c.num_hidden_layers;
  const LinearShape all[] = {{"q_proj", h, c.q_dim() / tp, L},
                             {"k/v_proj", h, c.kv_dim() / tp, 2 * L},
                             {"o_proj", c.q_dim() / tp, h, L},
                             {"gate/up_proj", h, c.intermediate_size / tp, 2 * L},
                             {"down_proj", c.intermediate_size / tp, h, L},
                             {"lm_head", h, c.vocab_size, 1}};
  std::vector<LinearShape> shapes;
  for (const LinearShape& s : all) {
    auto same = std::find_if(shapes.begin(), shapes.end(),
                             [&](const LinearShape& o) { return o.in == s.in && o.out == s.out; });
    if (same == shapes.end()) {
      shapes.push_back(s);
    } else {
      same->name += "+" + s.name;
      same->per_token += s.per_token;
    }
  }
  return shapes;
}

std::vector<GemmResult> measure_gemms(Backend& backend, const std::string& model,
                                      const std::vector<LinearShape>& shapes,
                                      const std::vector<GemmRows>& rows, double min_time,
                                      int threads, DType storage) {
  std::vector<GemmResult> table;
  const int elem = int(dtype_size(backend.weight_storage(storage)));
  int max_rows = 1;
  for (const GemmRows& r : rows) max_rows = std::max(max_rows, r.rows);
  for (size_t si = 0; si < shapes.size(); ++si) {
    const LinearShape& s = shapes[si];
    // A matrix over the cap (a 70B LM head in fp32) is measured as a slice of its output rows:
    // per-row cost is what the shape determines.
    int out_dim = s.out;
    if (size_t(s.in) * size_t(s.out) > kMatrixCap)
      out_dim = std::max<int>(24, int(kMatrixCap / size_t(s.in)) / 24 * 24);
    const size_t elements = size_t(s.in) * size_t(out_dim);
    const int copies = int(std::clamp<size_t>(
        (kRotationBytes + elements * elem - 1) / (elements * elem), 1, kMaxCopies));
    WeightCopies weights(backend, random_floats(elements, 100 + si, threads), out_dim, s.in, copies,
                         storage);
    const std::vector<float> x_host = random_floats(size_t(max_rows) * s.in, 200 + si, threads);
    Buffer x = backend.alloc(x_host.size()), out = backend.alloc(size_t(max_rows) * out_dim);
    backend.from_host(x, 0, x_host.data(), x_host.size());
    for (const GemmRows& r : rows) {
      GemmResult g;
      g.model = model;
      g.shape = s.name;
      g.purpose = r.purpose;
      g.in = s.in;
      g.out = out_dim;
      g.full_out = s.out;
      g.rows = r.rows;
      g.per_token = s.per_token;
      g.element_bytes = elem;
      const Timing t = time_calls(
          backend, [&] { backend.matmul(out, x, weights.next(), r.rows, s.in, out_dim); },
          min_time);
      g.seconds = t.mean_s;
      g.gflops = 2.0 * double(r.rows) * double(elements) / t.mean_s / 1e9;
      g.gbps = double(elements) * elem / t.mean_s / 1e9;
      table.push_back(g);
    }
    backend.release(x);
    backend.release(out);
  }
  return table;
}

}  // namespace ssd
