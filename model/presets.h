// Built-in model shapes: the real Hugging Face configurations of the models the benchmark
// talks about (so synthetic weights have exactly their sizes), a CPU-sized target/draft pair,
// and tiny models for tests.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/config.h"

namespace ssd {

// The preset called `name` ("llama-3.1-8b", "tiny-qwen3", ...), or nothing if there is none.
std::optional<ModelConfig> find_preset(const std::string& name);

// Every preset name, in a stable order (largest real models first, test models last).
std::vector<std::string> preset_names();

}  // namespace ssd
