// Reading a ResultFile's output back on HDF5's plain C API, for test_hdf5_writer.cpp (what is
// written) and test_hdf5_commit.cpp (the commit protocol): an owning handle, attributes,
// datasets and their layout, and result_file_is_complete, the oracle for commit().
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace ssd::hdf5_read_back {

namespace fs = std::filesystem;

struct Id {
  hid_t id;
  herr_t (*close)(hid_t);
  Id(hid_t i, herr_t (*c)(hid_t)) : id(i), close(c) {
    if (id < 0) throw std::runtime_error("HDF5 read-back call failed");
  }
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  ~Id() { close(id); }
};

inline Id open_read(const fs::path& path) {
  return Id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
}

inline Id open_attr(const Id& file, const std::string& obj, const std::string& name) {
  return Id(H5Aopen_by_name(file.id, obj.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT),
            H5Aclose);
}

inline std::string read_string_attr(const Id& file, const std::string& obj,
                                    const std::string& name) {
  Id attr = open_attr(file, obj, name);
  Id type(H5Aget_type(attr.id), H5Tclose);
  EXPECT_EQ(H5Tget_class(type.id), H5T_STRING);
  EXPECT_GT(H5Tis_variable_str(type.id), 0);
  EXPECT_EQ(H5Tget_cset(type.id), H5T_CSET_UTF8);
  Id mem(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(mem.id, H5T_VARIABLE);
  H5Tset_cset(mem.id, H5T_CSET_UTF8);
  char* text = nullptr;
  EXPECT_GE(H5Aread(attr.id, mem.id, &text), 0);
  std::string out = text != nullptr ? text : "<null>";
  H5free_memory(text);
  return out;
}

template <typename T>
std::vector<T> read_attr(const Id& file, const std::string& obj, const std::string& name,
                         hid_t mem_type) {
  Id attr = open_attr(file, obj, name);
  Id space(H5Aget_space(attr.id), H5Sclose);
  std::vector<T> out(static_cast<size_t>(H5Sget_simple_extent_npoints(space.id)));
  if (!out.empty()) {
    EXPECT_GE(H5Aread(attr.id, mem_type, out.data()), 0);
  }
  return out;
}

// The oracle for commit(): true iff `path` is a regular file that opens as HDF5 and its root
// attribute "complete" (written last by commit) is one int64 equal to 1; a missing, unreadable or
// non-HDF5 file is simply not complete. H5F_CLOSE_DEFAULT also opens a file this process is
// writing (a ResultFile's own partial file), whatever close degree the writer chose.
inline bool result_file_is_complete(const fs::path& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // a file that does not open is an answer here
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  try {
    Id fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
    if (H5Pset_fclose_degree(fapl.id, H5F_CLOSE_DEFAULT) < 0) return false;
    Id file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.id), H5Fclose);
    if (H5Aexists(file.id, "complete") <= 0) return false;
    return read_attr<int64_t>(file, "/", "complete", H5T_NATIVE_INT64) == std::vector<int64_t>{1};
  } catch (const std::runtime_error&) {  // Id: an HDF5 call failed
    return false;
  }
}

inline std::vector<hsize_t> dataset_dims(const Id& file, const std::string& path) {
  Id dset(H5Dopen2(file.id, path.c_str(), H5P_DEFAULT), H5Dclose);
  Id space(H5Dget_space(dset.id), H5Sclose);
  std::vector<hsize_t> dims(static_cast<size_t>(H5Sget_simple_extent_ndims(space.id)));
  H5Sget_simple_extent_dims(space.id, dims.data(), nullptr);
  return dims;
}

template <typename T>
std::vector<T> read_dataset(const Id& file, const std::string& path, hid_t mem_type) {
  Id dset(H5Dopen2(file.id, path.c_str(), H5P_DEFAULT), H5Dclose);
  Id space(H5Dget_space(dset.id), H5Sclose);
  std::vector<T> out(static_cast<size_t>(H5Sget_simple_extent_npoints(space.id)));
  if (!out.empty()) {
    EXPECT_GE(H5Dread(dset.id, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0);
  }
  return out;
}

inline H5D_layout_t dataset_layout(const Id& file, const std::string& path, int* filters) {
  Id dset(H5Dopen2(file.id, path.c_str(), H5P_DEFAULT), H5Dclose);
  Id dcpl(H5Dget_create_plist(dset.id), H5Pclose);
  *filters = H5Pget_nfilters(dcpl.id);
  return H5Pget_layout(dcpl.id);
}

}  // namespace ssd::hdf5_read_back
