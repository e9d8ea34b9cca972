// The write half of model/safetensors.h.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "kernels/errors.h"
#include "model/safetensors.h"

namespace ssd {

namespace {

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

// The header, padded with spaces so the data section starts 8-byte aligned (what the
// reference implementation does, and what lets readers map F32 data in place).
std::string header_text(const std::vector<TensorLayout>& layout) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const TensorLayout& t : layout) {
    if (t.dtype != DType::F32 && t.dtype != DType::BF16) {
      throw std::logic_error("SafetensorsWriter: " + t.name + ": only F32 and BF16 are written");
    }
    const uint64_t bytes = uint64_t(element_count(t.shape)) * dtype_size(t.dtype);
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<TensorLayout> layout)
    : path_(path), partial_path_(path + ".partial"), layout_(std::move(layout)) {
  const std::string header = header_text(layout_);
  out_ = std::fopen(partial_path_.c_str(), "wb");
  if (!out_) throw InputError(partial_path_ + ": cannot create: " + std::strerror(errno));
  const uint64_t header_size = header.size();
  if (std::fwrite(&header_size, 8, 1, out_) != 1 ||
      std::fwrite(header.data(), 1, header.size(), out_) != header.size()) {
    std::fclose(out_);  // the destructor does not run for a throwing constructor
    std::remove(partial_path_.c_str());
    throw std::runtime_error(partial_path_ + ": write failed: " + std::strerror(errno));
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (out_) {  // abandoned before finish(): leave no half-written file behind
    std::fclose(out_);
    std::remove(partial_path_.c_str());
  }
}

void SafetensorsWriter::write(const std::string& name, const float* values, size_t count) {
  if (next_ >= layout_.size() || layout_[next_].name != name) {
    throw std::logic_error("SafetensorsWriter: got " + name + " out of layout order");
  }
  const TensorLayout& t = layout_[next_];
  if (count != size_t(element_count(t.shape))) {
    throw std::logic_error("SafetensorsWriter: " + name + " needs " +
                           std::to_string(element_count(t.shape)) + " values, got " +
                           std::to_string(count));
  }
  bool ok = true;
  if (t.dtype == DType::F32) {
    ok = std::fwrite(values, sizeof(float), count, out_) == count;
  } else {
    // Converted in chunks so a large tensor never needs a second full-size copy.
    constexpr size_t kChunk = 1 << 16;
    std::vector<uint16_t> chunk(std::min(count, kChunk));
    for (size_t begin = 0; ok && begin < count; begin += kChunk) {
      const size_t n = std::min(kChunk, count - begin);
      for (size_t i = 0; i < n; ++i) chunk[i] = float_to_bf16(values[begin + i]);
      ok = std::fwrite(chunk.data(), 2, n, out_) == n;
    }
  }
  if (!ok) throw std::runtime_error(partial_path_ + ": write failed: " + std::strerror(errno));
  ++next_;
}

void SafetensorsWriter::finish() {
  if (next_ != layout_.size()) {
    throw std::logic_error("SafetensorsWriter: finish() before " + layout_[next_].name +
                           " was written");
  }
  const bool flushed = std::fflush(out_) == 0;
  const bool closed = std::fclose(out_) == 0;
  out_ = nullptr;
  if (!flushed || !closed) {
    std::remove(partial_path_.c_str());
    throw std::runtime_error(partial_path_ + ": write failed: " + std::strerror(errno));
  }
  std::error_code error;
  std::filesystem::rename(partial_path_, path_, error);
  if (error) throw std::runtime_error(path_ + ": cannot rename into place: " + error.message());
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  std::vector<TensorLayout> layout;
  for (const TensorToWrite& t : tensors) layout.push_back({t.name, t.shape, t.dtype});
  SafetensorsWriter writer(path, layout);
  for (const TensorToWrite& t : tensors) {
    writer.write(t.name, t.data, size_t(element_count(t.shape)));
  }
  writer.finish();
}

}  // namespace ssd
