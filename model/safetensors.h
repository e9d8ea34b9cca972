// Reading and writing the safetensors format (https://github.com/huggingface/safetensors):
// 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}}, then
// the raw tensor bytes. Files are memory-mapped so that reading one shard's slice of a tensor
// touches only those bytes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace ssd {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t data_begin = 0, data_end = 0;  // byte offsets into the data section
  int64_t elements() const;
  // The row-major 2-D view slices are taken in: the last dimension is the columns, the rest
  // are flattened into rows (a 1-D tensor is one row).
  int64_t rows() const;
  int64_t cols() const;
};

std::string shape_string(const std::vector<int64_t>& shape);  // "[128256, 4096]"

// One memory-mapped .safetensors file. Opening validates the whole header (dtypes, shapes,
// offsets within the file, no overlaps) and throws InputError naming the file and tensor.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;  // InputError when absent
  std::vector<std::string> names() const;                 // in data-offset order
  // Converts rows [row_begin, +row_count) x cols [col_begin, +col_count) of the 2-D view to
  // fp32 into out (row_count * col_count values, row-major). A slice outside the tensor is a
  // caller bug: std::logic_error.
  void read_f32(const std::string& name, int64_t row_begin, int64_t row_count, int64_t col_begin,
                int64_t col_count, float* out) const;
  // The same slice of a BF16 tensor as its stored bits, copied as they are: what a loader that
  // keeps bf16 weights needs, without widening to fp32 and rounding back. A tensor of another
  // dtype, or a slice outside it, is a caller bug: std::logic_error.
  void read_bf16(const std::string& name, int64_t row_begin, int64_t row_count, int64_t col_begin,
                 int64_t col_count, uint16_t* out) const;

 private:
  const TensorInfo& checked_slice(const std::string& name, int64_t row_begin, int64_t row_count,
                                  int64_t col_begin, int64_t col_count) const;
  void parse_header();

  std::string path_;
  const uint8_t* map_ = nullptr;
  size_t map_size_ = 0;
  const uint8_t* data_ = nullptr;  // start of the data section
  std::map<std::string, TensorInfo> tensors_;
};

// All tensors of a checkpoint: one .safetensors file, or the files a
// model.safetensors.index.json ({"weight_map": {tensor: file}}) shards them across.
class SafetensorsCheckpoint {
 public:
  static SafetensorsCheckpoint open_file(const std::string& path);
  static SafetensorsCheckpoint open_index(const std::string& index_path);

  bool has(const std::string& name) const { return where_.count(name) != 0; }
  const SafetensorsFile& file_of(const std::string& name) const;  // InputError when absent
  const TensorInfo& info(const std::string& name) const { return file_of(name).info(name); }
  std::vector<std::string> names() const;  // sorted
  void read_f32(const std::string& name, int64_t row_begin, int64_t row_count, int64_t col_begin,
                int64_t col_count, float* out) const {
    file_of(name).read_f32(name, row_begin, row_count, col_begin, col_count, out);
  }
  void read_bf16(const std::string& name, int64_t row_begin, int64_t row_count, int64_t col_begin,
                 int64_t col_count, uint16_t* out) const {
    file_of(name).read_bf16(name, row_begin, row_count, col_begin, col_count, out);
  }

 private:
  std::string source_;  // the file or index, for error messages
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
};

// The header entry of a tensor about to be written.
struct TensorLayout {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;  // F32 or BF16 (bf16 rounds to nearest even)
};

// Writes a .safetensors file tensor by tensor, so a checkpoint never has to be in memory at
// once: the constructor writes the header for `layout`, then each write() call supplies the
// next tensor's values in layout order, and finish() checks all were given and renames the
// file into place (until then it lives at path + ".partial").
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::string& path, std::vector<TensorLayout> layout);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  void write(const std::string& name, const float* values, size_t count);
  void finish();

 private:
  std::string path_, partial_path_;
  std::vector<TensorLayout> layout_;
  size_t next_ = 0;
  std::FILE* out_ = nullptr;
};

struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  const float* data = nullptr;
};
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors);

float f16_to_float(uint16_t bits);  // bf16 conversions: kernels/dtype.h

}  // namespace ssd
