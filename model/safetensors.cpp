#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "kernels/errors.h"

namespace ssd {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and is read in place");

namespace {

using nlohmann::json;

// Slices smaller than this convert faster on one thread than the fork/join costs.
constexpr int64_t kParallelElements = int64_t(1) << 18;
// The safetensors reference implementation refuses headers above 100 MB as well.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// No real dimension comes near this; it keeps element-count products far from overflow.
constexpr int64_t kMaxDimension = int64_t(1) << 40;

DType parse_dtype(const std::string& text, const std::string& where) {
  if (text == "F32") return DType::F32;
  if (text == "BF16") return DType::BF16;
  if (text == "F16") return DType::F16;
  throw InputError(where + "dtype " + text + " is not supported (expected F32, BF16 or F16)");
}

std::vector<int64_t> parse_shape(const json& node, const std::string& where) {
  if (!node.is_array()) throw InputError(where + "shape must be a list of integers");
  std::vector<int64_t> shape;
  int64_t elements = 1;
  for (const json& dim : node) {
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > uint64_t(kMaxDimension)) {
      throw InputError(where + "shape " + node.dump() + " is not a list of sizes");
    }
    shape.push_back(dim.get<int64_t>());
    elements *= shape.back();
    if (elements > kMaxDimension)
      throw InputError(where + "shape " + node.dump() + " is too large");
  }
  return shape;
}

TensorInfo parse_entry(const std::string& name, const json& entry, uint64_t data_size,
                       const std::string& path) {
  const std::string where = path + ": tensor '" + name + "': ";
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
      !entry.contains("data_offsets")) {
    throw InputError(where + "header entry needs dtype, shape and data_offsets");
  }
  if (!entry["dtype"].is_string()) throw InputError(where + "dtype must be a string");
  TensorInfo info;
  info.name = name;
  info.dtype = parse_dtype(entry["dtype"].get<std::string>(), where);
  info.shape = parse_shape(entry["shape"], where);
  const json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned() || offsets[0].get<uint64_t>() > offsets[1].get<uint64_t>()) {
    throw InputError(where + "data_offsets must be [begin, end] with begin <= end, got " +
                     offsets.dump());
  }
  info.data_begin = offsets[0].get<uint64_t>();
  info.data_end = offsets[1].get<uint64_t>();
  if (info.data_end > data_size) {
    throw InputError(where + "data_offsets " + offsets.dump() + " run past the end of the data (" +
                     std::to_string(data_size) + " bytes); the file is truncated or corrupt");
  }
  const uint64_t needed = uint64_t(info.elements()) * dtype_size(info.dtype);
  if (info.data_end - info.data_begin != needed) {
    throw InputError(where + "data_offsets " + offsets.dump() + " hold " +
                     std::to_string(info.data_end - info.data_begin) + " bytes but " +
                     dtype_name(info.dtype) + " " + shape_string(info.shape) + " needs " +
                     std::to_string(needed));
  }
  return info;
}

void convert_row(DType dtype, const uint8_t* src, float* dst, int64_t count) {
  if (dtype == DType::F32) {
    std::memcpy(dst, src, size_t(count) * sizeof(float));
    return;
  }
  float (*const convert)(uint16_t) = dtype == DType::BF16 ? bf16_to_float : f16_to_float;
  for (int64_t i = 0; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);  // memcpy: the data need not be 2-byte aligned
    dst[i] = convert(bits);
  }
}

}  // namespace

int64_t TensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}
int64_t TensorInfo::cols() const {
  return shape.empty() ? 1 : shape.back();
}
int64_t TensorInfo::rows() const {
  const int64_t c = cols();
  return c == 0 ? 0 : elements() / c;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

float f16_to_float(uint16_t bits) {
  const uint32_t sign = uint32_t(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = std::ldexp(float(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000 | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path + ": not a regular file");
  }
  map_size_ = size_t(st.st_size);
  if (map_size_ < 8) {
    ::close(fd);
    throw InputError(path + ": " + std::to_string(map_size_) +
                     " bytes is too short for a safetensors header");
  }
  void* map = ::mmap(nullptr, map_size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file open
  if (map == MAP_FAILED) throw InputError(path + ": cannot mmap: " + std::strerror(errno));
  map_ = static_cast<const uint8_t*>(map);
  try {
    parse_header();
  } catch (...) {
    ::munmap(const_cast<uint8_t*>(map_), map_size_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<uint8_t*>(map_), map_size_);
}

void SafetensorsFile::parse_header() {
  uint64_t header_size;
  std::memcpy(&header_size, map_, 8);
  if (header_size > map_size_ - 8 || header_size > kMaxHeaderBytes) {
    throw InputError(path_ + ": header length " + std::to_string(header_size) +
                     " exceeds the file size (" + std::to_string(map_size_) +
                     " bytes); not a safetensors file or truncated");
  }
  json header;
  try {
    header = json::parse(map_ + 8, map_ + 8 + header_size);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number overflow
    throw InputError(path_ + ": invalid JSON header: " + e.what());
  }
  if (!header.is_object()) throw InputError(path_ + ": header is not a JSON object");
  data_ = map_ + 8 + header_size;
  const uint64_t data_size = map_size_ - 8 - header_size;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    tensors_.emplace(name, parse_entry(name, entry, data_size, path_));
  }
  std::vector<const TensorInfo*> by_offset;
  for (const auto& entry : tensors_) by_offset.push_back(&entry.second);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->data_begin < b->data_begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->data_begin < by_offset[i - 1]->data_end) {
      throw InputError(path_ + ": tensors '" + by_offset[i - 1]->name + "' and '" +
                       by_offset[i]->name + "' overlap in the data section");
    }
  }
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw InputError(path_ + ": has no tensor '" + name + "'");
  return it->second;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<const TensorInfo*> infos;
  for (const auto& entry : tensors_) infos.push_back(&entry.second);
  std::sort(infos.begin(), infos.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->data_begin < b->data_begin; });
  std::vector<std::string> out;
  for (const TensorInfo* info : infos) out.push_back(info->name);
  return out;
}

