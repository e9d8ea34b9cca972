// Prompts: read from a JSONL file ({"ids": [...]} per line) or drawn at random.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace ssd {

using Prompts = std::vector<std::vector<int32_t>>;

// Throws InputError naming the file and line for unreadable files, bad JSON, a missing "ids"
// array, an empty prompt or a token outside [0, vocab_size).
Prompts load_prompts(const std::string& path, int vocab_size);

// `count` prompts of `length` tokens: BOS (when the model has one) then uniform token ids
// that are not end-of-sequence tokens. A pure function of the seed.
Prompts random_prompts(const ModelConfig& config, int count, int length, uint64_t seed);

}  // namespace ssd
