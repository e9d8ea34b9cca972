#include "harness/prompts.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/errors.h"
#include "ssd/sampling.h"

namespace ssd {

Prompts load_prompts(const std::string& path, int vocab_size) {
  std::ifstream in(path);
  if (!in) throw InputError("--prompts: cannot open " + path);
  Prompts prompts;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "--prompts: " + path + " line " + std::to_string(line_no);
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {  // parse_error, or a number overflow
      throw InputError(where + ": not valid JSON");
    }
    // Text prompts are tokenized ahead of time, never here: ssd-bench holds no tokenizer.
    const bool text_only = doc.is_object() && !doc.contains("ids") &&
                           (doc.contains("text") || doc.contains("messages") ||
                            doc.contains("prompt") || doc.contains("instruction"));
    if (text_only)
      throw InputError(where +
                       ": text without token ids; tokenize it first with analysis/ssd-prompts "
                       "--tokenizer MODEL_DIR IN -o OUT.jsonl");
    if (!doc.is_object() || !doc.contains("ids") || !doc["ids"].is_array())
      throw InputError(where + ": expected an object with an \"ids\" array of token ids");
    std::vector<int32_t> ids;
    for (const auto& v : doc["ids"]) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab_size)
        throw InputError(where + ": token ids must be integers in [0, " +
                         std::to_string(vocab_size) + ")");
      ids.push_back(v.get<int32_t>());
    }
    if (ids.empty()) throw InputError(where + ": empty prompt");
    prompts.push_back(std::move(ids));
  }
  if (prompts.empty()) throw InputError("--prompts: " + path + " holds no prompts");
  return prompts;
}

Prompts random_prompts(const ModelConfig& config, int count, int length, uint64_t seed) {
  Prompts prompts(count);
  // A stream of its own so prompts never correlate with sampling draws of the same seed.
  const uint64_t prompt_stream = 0x70726f6d707473ull;
  uint64_t counter = 0;
  for (int p = 0; p < count; ++p) {
    if (config.bos_token_id >= 0 && config.bos_token_id < config.vocab_size)
      prompts[p].push_back(config.bos_token_id);
    while (int(prompts[p].size()) < length) {
      const int32_t token = int32_t(uniform01(seed, prompt_stream, counter++) * config.vocab_size);
      if (!config.is_eos(token) && token != config.bos_token_id) prompts[p].push_back(token);
    }
  }
  return prompts;
}

}  // namespace ssd
