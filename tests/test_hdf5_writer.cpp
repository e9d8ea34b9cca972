// What a ResultFile writes, read back on HDF5's C API (tests/hdf5_read_back.h) and by h5py:
// attributes, datasets and columns of every type, the layout and compression of large datasets,
// and no HDF5 handle left open. The commit protocol (partial file, rename, abandoned, killed
// and signalled writers, overwrite, bad directories): test_hdf5_commit.cpp.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/hdf5_writer.h"
#include "tests/hdf5_read_back.h"
#include "tests/test_support.h"

namespace ssd {
namespace {

namespace fs = std::filesystem;
using hdf5_read_back::dataset_dims;
using hdf5_read_back::dataset_layout;
using hdf5_read_back::Id;
using hdf5_read_back::open_read;
using hdf5_read_back::read_attr;
using hdf5_read_back::read_dataset;
using hdf5_read_back::read_string_attr;
using hdf5_read_back::result_file_is_complete;

TEST(Hdf5Writer, AttributesOfEveryType) {
  const fs::path path = test::fresh_dir("hdf5_attrs") / "out.h5";
  ResultFile out = ResultFile::create(path, false);
  out.set_attr("/", "model", std::string("llama-3.1-8b \xce\xbb"));  // UTF-8 lambda
  out.set_attr("/", "mode", "sd");
  out.set_attr("/summary", "tokens_per_s", 1234.5);
  out.set_attr("/summary", "rounds", int64_t{-42});
  out.set_attr("/summary", "ranks", 8);                // int -> int64
  out.set_attr("/summary", "bytes", size_t{1} << 40);  // size_t -> int64
  out.set_attr("/summary", "latency_ms", std::vector<double>{1.5, 2.5, -3.0});
  out.set_attr("/summary", "histogram", std::vector<int64_t>{0, 7, 1LL << 50});
  out.set_attr("/summary", "none", std::vector<double>{});
  out.set_attr("/deep/er/group", "k", int64_t{5});
  out.set_attr("/summary", "rounds", int64_t{43});  // replaces
  EXPECT_THROW(out.set_attr("/", "big", uint64_t{1} << 63), std::out_of_range);
  EXPECT_THROW(out.set_attr("/", "complete", int64_t{1}), std::logic_error);  // commit() only
  EXPECT_THROW(out.set_dataset_attr("/", "complete", "1"), std::logic_error);
  out.set_attr("/summary", "complete", int64_t{0});  // the name is reserved on the root only
  out.commit();

  Id file = open_read(path);
  EXPECT_EQ(read_string_attr(file, "/", "model"), "llama-3.1-8b \xce\xbb");
  EXPECT_EQ(read_string_attr(file, "/", "mode"), "sd");
  EXPECT_EQ(read_attr<double>(file, "/summary", "tokens_per_s", H5T_NATIVE_DOUBLE),
            std::vector<double>{1234.5});
  EXPECT_EQ(read_attr<int64_t>(file, "/summary", "rounds", H5T_NATIVE_INT64),
            std::vector<int64_t>{43});
  EXPECT_EQ(read_attr<int64_t>(file, "/summary", "ranks", H5T_NATIVE_INT64),
            std::vector<int64_t>{8});
  EXPECT_EQ(read_attr<int64_t>(file, "/summary", "bytes", H5T_NATIVE_INT64),
            std::vector<int64_t>{int64_t{1} << 40});
  EXPECT_EQ(read_attr<double>(file, "/summary", "latency_ms", H5T_NATIVE_DOUBLE),
            (std::vector<double>{1.5, 2.5, -3.0}));
  EXPECT_EQ(read_attr<int64_t>(file, "/summary", "histogram", H5T_NATIVE_INT64),
            (std::vector<int64_t>{0, 7, 1LL << 50}));
  EXPECT_TRUE(read_attr<double>(file, "/summary", "none", H5T_NATIVE_DOUBLE).empty());
  EXPECT_EQ(read_attr<int64_t>(file, "/deep/er/group", "k", H5T_NATIVE_INT64),
            std::vector<int64_t>{5});
  EXPECT_EQ(read_attr<int64_t>(file, "/", "complete", H5T_NATIVE_INT64), std::vector<int64_t>{1});
  EXPECT_EQ(H5Aexists(file.id, "big"), 0);
}

TEST(Hdf5Writer, DatasetsOfEveryType) {
  const fs::path path = test::fresh_dir("hdf5_datasets") / "out.h5";
  std::vector<int32_t> i32(12);
  std::iota(i32.begin(), i32.end(), -5);
  const std::vector<int64_t> i64 = {1LL << 40, -1, 3};
  const std::vector<float> f32 = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f, 7.5f};
  const std::vector<uint8_t> u8 = {0, 1, 255};
  std::vector<double> big(100000);  // 800 KB: chunked + gzip
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<double>(i % 1000) * 0.25;
  const double scalar = 2.75;
  {
    ResultFile out = ResultFile::create(path, false);
    out.write_dataset("/d/i32", {3, 4}, i32.data());
    out.write_dataset("/d/i64", {3}, i64.data());
    out.write_dataset("/d/f32", {2, 2, 2}, f32.data());
    out.write_dataset("/d/u8", {3}, u8.data());
    out.write_dataset("/d/big", {250, 400}, big.data());
    out.write_dataset("/d/empty", {0}, static_cast<const double*>(nullptr));
    out.write_dataset("/d/empty2d", {0, 5}, static_cast<const int32_t*>(nullptr));
    out.write_dataset("/d/scalar", {}, &scalar);
    EXPECT_THROW(out.write_dataset("/d/u8", {3}, u8.data()), std::runtime_error);
    EXPECT_THROW(out.write_dataset("/d/null", {2}, static_cast<const double*>(nullptr)),
                 std::invalid_argument);
    out.commit();
  }
  Id file = open_read(path);
  EXPECT_EQ(dataset_dims(file, "/d/i32"), (std::vector<hsize_t>{3, 4}));
  EXPECT_EQ(read_dataset<int32_t>(file, "/d/i32", H5T_NATIVE_INT32), i32);
  EXPECT_EQ(read_dataset<int64_t>(file, "/d/i64", H5T_NATIVE_INT64), i64);
  EXPECT_EQ(dataset_dims(file, "/d/f32"), (std::vector<hsize_t>{2, 2, 2}));
  EXPECT_EQ(read_dataset<float>(file, "/d/f32", H5T_NATIVE_FLOAT), f32);
  EXPECT_EQ(read_dataset<uint8_t>(file, "/d/u8", H5T_NATIVE_UINT8), u8);
  EXPECT_EQ(dataset_dims(file, "/d/big"), (std::vector<hsize_t>{250, 400}));
  EXPECT_EQ(read_dataset<double>(file, "/d/big", H5T_NATIVE_DOUBLE), big);
  EXPECT_EQ(dataset_dims(file, "/d/empty"), std::vector<hsize_t>{0});
  EXPECT_EQ(dataset_dims(file, "/d/empty2d"), (std::vector<hsize_t>{0, 5}));
  EXPECT_TRUE(dataset_dims(file, "/d/scalar").empty());
  EXPECT_EQ(read_dataset<double>(file, "/d/scalar", H5T_NATIVE_DOUBLE), std::vector<double>{2.75});
  int filters = 0;
  EXPECT_EQ(dataset_layout(file, "/d/big", &filters), H5D_CHUNKED);
  EXPECT_EQ(filters, 2);  // shuffle + deflate
  EXPECT_EQ(dataset_layout(file, "/d/i32", &filters), H5D_CONTIGUOUS);
  EXPECT_EQ(filters, 0);
  EXPECT_LT(fs::file_size(path), 400000u);  // the repetitive big dataset compressed
  Id dset(H5Dopen2(file.id, "/d/i32", H5P_DEFAULT), H5Dclose);
  Id type(H5Dget_type(dset.id), H5Tclose);
  EXPECT_GT(H5Tequal(type.id, H5T_STD_I32LE), 0);
}

TEST(Hdf5Writer, ColumnsInNestedGroupsAndDatasetAttrs) {
  const fs::path path = test::fresh_dir("hdf5_columns") / "out.h5";
  ResultFile out = ResultFile::create(path, false);
  out.write_column("/rounds/sd/accepted", std::vector<int32_t>{3, 0, 5});
  out.write_column("/rounds/sd/round", std::vector<int64_t>{0, 1, 2});
  out.write_column("/rounds/sd/draft_ms", std::vector<double>{1.25, 1.5, 1.75});
  out.write_column("/rounds/sd/verify_ms", std::vector<float>{4.f, 5.f, 6.f});
  out.write_column("/rounds/sd/eos", std::vector<uint8_t>{0, 0, 1});
  out.write_column("/rounds/ar/none", std::vector<double>{});
  out.set_dataset_attr("/rounds/sd/draft_ms", "units", "ms");
  EXPECT_THROW(out.set_dataset_attr("/rounds/sd/missing", "units", "ms"), std::runtime_error);
  try {  // a group path running through a dataset
    out.write_column("/rounds/sd/accepted/x", std::vector<int32_t>{1});
    ADD_FAILURE() << "expected a throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/rounds/sd/accepted"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(out.partial_path()), std::string::npos) << e.what();
  }
  out.commit();

