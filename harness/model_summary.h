// A loaded model as the outputs describe it: the console header, the result row and the HDF5
// file's /models groups all read it, so it lives apart from any one of them.
#pragma once

#include <cstddef>
#include <string>

#include "kernels/dtype.h"
#include "model/config.h"

namespace ssd {

struct ModelSummary {
  std::string spec;         // as given on the command line
  std::string description;  // the weight source's own description
  ModelConfig config;
  size_t weight_bytes = 0;  // held by this rank
  double load_s = 0.0;
  DType weight_dtype = DType::F32;  // how the matrices are stored
  std::string compute = "f32";      // what the GEMMs multiply them in (Backend::compute_for)
};

// Bytes of weights a decode step of the whole model reads (every linear layer and the LM head;
// the embedding is a row lookup unless it is the tied head) at `element` bytes per value.
double weight_bytes_per_token(const ModelConfig& c, size_t element);

}  // namespace ssd
