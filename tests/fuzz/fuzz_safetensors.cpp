// A .safetensors file of arbitrary bytes: opening it must either succeed (every tensor then
// readable) or throw InputError; never crash, hang or read outside the file.
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "kernels/errors.h"
#include "model/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

// SSD_FUZZ_WRITE_SEEDS=DIR: writes small checkpoints of every layout the loader reads (F32 and
// BF16, 1-D to 3-D, several tensors) to DIR and exits: the seed corpus of scripts/fuzz.sh.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = std::getenv("SSD_FUZZ_WRITE_SEEDS");
  if (!dir) return 0;
  const std::vector<float> v(24, 0.25f);
  ssd::write_safetensors(std::string(dir) + "/one.safetensors",
                         {{"w", {4, 6}, ssd::DType::F32, v.data()}});
  ssd::write_safetensors(std::string(dir) + "/mixed.safetensors",
                         {{"model.norm.weight", {8}, ssd::DType::BF16, v.data()},
                          {"model.embed_tokens.weight", {2, 3, 4}, ssd::DType::F32, v.data()},
                          {"lm_head.weight", {3, 8}, ssd::DType::BF16, v.data()}});
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ssd::fuzz::write_input(data, size, ".safetensors");
  try {
    ssd::SafetensorsFile file(path);
    std::vector<float> out;
    for (const std::string& name : file.names()) {
      const ssd::TensorInfo& t = file.info(name);
      // The first row (of the 2-D view), at most 64 columns: touches the data of every tensor.
      const int64_t rows = t.rows(), cols = std::min<int64_t>(t.cols(), 64);
      if (rows < 1 || cols < 1) continue;
      out.resize(size_t(cols));
      file.read_f32(name, 0, 1, 0, cols, out.data());
    }
  } catch (const ssd::InputError&) {
  }
  return 0;
}
