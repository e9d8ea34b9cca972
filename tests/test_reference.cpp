// The C++ forward pass against tests/reference/reference.py, an independent numpy implementation
// that reads the same checkpoint files itself: prefill of an 11-token prompt, then 16 one-token
// decode steps, for every tiny preset (GQA, llama3 RoPE scaling, Qwen3 q/k norm, tied and
// untied heads), bf16 and sharded checkpoints, and checkpoints with non-trivial norm weights; and
// under --compute bf16 (every linear layer's input rounded to bf16), against the reference run with
// the same rounding and against the exact one, with a tolerance the rounding itself sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "model/weights.h"
#include "tests/test_support.h"

namespace ssd {
namespace {

namespace fs = std::filesystem;

const char* const kPython = "/usr/bin/python3";
const std::vector<int32_t> kPrompt = {1, 5, 7, 42, 199, 3, 88, 250, 17, 64, 128};
const std::vector<int32_t> kDecode = {9,  4,   211, 33, 0,   255, 76, 76,
                                      12, 140, 2,   97, 180, 61,  8,  230};

std::string join(const std::vector<int32_t>& tokens) {
  std::string out;
  for (int32_t t : tokens) {
    if (!out.empty()) out += ',';
    out += std::to_string(t);
  }
  return out;
}

// Prefill + one-token decodes through the C++ forward pass: [1 + decode, vocab] logits.
std::vector<float> run_cpp(const std::string& checkpoint, int& vocab, CpuCompute compute) {
  std::unique_ptr<WeightSource> source = open_weight_source(checkpoint, 0);
  CpuBackend backend(1, GemmKind::Invariant, compute);
  // bf16 compute multiplies bf16 weights; f32 compute widens a bf16 checkpoint (exactly) to fp32.
  Model model = load_model(*source, backend, {}, nullptr,
                           compute == CpuCompute::F32 ? DType::F32 : DType::BF16);
  vocab = model.config.vocab_size;
  KVCache cache = create_kv_cache(model, 1, int(kPrompt.size() + kDecode.size()));
  Activations acts;
  std::vector<float> all, logits;
  ForwardBatch prefill;
  prefill.add_causal(0, 0, kPrompt, ForwardBatch::Logits::Last);
  forward(model, cache, prefill, acts, logits);
  cache.length[0] = int(kPrompt.size());
  all.insert(all.end(), logits.begin(), logits.end());
  for (int32_t token : kDecode) {
    ForwardBatch step;
    step.add_causal(0, cache.length[0], {token}, ForwardBatch::Logits::Last);
    forward(model, cache, step, acts, logits);
    cache.length[0] += 1;
    all.insert(all.end(), logits.begin(), logits.end());
  }
  release_activations(acts, backend);
  release_kv_cache(cache, backend);
  release_model(model);
  return all;
}

// A little-endian float32 2-D .npy as written by numpy.save (format version 1 or 2).
std::vector<float> load_npy(const fs::path& path, int64_t& rows, int64_t& cols) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    throw std::runtime_error(path.string() + ": not a .npy file");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    header_at = 10;
  } else {
    for (int i = 3; i >= 0; --i)
      header_len = header_len << 8 | static_cast<unsigned char>(bytes[8 + i]);
    header_at = 12;
  }
  const std::string header = bytes.substr(header_at, header_len);
  std::smatch m;
  if (header.find("'descr': '<f4'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos ||
      !std::regex_search(header, m, std::regex(R"('shape': \((\d+), (\d+)\))")))
    throw std::runtime_error(path.string() + ": unexpected header " + header);
  rows = std::stoll(m[1]);
  cols = std::stoll(m[2]);
  const size_t data_at = header_at + header_len;
  if (bytes.size() - data_at != size_t(rows * cols) * sizeof(float))
    throw std::runtime_error(path.string() + ": data size does not match the shape");
  std::vector<float> out(size_t(rows * cols));
  std::memcpy(out.data(), bytes.data() + data_at, out.size() * sizeof(float));
  return out;
}

// linear_inputs: "f32" (exact) or "bf16" (every linear layer's input rows rounded to bf16).
std::vector<float> run_reference(const fs::path& checkpoint, const fs::path& work, int64_t& rows,
                                 int64_t& cols, const std::string& linear_inputs = "f32") {
  const fs::path out = work / ("reference_logits_" + linear_inputs + ".npy");
  const std::string command =
      std::string(kPython) + " " SSD_SOURCE_DIR "/tests/reference/reference.py --checkpoint '" +
      checkpoint.string() + "' --prompt " + join(kPrompt) + " --decode " + join(kDecode) +
      " --out '" + out.string() + "' --linear-inputs " + linear_inputs;
  const int rc = std::system(command.c_str());
  if (rc != 0)
    throw std::runtime_error("reference.py failed (" + std::to_string(rc) + "): " + command);
  return load_npy(out, rows, cols);
}

// Gives every norm weight (input/post-attention/final norms, Qwen3 q/k norms) of an f32
// checkpoint distinct values around 1, so that the comparison also covers how the norm weights
// are applied (synthetic checkpoints store exactly 1).
void perturb_norm_weights(const fs::path& file) {
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  uint64_t header_len = 0;
  io.read(reinterpret_cast<char*>(&header_len), 8);
  std::string header(header_len, '\0');
  io.read(header.data(), std::streamsize(header_len));
  const nlohmann::json doc = nlohmann::json::parse(header);
  int tensor = 0;
  for (const auto& [name, info] : doc.items()) {
    if (name == "__metadata__" || name.find("norm.weight") == std::string::npos) continue;
    ASSERT_EQ(info.at("dtype"), "F32") << name;
    const uint64_t begin = info.at("data_offsets")[0], end = info.at("data_offsets")[1];
    std::vector<float> values((end - begin) / sizeof(float));
    ++tensor;
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = 1.0f + 0.5f * std::sin(0.37f * float(i) + 1.3f * float(tensor));
    io.seekp(std::streamoff(8 + header_len + begin));
    io.write(reinterpret_cast<const char*>(values.data()), std::streamsize(end - begin));
  }
  ASSERT_GT(tensor, 0);
  ASSERT_TRUE(io.good());
}

struct Case {
  std::string name;
  std::string preset;
  std::string dtype = "f32";
  int shards = 0;  // 0: a single model.safetensors
  bool perturb_norms = false;
  CpuCompute compute = CpuCompute::F32;
};

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(double(a[i]) - double(b[i])));
  return d;
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class ReferenceTest : public ::testing::TestWithParam<Case> {};

