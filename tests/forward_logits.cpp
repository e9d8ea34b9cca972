// forward_logits: the C++ forward pass's logits along a forced token path, for comparison with
// an independent reference (tests/py_test_qwen_forward.py against tests/reference/
// gguf_forward.py). Loads a checkpoint directory as ssd-bench does (weights kept in the
// checkpoint's own dtype, one CPU thread) and, per job, prefills PROMPT, then decodes the
// DECODE tokens one per step, writing float32 logits [1 + n_decode, vocab] as a .npy: row 0
// for the last prompt token, row i after decode token i.
//
//   forward_logits CHECKPOINT OUT.npy PROMPT DECODE [OUT.npy PROMPT DECODE ...]
//
// PROMPT and DECODE are comma-separated token ids (DECODE may be ""). Several jobs share one
// model load, which is most of the run time for a real model. Errors: one line, exit 1.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "model/model.h"
#include "model/weights.h"

namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long value = -1;
    try {
      value = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || value < 0 || value > INT32_MAX)
      throw std::runtime_error("'" + item + "' is not a token id");
    ids.push_back(int32_t(value));
  }
  return ids;
}

void write_npy(const std::string& path, const std::vector<float>& values, size_t rows,
               size_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  // Format 1.0: magic, version, a 2-byte length, then the header padded with spaces and a
  // newline so that the data starts on a 64-byte boundary.
  const size_t preamble = 10;
  header.append(63 - (preamble + header.size()) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t length = uint16_t(header.size());
  out.put(char(length & 0xff)).put(char(length >> 8));
  out << header;
  out.write(reinterpret_cast<const char*>(values.data()),
            std::streamsize(values.size() * sizeof(float)));
  if (!out) throw std::runtime_error(path + ": could not write");
}

struct Job {
  std::string out;
  std::vector<int32_t> prompt, decode;
};

std::vector<float> run_job(const ssd::Model& model, ssd::Backend& backend, const Job& job) {
  const int vocab = model.config.vocab_size;
  for (const std::vector<int32_t>* ids : {&job.prompt, &job.decode})
    for (int32_t t : *ids)
      if (t >= vocab)
        throw std::runtime_error("token " + std::to_string(t) + " outside the vocabulary of " +
                                 std::to_string(vocab));
  ssd::KVCache cache = ssd::create_kv_cache(model, 1, int(job.prompt.size() + job.decode.size()));
  ssd::Activations acts;
  std::vector<float> all, logits;
  ssd::ForwardBatch prefill;
  prefill.add_causal(0, 0, job.prompt, ssd::ForwardBatch::Logits::Last);
  ssd::forward(model, cache, prefill, acts, logits);
  cache.length[0] = int(job.prompt.size());
  all.insert(all.end(), logits.begin(), logits.end());
  for (int32_t token : job.decode) {
    ssd::ForwardBatch step;
    step.add_causal(0, cache.length[0], {token}, ssd::ForwardBatch::Logits::Last);
    ssd::forward(model, cache, step, acts, logits);
    cache.length[0] += 1;
    all.insert(all.end(), logits.begin(), logits.end());
  }
  ssd::release_activations(acts, backend);
  ssd::release_kv_cache(cache, backend);
  return all;
}

int run(int argc, char** argv) {
  if (argc < 5 || (argc - 2) % 3 != 0)
    throw std::runtime_error(
        "usage: forward_logits CHECKPOINT OUT.npy PROMPT DECODE [OUT.npy PROMPT DECODE ...]");
  std::vector<Job> jobs;
  for (int i = 2; i < argc; i += 3) {
    jobs.push_back({argv[i], parse_ids(argv[i + 1]), parse_ids(argv[i + 2])});
    if (jobs.back().prompt.empty()) throw std::runtime_error("an empty prompt");
  }
  std::unique_ptr<ssd::WeightSource> source = ssd::open_weight_source(argv[1], 0);
  ssd::CpuBackend backend(1);
  ssd::Model model = ssd::load_model(*source, backend, {}, nullptr, source->dtype());
  for (const Job& job : jobs) {
    const std::vector<float> logits = run_job(model, backend, job);
    write_npy(job.out, logits, 1 + job.decode.size(), size_t(model.config.vocab_size));
  }
  ssd::release_model(model);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "forward_logits: " << e.what() << "\n";
    return 1;
  }
}
