// Helpers shared by the GoogleTest programs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model/model.h"

namespace ssd::test {

// A fresh, empty directory under the build tree, removed at process exit is not guaranteed:
// tests name it after themselves so reruns start clean.
std::filesystem::path fresh_dir(const std::string& name);

// One KV cache and its activations over a loaded model, released with it: forward passes
// against that cache.
struct ForwardSession {
  const Model& model;
  KVCache cache;
  Activations acts;
  ForwardSession(const Model& m, int sequences, int capacity);
  ~ForwardSession();
  ForwardSession(const ForwardSession&) = delete;
  ForwardSession& operator=(const ForwardSession&) = delete;
  std::vector<float> run(const ForwardBatch& batch);
  // Appends tokens to sequence s causally, commits them and returns the last token's logits.
  std::vector<float> append(int s, const std::vector<int32_t>& tokens);
};

}  // namespace ssd::test