TEST(ReferenceEnvironment, PythonHasNumpy) {
  // Not a skip: scripts/install-deps.sh installs numpy for Debian's python3.
  const std::string command = std::string(kPython) + " -c 'import numpy' > /dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0)
      << kPython << " cannot import numpy; run scripts/install-deps.sh";
}

TEST_P(ReferenceTest, LogitsMatchNumpyReference) {
  const Case& c = GetParam();
  if (c.compute == CpuCompute::BF16 && !cpu_has_bf16_dot())
    GTEST_SKIP() << "no AVX512_BF16 on this CPU or in this build";
  if (c.compute == CpuCompute::Amx && !cpu_has_amx_bf16())
    GTEST_SKIP() << "no AMX-BF16 tiles on this CPU, in this build or from this OS";
  const fs::path dir = test::fresh_dir("reference_" + c.name);
  const fs::path checkpoint = dir / "checkpoint";
  const uint64_t seed = 11;
  if (c.shards > 0)
    make_sharded_checkpoint(c.preset, checkpoint.string(), seed, c.dtype, c.shards);
  else
    make_checkpoint(c.preset, checkpoint.string(), seed, c.dtype);
  if (c.shards > 0) {
    ASSERT_TRUE(fs::exists(checkpoint / "model.safetensors.index.json"));
  }
  if (c.perturb_norms) {
    ASSERT_EQ(c.shards, 0);
    ASSERT_NO_FATAL_FAILURE(perturb_norm_weights(checkpoint / "model.safetensors"));
  }

  int vocab = 0;
  const std::vector<float> ours = run_cpp(checkpoint.string(), vocab, c.compute);
  {
    std::ofstream raw(dir / "cpp_logits.f32", std::ios::binary);
    raw.write(reinterpret_cast<const char*>(ours.data()), std::streamsize(ours.size() * 4));
  }
  int64_t rows = 0, cols = 0;
  const std::vector<float> ref = run_reference(checkpoint, dir, rows, cols);
  const int64_t expected_rows = int64_t(1 + kDecode.size());
  ASSERT_EQ(rows, expected_rows);
  ASSERT_EQ(cols, vocab);
  ASSERT_EQ(ours.size(), ref.size());

  double max_diff = 0, max_abs = 0;
  int64_t worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_TRUE(std::isfinite(ours[i])) << "logit " << i;
    const double d = std::fabs(double(ours[i]) - double(ref[i]));
    if (d > max_diff) {
      max_diff = d;
      worst = int64_t(i);
    }
    max_abs = std::max(max_abs, std::fabs(double(ref[i])));
  }
  std::printf("[ reference ] %-28s max |logit diff| = %.3g (max |logit| %.2f)\n", c.name.c_str(),
              max_diff, max_abs);
  // f32 compute: fp32 summation against float64. bf16 compute: every linear layer's input is
  // rounded to bf16 (relative error up to 2^-9 per element), which moves the logits by however
  // much the model amplifies that; the reference measures it itself, running the same model with
  // the same rounding in float64 (--linear-inputs bf16), and ours may be up to twice that far
  // from the exact logits, plus the f32 tolerance.
  double tolerance = 1e-3;
  if (c.compute != CpuCompute::F32) {  // bf16 and amx: the same rounding of the inputs
    int64_t rounded_rows = 0, rounded_cols = 0;
    const std::vector<float> rounded =
        run_reference(checkpoint, dir, rounded_rows, rounded_cols, "bf16");
    ASSERT_EQ(rounded.size(), ours.size());
    const double rounding = max_abs_diff(rounded, ref);
    tolerance += 2 * rounding;
    // Mostly the same roundings as the reference's: ours is nearer the rounded reference than
    // the exact one (an activation whose fp32 and float64 values round to different bf16
    // neighbours moves a step's logits by a few 1e-2; most steps have none).
    double to_rounded = 0, to_exact = 0;
    for (size_t i = 0; i < ours.size(); ++i) {
      to_rounded += std::fabs(double(ours[i]) - double(rounded[i]));
      to_exact += std::fabs(double(ours[i]) - double(ref[i]));
    }
    std::printf(
        "[ reference ] %-28s bf16 inputs move the reference by %.3g; mean |diff| to it "
        "%.3g, to exact %.3g\n",
        c.name.c_str(), rounding, to_rounded / double(ours.size()), to_exact / double(ours.size()));
    EXPECT_GT(rounding, 1e-3) << "the reference's rounding of the inputs changed nothing";
    EXPECT_LT(to_rounded, 0.5 * to_exact) << "ours does not round the inputs as the GEMM should";
  }
  EXPECT_LT(max_diff, tolerance) << "worst at step " << worst / vocab << " token " << worst % vocab;
  // The logits must not be degenerate, or the comparison would prove little.
  EXPECT_GT(max_abs, 1.0);
  // Each step's argmax agrees (where the top two are not within the tolerance).
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = ours.data() + r * vocab;
    const float* b = ref.data() + r * vocab;
    const int64_t am = std::max_element(a, a + vocab) - a, bm = std::max_element(b, b + vocab) - b;
    if (am != bm) {
      EXPECT_LT(std::fabs(b[am] - b[bm]), tolerance) << "step " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Presets, ReferenceTest,
    ::testing::Values(
        Case{"tiny_llama", "tiny-llama"}, Case{"tiny_llama_tied", "tiny-llama-tied"},
        Case{"tiny_qwen3", "tiny-qwen3"}, Case{"tiny_qwen3_untied", "tiny-qwen3-untied"},
        Case{"tiny_llama_other", "tiny-llama-other"}, Case{"tiny_llama_bf16", "tiny-llama", "bf16"},
        Case{"tiny_qwen3_bf16", "tiny-qwen3", "bf16"},
        Case{"tiny_qwen3_sharded", "tiny-qwen3-untied", "f32", 3},
        Case{"tiny_llama_sharded_bf16", "tiny-llama", "bf16", 4},
        Case{"tiny_llama_norms", "tiny-llama", "f32", 0, true},
        Case{"tiny_qwen3_norms", "tiny-qwen3", "f32", 0, true}, Case{"tiny_qwen2", "tiny-qwen2"},
        Case{"tiny_qwen2_bf16", "tiny-qwen2", "bf16"},
        Case{"tiny_qwen2_sharded", "tiny-qwen2", "f32", 3},
        Case{"tiny_llama_bf16_compute", "tiny-llama", "bf16", 0, false, CpuCompute::BF16},
        Case{"tiny_llama_tied_bf16_compute", "tiny-llama-tied", "bf16", 0, false, CpuCompute::BF16},
        Case{"tiny_qwen3_bf16_compute", "tiny-qwen3", "bf16", 0, false, CpuCompute::BF16},
        Case{"tiny_qwen2_bf16_compute", "tiny-qwen2", "bf16", 0, false, CpuCompute::BF16},
        Case{"tiny_llama_amx_compute", "tiny-llama", "bf16", 0, false, CpuCompute::Amx},
        Case{"tiny_llama_tied_amx_compute", "tiny-llama-tied", "bf16", 0, false, CpuCompute::Amx},
        Case{"tiny_qwen3_amx_compute", "tiny-qwen3", "bf16", 0, false, CpuCompute::Amx},
        Case{"tiny_qwen2_amx_compute", "tiny-qwen2", "bf16", 0, false, CpuCompute::Amx}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace ssd