  Id file = open_read(path);
  EXPECT_EQ(read_dataset<int32_t>(file, "/rounds/sd/accepted", H5T_NATIVE_INT32),
            (std::vector<int32_t>{3, 0, 5}));
  EXPECT_EQ(read_dataset<int64_t>(file, "/rounds/sd/round", H5T_NATIVE_INT64),
            (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(read_dataset<double>(file, "/rounds/sd/draft_ms", H5T_NATIVE_DOUBLE),
            (std::vector<double>{1.25, 1.5, 1.75}));
  EXPECT_EQ(read_dataset<float>(file, "/rounds/sd/verify_ms", H5T_NATIVE_FLOAT),
            (std::vector<float>{4.f, 5.f, 6.f}));
  EXPECT_EQ(read_dataset<uint8_t>(file, "/rounds/sd/eos", H5T_NATIVE_UINT8),
            (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_EQ(dataset_dims(file, "/rounds/ar/none"), std::vector<hsize_t>{0});
  EXPECT_EQ(read_string_attr(file, "/rounds/sd/draft_ms", "units"), "ms");
}

TEST(Hdf5Writer, NoHandleLeaks) {
  const fs::path path = test::fresh_dir("hdf5_leaks") / "out.h5";
  auto count = [](H5I_type_t type) {
    hsize_t n = 0;
    H5Inmembers(type, &n);
    return n;
  };
  const H5I_type_t types[] = {H5I_GROUP,   H5I_DATATYPE, H5I_DATASPACE,
                              H5I_DATASET, H5I_ATTR,     H5I_GENPROP_LST};
  std::vector<hsize_t> before;
  for (H5I_type_t t : types) before.push_back(count(t));
  {
    ResultFile out = ResultFile::create(path, false);
    out.set_attr("/a", "s", "x");
    out.set_attr("/a", "s", "y");
    out.set_attr("/a", "v", std::vector<double>{1.0});
    std::vector<double> big(20000, 1.0);
    out.write_column("/a/b/big", big);
    out.set_dataset_attr("/a/b/big", "units", "1");
    EXPECT_THROW(out.write_column("/a/b/big", big), std::runtime_error);
    EXPECT_EQ(H5Fget_obj_count(static_cast<hid_t>(H5F_OBJ_ALL), H5F_OBJ_ALL), 1);
    out.commit();
  }
  EXPECT_EQ(H5Fget_obj_count(static_cast<hid_t>(H5F_OBJ_ALL), H5F_OBJ_ALL), 0);
  EXPECT_TRUE(result_file_is_complete(path));
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(count(types[i]), before[i]) << i;
}

TEST(Hdf5Writer, H5pyReadsStringsAndArrays) {
  if (std::system("/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 has no h5py";
  }
  const fs::path dir = test::fresh_dir("hdf5_h5py");
  const fs::path path = dir / "out.h5";
  const std::vector<int32_t> grid = {1, -2, 3, 4, 5, -6};
  ResultFile out = ResultFile::create(path, false);
  out.set_attr("/meta", "model", "llama \xce\xbb");
  out.set_attr("/meta", "ranks", int64_t{4});
  out.write_dataset("/grid", {2, 3}, grid.data());
  out.write_column("/t/z", std::vector<double>{1.0});
  out.write_column("/t/a", std::vector<double>{2.0});
  out.commit();
  std::ofstream(dir / "check.py") << R"(import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    m = f["/meta"].attrs["model"]
    assert isinstance(m, str) and m == "llama \u03bb", repr(m)
    assert int(f["/meta"].attrs["ranks"]) == 4
    g = f["/grid"][()]
    assert g.dtype == np.int32 and g.shape == (2, 3), (g.dtype, g.shape)
    assert g.tolist() == [[1, -2, 3], [4, 5, -6]], g.tolist()
    assert int(f.attrs["complete"]) == 1
    assert list(f["/t"].keys()) == ["z", "a"], list(f["/t"].keys())
)";
  const std::string cmd = "/usr/bin/python3 " + (dir / "check.py").string() + " " + path.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace ssd