const TensorInfo& SafetensorsFile::checked_slice(const std::string& name, int64_t row_begin,
                                                 int64_t row_count, int64_t col_begin,
                                                 int64_t col_count) const {
  const TensorInfo& t = info(name);
  const int64_t rows = t.rows(), cols = t.cols();
  if (row_begin < 0 || row_count < 0 || row_begin + row_count > rows || col_begin < 0 ||
      col_count < 0 || col_begin + col_count > cols) {
    throw std::logic_error("safetensors read: slice rows [" + std::to_string(row_begin) + ", +" +
                           std::to_string(row_count) + ") cols [" + std::to_string(col_begin) +
                           ", +" + std::to_string(col_count) + ") is outside " + name + " " +
                           shape_string(t.shape));
  }
  return t;
}

void SafetensorsFile::read_f32(const std::string& name, int64_t row_begin, int64_t row_count,
                               int64_t col_begin, int64_t col_count, float* out) const {
  const TensorInfo& t = checked_slice(name, row_begin, row_count, col_begin, col_count);
  const int64_t cols = t.cols();
  const uint8_t* base = data_ + t.data_begin;
  const size_t element = dtype_size(t.dtype);
#pragma omp parallel for schedule(static) if (row_count * col_count >= kParallelElements)
  for (int64_t r = 0; r < row_count; ++r) {
    const uint8_t* src = base + size_t((row_begin + r) * cols + col_begin) * element;
    convert_row(t.dtype, src, out + r * col_count, col_count);
  }
}

void SafetensorsFile::read_bf16(const std::string& name, int64_t row_begin, int64_t row_count,
                                int64_t col_begin, int64_t col_count, uint16_t* out) const {
  const TensorInfo& t = checked_slice(name, row_begin, row_count, col_begin, col_count);
  if (t.dtype != DType::BF16)
    throw std::logic_error("read_bf16: " + name + " is " + dtype_name(t.dtype) + ", not BF16");
  const int64_t cols = t.cols();
  const uint8_t* base = data_ + t.data_begin;
  for (int64_t r = 0; r < row_count; ++r)
    std::memcpy(out + r * col_count, base + size_t((row_begin + r) * cols + col_begin) * 2,
                size_t(col_count) * sizeof(uint16_t));
}

SafetensorsCheckpoint SafetensorsCheckpoint::open_file(const std::string& path) {
  SafetensorsCheckpoint checkpoint;
  checkpoint.source_ = path;
  checkpoint.files_.push_back(std::make_unique<SafetensorsFile>(path));
  for (const std::string& name : checkpoint.files_[0]->names()) {
    checkpoint.where_[name] = checkpoint.files_[0].get();
  }
  return checkpoint;
}

SafetensorsCheckpoint SafetensorsCheckpoint::open_index(const std::string& index_path) {
  std::ifstream in(index_path);
  if (!in) throw InputError(index_path + ": cannot open");
  json index;
  try {
    index = json::parse(in);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number overflow
    throw InputError(index_path + ": invalid JSON: " + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw InputError(index_path + ": weight_map must be an object {tensor: file}");
  }
  SafetensorsCheckpoint checkpoint;
  checkpoint.source_ = index_path;
  const std::filesystem::path dir = std::filesystem::path(index_path).parent_path();
  std::map<std::string, const SafetensorsFile*> by_file_name;
  for (const auto& [tensor, file_node] : index["weight_map"].items()) {
    if (!file_node.is_string()) {
      throw InputError(index_path + ": weight_map entry for '" + tensor + "' must be a file name");
    }
    const std::string file_name = file_node.get<std::string>();
    auto it = by_file_name.find(file_name);
    if (it == by_file_name.end()) {
      const std::string path = (dir / file_name).string();
      if (!std::filesystem::exists(path)) {
        throw InputError(index_path + ": shard file " + path + " (listed for tensor '" + tensor +
                         "') does not exist");
      }
      checkpoint.files_.push_back(std::make_unique<SafetensorsFile>(path));
      it = by_file_name.emplace(file_name, checkpoint.files_.back().get()).first;
    }
    if (!it->second->has(tensor)) {
      throw InputError(index_path + ": tensor '" + tensor + "' is listed in " + it->second->path() +
                       " but that file does not contain it");
    }
    checkpoint.where_[tensor] = it->second;
  }
  // A tensor the index does not point at would silently never be read; refuse it.
  for (const auto& file : checkpoint.files_) {
    for (const std::string& name : file->names()) {
      auto it = checkpoint.where_.find(name);
      if (it == checkpoint.where_.end() || it->second != file.get()) {
        throw InputError(file->path() + ": tensor '" + name + "' is not mapped to this file by " +
                         index_path);
      }
    }
  }
  return checkpoint;
}

const SafetensorsFile& SafetensorsCheckpoint::file_of(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) throw InputError(source_ + ": has no tensor '" + name + "'");
  return *it->second;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& entry : where_) out.push_back(entry.first);
  return out;
}

}  // namespace ssd
