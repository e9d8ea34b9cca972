#include "model/checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "kernels/errors.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace ssd {

namespace {

namespace fs = std::filesystem;

struct Plan {
  std::unique_ptr<WeightSource> source;
  std::vector<TensorSpec> tensors;
  DType dtype = DType::F32;
  fs::path dir;
};

DType parse_checkpoint_dtype(const std::string& dtype) {
  if (dtype == "f32") return DType::F32;
  if (dtype == "bf16") return DType::BF16;
  throw InputError("checkpoint dtype '" + dtype + "' is not supported (expected f32 or bf16)");
}

// Stale weight files would be picked up next to the new ones (an old index wins over a new
// model.safetensors), so overwriting starts from a directory without any.
void remove_previous_checkpoint(const fs::path& dir) {
  static const std::regex weight_file(
      R"(config\.json|model\.safetensors(\.index\.json)?|model-\d+-of-\d+\.safetensors)");
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (std::regex_match(entry.path().filename().string(), weight_file)) fs::remove(entry.path());
  }
}

Plan prepare(const std::string& spec, const std::string& out_dir, uint64_t seed,
             const std::string& dtype, bool overwrite) {
  Plan plan;
  plan.dtype = parse_checkpoint_dtype(dtype);
  const bool has_prefix = spec.rfind("synthetic:", 0) == 0;
  plan.source = open_weight_source(has_prefix ? spec : "synthetic:" + spec, seed);
  const ModelConfig& config = plan.source->config();
  const uint64_t bytes = uint64_t(config.parameter_count()) * dtype_size(plan.dtype);
  if (bytes > kMaxCheckpointBytes) {
    throw InputError(spec + ": " + std::to_string(bytes >> 20) + " MiB of " + dtype +
                     " weights exceeds the " + std::to_string(kMaxCheckpointBytes >> 20) +
                     " MiB limit for generated checkpoints; use synthetic:" + spec +
                     " directly instead");
  }
  plan.dir = out_dir;
  if (fs::exists(plan.dir) && !fs::is_directory(plan.dir)) {
    throw InputError(out_dir + ": exists and is not a directory");
  }
  if (fs::exists(plan.dir / "config.json") && !overwrite) {
    throw InputError(out_dir + ": already holds a checkpoint (config.json); refusing to " +
                     "overwrite it");
  }
  plan.tensors = expected_tensors(config);
  return plan;
}

// Called once every argument has been checked, so a refused request changes nothing on disk.
void prepare_directory(const Plan& plan) {
  fs::create_directories(plan.dir);
  remove_previous_checkpoint(plan.dir);
}

uint64_t tensor_bytes(const TensorSpec& t, DType dtype) {
  uint64_t n = dtype_size(dtype);
  for (int64_t dim : t.shape) n *= uint64_t(dim);
  return n;
}

void write_file(Plan& plan, const std::string& file_name, const std::vector<TensorSpec>& tensors) {
  std::vector<TensorLayout> layout;
  for (const TensorSpec& t : tensors) layout.push_back({t.name, t.shape, plan.dtype});
  SafetensorsWriter writer((plan.dir / file_name).string(), layout);
  for (const TensorSpec& t : tensors) {
    const int64_t cols = t.shape.back();
    const int64_t rows = t.shape.size() == 1 ? 1 : t.shape[0];
    const std::vector<float> values = plan.source->read(t.name, {0, rows, 0, cols});
    writer.write(t.name, values.data(), values.size());
  }
  writer.finish();
}

void write_json(const fs::path& path, const nlohmann::json& doc) {
  std::ofstream out(path);
  out << doc.dump(2) << "\n";
  out.close();
  if (!out) throw std::runtime_error(path.string() + ": write failed");
}

// Written last: a checkpoint directory only looks complete once its weights are in place.
void write_config(const Plan& plan) {
  ModelConfig config = plan.source->config();
  config.torch_dtype = plan.dtype == DType::BF16 ? "bfloat16" : "float32";
  write_json(plan.dir / "config.json", model_config_to_json(config));
}

// Contiguous groups of roughly equal bytes, every file holding at least one tensor.
std::vector<std::vector<TensorSpec>> split_by_size(const std::vector<TensorSpec>& tensors,
                                                   DType dtype, int num_files) {
  uint64_t total = 0;
  for (const TensorSpec& t : tensors) total += tensor_bytes(t, dtype);
  std::vector<std::vector<TensorSpec>> files(static_cast<size_t>(num_files));
  const size_t count = tensors.size(), last = files.size() - 1;
  size_t file = 0;
  uint64_t placed = 0;
  for (size_t i = 0; i < count; ++i) {
    const bool full = placed >= (file + 1) * total / files.size();
    const bool must_move_on = count - i == last - file;  // one tensor left per remaining file
    if (file < last && !files[file].empty() && (full || must_move_on)) ++file;
    files[file].push_back(tensors[i]);
    placed += tensor_bytes(tensors[i], dtype);
  }
  return files;
}

std::string shard_name(int index, int count) {
  char name[64];
  std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", index, count);
  return name;
}

}  // namespace

void make_checkpoint(const std::string& spec, const std::string& out_dir, uint64_t seed,
                     const std::string& dtype, bool overwrite) {
  Plan plan = prepare(spec, out_dir, seed, dtype, overwrite);
  prepare_directory(plan);
  write_file(plan, "model.safetensors", plan.tensors);
  write_config(plan);
}

void make_sharded_checkpoint(const std::string& spec, const std::string& out_dir, uint64_t seed,
                             const std::string& dtype, int num_files, bool overwrite) {
  Plan plan = prepare(spec, out_dir, seed, dtype, overwrite);
  if (num_files < 1 || size_t(num_files) > plan.tensors.size()) {
    throw InputError("cannot shard " + std::to_string(plan.tensors.size()) + " tensors into " +
                     std::to_string(num_files) + " files");
  }
  prepare_directory(plan);
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total = 0;
  const std::vector<std::vector<TensorSpec>> files =
      split_by_size(plan.tensors, plan.dtype, num_files);
  for (int i = 0; i < num_files; ++i) {
    const std::string name = shard_name(i + 1, num_files);
    write_file(plan, name, files[size_t(i)]);
    for (const TensorSpec& t : files[size_t(i)]) {
      weight_map[t.name] = name;
      total += tensor_bytes(t, plan.dtype);
    }
  }
  write_json(plan.dir / "model.safetensors.index.json",
             {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}});
  write_config(plan);
}

}  // namespace ssd
