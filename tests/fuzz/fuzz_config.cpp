// An HF config.json of arbitrary bytes: it parses into a ModelConfig whose derived sizes are
// usable, or throws InputError.
#include <cstdlib>

#include "kernels/errors.h"
#include "model/config.h"
#include "model/presets.h"
#include "tests/fuzz/fuzz_common.h"

// SSD_FUZZ_WRITE_SEEDS=DIR: writes every preset's config.json to DIR and exits (seeds).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = std::getenv("SSD_FUZZ_WRITE_SEEDS");
  if (!dir) return 0;
  for (const std::string& name : ssd::preset_names()) {
    std::FILE* f = std::fopen((std::string(dir) + "/" + name + ".json").c_str(), "w");
    if (!f) std::exit(1);
    const std::string text = ssd::model_config_to_json(*ssd::find_preset(name)).dump(1);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ssd::fuzz::write_input(data, size, "-config.json");
  try {
    const ssd::ModelConfig c = ssd::load_model_config(path);
    // What loading a model computes from a config next: must not trap (UBSan) on what passed.
    (void)c.parameter_count();
    (void)c.q_dim();
    (void)c.kv_dim();
    (void)ssd::rope_inv_freq(c);
    (void)ssd::model_config_to_json(c).dump();
  } catch (const ssd::InputError&) {
  }
  return 0;
}
