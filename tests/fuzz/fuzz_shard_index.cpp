// A model.safetensors.index.json of arbitrary bytes, next to two valid shards (written once, at
// start-up): the index must open or throw InputError.
#include <filesystem>
#include <vector>

#include "kernels/errors.h"
#include "model/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

namespace {
std::string g_dir;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* tmp = std::getenv("TMPDIR");
  g_dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/ssd-fuzz-index-" + std::to_string(getpid());
  std::filesystem::create_directories(g_dir);
  const std::vector<float> a(12, 0.5f), b(8, -1.0f);
  ssd::write_safetensors(g_dir + "/model-00001-of-00002.safetensors",
                         {{"a.weight", {3, 4}, ssd::DType::F32, a.data()}});
  ssd::write_safetensors(g_dir + "/model-00002-of-00002.safetensors",
                         {{"b.weight", {2, 4}, ssd::DType::BF16, b.data()}});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = g_dir + "/model.safetensors.index.json";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    const ssd::SafetensorsCheckpoint checkpoint = ssd::SafetensorsCheckpoint::open_index(path);
    std::vector<float> out(4);
    for (const std::string& name : checkpoint.names())
      if (checkpoint.info(name).cols() >= 4) checkpoint.read_f32(name, 0, 1, 0, 4, out.data());
  } catch (const ssd::InputError&) {
  }
  return 0;
}
