// A prompts JSONL of arbitrary bytes: prompts of valid token ids, or InputError.
#include "harness/prompts.h"
#include "kernels/errors.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ssd::fuzz::write_input(data, size, "-prompts.jsonl");
  try {
    const ssd::Prompts prompts = ssd::load_prompts(path, 1000);
    for (const auto& p : prompts)
      for (int32_t t : p)
        if (t < 0 || t >= 1000) std::abort();  // a token id the vocabulary does not have
  } catch (const ssd::InputError&) {
  }
  return 0;
}
