// One HDF5 result file, written safely: everything goes to "<path>.partial.<pid>", and only
// commit() writes the root attribute complete = 1 and renames the file to <path>. A process
// killed mid-run therefore never leaves a file that looks complete under the final name.
//
// Serial HDF5 (libhdf5 C API), used by rank 0 only and from one thread. Every HDF5 failure is
// thrown as std::runtime_error naming what failed and the file; HDF5's own error printing is
// switched off. Object paths are slash-separated ("/summary", "rounds/sd"; "/" or "" is the
// root); the groups along them are created on demand.
#pragma once

#include <concepts>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ssd {
namespace detail {
template <typename T>
concept OtherInteger = std::integral<T> && !std::same_as<T, bool> && !std::same_as<T, int64_t>;
}  // namespace detail

class ResultFile {
 public:
  // Creates path + ".partial.<pid>" for writing. Throws ssd::InputError when `path` exists and
  // !overwrite ("FILE exists; pass --overwrite to replace it"), when `path` is a directory, and
  // when its directory is missing or not writable. With overwrite, the old file stays in place
  // until commit() replaces it.
  static ResultFile create(const std::string& path, bool overwrite);

  ResultFile(ResultFile&& other) noexcept { take(other); }
  ResultFile& operator=(ResultFile&& other) noexcept;
  ResultFile(const ResultFile&) = delete;
  ResultFile& operator=(const ResultFile&) = delete;
  // Not committed: closes and deletes the partial file.
  ~ResultFile() { release(); }

  // Scalar and 1-D attributes on a group (created on demand). Setting an existing attribute
  // replaces it. Strings are variable-length UTF-8 (h5py reads them as str); they end at the
  // first NUL.
  void set_attr(const std::string& group, const std::string& name, const std::string& value);
  void set_attr(const std::string& group, const std::string& name, const char* value);
  void set_attr(const std::string& group, const std::string& name, double value);
  void set_attr(const std::string& group, const std::string& name, int64_t value);
  void set_attr(const std::string& group, const std::string& name,
                const std::vector<double>& values);
  void set_attr(const std::string& group, const std::string& name,
                const std::vector<int64_t>& values);
  // Any other integer (int, size_t, ...) is stored as int64; std::out_of_range if it does not
  // fit. bool is deliberately not accepted.
  template <detail::OtherInteger T>
  void set_attr(const std::string& group, const std::string& name, T value) {
    if constexpr (std::unsigned_integral<T> && sizeof(T) >= sizeof(int64_t)) {
      if (value > static_cast<T>(INT64_MAX)) {
        throw std::out_of_range("ResultFile: attribute " + name + " on " + group +
                                " does not fit in int64");
      }
    }
    set_attr(group, name, static_cast<int64_t>(value));
  }

  // N-d dataset (dims row-major, data holds their product; rank 0 is a scalar). Zero-sized dims
  // are allowed (data may then be null). Datasets over 64 KiB are chunked and compressed
  // (shuffle + gzip level 4). Writing a path that already exists throws.
  void write_dataset(const std::string& path, const std::vector<uint64_t>& dims,
                     const int32_t* data);
  void write_dataset(const std::string& path, const std::vector<uint64_t>& dims,
                     const int64_t* data);
  void write_dataset(const std::string& path, const std::vector<uint64_t>& dims,
                     const double* data);
  void write_dataset(const std::string& path, const std::vector<uint64_t>& dims, const float* data);
  void write_dataset(const std::string& path, const std::vector<uint64_t>& dims,
                     const uint8_t* data);

  // 1-D columns. A "table" is a group of equal-length columns, e.g. /rounds/sd/accepted and
  // /rounds/sd/draft_ms, which h5py/numpy read as arrays.
  void write_column(const std::string& path, const std::vector<int32_t>& values);
  void write_column(const std::string& path, const std::vector<int64_t>& values);
  void write_column(const std::string& path, const std::vector<double>& values);
  void write_column(const std::string& path, const std::vector<float>& values);
  void write_column(const std::string& path, const std::vector<uint8_t>& values);

  // A string attribute on an existing dataset (or group), e.g. units.
  void set_dataset_attr(const std::string& dataset_path, const std::string& name,
                        const std::string& value);

  // Writes root attribute complete = int64 1 (last), flushes, closes, fsyncs and renames the
  // partial file to final_path() (the directory itself is not fsynced). Afterwards every write
  // throws std::logic_error. If the final file appeared meanwhile and overwrite was not given,
  // throws InputError and keeps the partial file.
  void commit();

  const std::string& final_path() const { return final_path_; }
  const std::string& partial_path() const { return partial_path_; }
  bool committed() const { return committed_; }

 private:
  ResultFile(std::string final_path, std::string partial_path, bool overwrite, int64_t file);
  void check_writable() const;
  // HDF5 ids (hid_t) are int64_t; <hdf5.h> stays out of this header.
  void write_attr(const std::string& group, const std::string& name, int64_t file_type,
                  int64_t mem_type, const std::vector<uint64_t>& dims, const void* data,
                  bool reserved_ok = false);
  void write_dataset_impl(const std::string& path, const std::vector<uint64_t>& dims,
                          int64_t file_type, int64_t mem_type, size_t elem_size, const void* data);
  void release() noexcept;
  void take(ResultFile& other) noexcept;

  std::string final_path_;
  std::string partial_path_;
  bool overwrite_ = false;
  bool committed_ = false;
  bool keep_partial_ = false;
  int64_t file_ = -1;  // hid_t of the open partial file; -1 once closed or moved from
};

// One table of records as columns of `group`: column(name, getter) writes getter(record) of
// every record as /group/name, the column's type being the getter's.
template <typename Record>
struct RecordColumns {
  ResultFile& file;
  std::string group;
  const std::vector<Record>& records;
  template <typename Get>
  void column(const std::string& name, Get get) {
    std::vector<decltype(get(records.front()))> values;
    for (const Record& r : records) values.push_back(get(r));
    file.write_column(group + "/" + name, values);
  }
};

}  // namespace ssd
