#include "harness/hdf5_writer.h"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "harness/stop_signals.h"
#include "kernels/errors.h"

namespace ssd {
namespace {

namespace fs = std::filesystem;
static_assert(std::is_same_v<hid_t, int64_t>, "the header stores hid_t as int64_t");

constexpr uint64_t kChunkThresholdBytes = 64 * 1024;  // larger datasets are chunked + gzipped
constexpr uint64_t kChunkTargetBytes = 256 * 1024;
constexpr unsigned kGzipLevel = 4;
constexpr const char* kCompleteAttr = "complete";  // root attribute only commit() writes

void check_not_reserved(const std::string& where, const std::string& name) {
  if (where == "/" && name == kCompleteAttr) {
    throw std::logic_error("ResultFile: only commit() writes the root attribute complete");
  }
}

// Owns one HDF5 id and closes it with the matching H5?close.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, -1)), closer_(other.closer_) {}
  Handle& operator=(Handle&& other) noexcept {  // our old id is closed by other's destructor
    std::swap(id_, other.id_);
    std::swap(closer_, other.closer_);
    return *this;
  }
  ~Handle() {
    if (id_ >= 0) closer_(id_);
  }
  hid_t get() const { return id_; }
  hid_t release() { return std::exchange(id_, -1); }

 private:
  hid_t id_;
  Closer closer_;
};

// Throws with the most specific message on HDF5's error stack (e.g. the errno text).
[[noreturn]] void fail(const std::string& what, const std::string& file) {
  std::string detail;
  auto walk = [](unsigned n, const H5E_error2_t* err, void* out) -> herr_t {
    if (n == 0 && err->desc != nullptr) *static_cast<std::string*>(out) = err->desc;
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk, &detail);
  H5Eclear2(H5E_DEFAULT);
  throw std::runtime_error("HDF5: " + what + " in " + file + (detail.empty() ? "" : ": " + detail));
}

hid_t check(hid_t id, const std::string& what, const std::string& file) {
  if (id < 0) fail(what, file);
  return id;
}

Handle make(hid_t id, Handle::Closer closer, const std::string& what, const std::string& file) {
  return Handle(check(id, what, file), closer);
}

// "/a//b/c" -> {"a", "b", "c"}; "/" and "" -> {}.
std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::istringstream in(path);
  for (std::string part; std::getline(in, part, '/');) {
    if (part == "." || part == "..") {
      throw std::invalid_argument("ResultFile: '.' and '..' are not allowed in '" + path + "'");
    }
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

std::string join_path(const std::vector<std::string>& parts, size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) out += "/" + parts[i];
  return out.empty() ? "/" : out;
}

// A group (or file) creation plist that keeps links in creation order, as h5py then lists them.
Handle ordered_plist(hid_t cls, const std::string& file_name) {
  Handle plist = make(H5Pcreate(cls), H5Pclose, "H5Pcreate", file_name);
  check(H5Pset_link_creation_order(plist.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
        "cannot set link creation order", file_name);
  return plist;
}

// Opens the group made of the first `count` parts, creating missing groups on the way.
Handle open_group(hid_t file, const std::vector<std::string>& parts, size_t count,
                  const std::string& file_name) {
  Handle group = make(H5Gopen2(file, "/", H5P_DEFAULT), H5Gclose, "cannot open /", file_name);
  for (size_t i = 0; i < count; ++i) {
    const std::string where = join_path(parts, i + 1);
    htri_t exists = H5Lexists(group.get(), parts[i].c_str(), H5P_DEFAULT);
    if (exists < 0) fail("cannot look up " + where, file_name);
    if (exists > 0) {
      group = make(H5Gopen2(group.get(), parts[i].c_str(), H5P_DEFAULT), H5Gclose,
                   "cannot open group " + where, file_name);
    } else {
      Handle gcpl = ordered_plist(H5P_GROUP_CREATE, file_name);
      group = make(H5Gcreate2(group.get(), parts[i].c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT),
                   H5Gclose, "cannot create group " + where, file_name);
    }
  }
  return group;
}

// Dataspace for dims (rank 0: scalar); also returns the element count.
Handle make_space(const std::vector<uint64_t>& dims, uint64_t* count, const std::string& what,
                  const std::string& file_name) {
  uint64_t n = 1;
  for (uint64_t d : dims) {
    if (__builtin_mul_overflow(n, d, &n)) throw std::invalid_argument(what + ": dims overflow");
  }
  *count = n;
  if (dims.empty()) return make(H5Screate(H5S_SCALAR), H5Sclose, "H5Screate", file_name);
  std::vector<hsize_t> hdims(dims.begin(), dims.end());
  return make(H5Screate_simple(static_cast<int>(hdims.size()), hdims.data(), nullptr), H5Sclose,
              what + ": cannot create dataspace", file_name);
}

// Trailing dims kept whole while they fit kChunkTargetBytes; the next one is cut, leading 1.
std::vector<hsize_t> chunk_dims(const std::vector<uint64_t>& dims, uint64_t elem_size) {
  std::vector<hsize_t> chunk(dims.begin(), dims.end());
  uint64_t inner = elem_size;
  for (size_t i = dims.size(); i-- > 0;) {
    if (inner * dims[i] <= kChunkTargetBytes) {
      inner *= dims[i];
      continue;
    }
    chunk[i] = std::max<uint64_t>(1, kChunkTargetBytes / inner);
    for (size_t j = 0; j < i; ++j) chunk[j] = 1;
    break;
  }
  return chunk;
}

Handle utf8_string_type(const std::string& file_name) {
  Handle type = make(H5Tcopy(H5T_C_S1), H5Tclose, "H5Tcopy", file_name);
  check(H5Tset_size(type.get(), H5T_VARIABLE), "H5Tset_size", file_name);
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "H5Tset_cset", file_name);
  return type;
}

// Creates (replacing any old one) and writes attribute `name` on object `obj`.
void write_attr_on(hid_t obj, const std::string& where, const std::string& name, hid_t file_type,
                   hid_t mem_type, const std::vector<uint64_t>& dims, const void* data,
                   const std::string& file_name) {
  const std::string what = "attribute " + name + " on " + where;
  htri_t exists = H5Aexists(obj, name.c_str());
  if (exists < 0) fail("cannot look up " + what, file_name);
  if (exists > 0) check(H5Adelete(obj, name.c_str()), "cannot replace " + what, file_name);
  uint64_t count = 0;
  Handle space = make_space(dims, &count, what, file_name);
  Handle attr =
      make(H5Acreate2(obj, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
           H5Aclose, "cannot create " + what, file_name);
  if (count > 0) check(H5Awrite(attr.get(), mem_type, data), "cannot write " + what, file_name);
}

Handle file_access_plist(H5F_close_degree_t degree, const std::string& file_name) {
  Handle fapl = make(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, "H5Pcreate", file_name);
  check(H5Pset_fclose_degree(fapl.get(), degree), "H5Pset_fclose_degree", file_name);
#if H5_VERSION_GE(1, 12, 1) || (H5_VERSION_GE(1, 10, 7) && !H5_VERSION_GE(1, 11, 0))
  // Keep locking, but work on file systems without it (some Lustre/NFS mounts).
  check(H5Pset_file_locking(fapl.get(), true, true), "H5Pset_file_locking", file_name);
#endif
  return fapl;
}

void fsync_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) throw std::runtime_error("cannot fsync " + path + ": " + std::strerror(err));
}

}  // namespace

ResultFile ResultFile::create(const std::string& path, bool overwrite) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  if (path.empty()) throw InputError("empty output file name");
  const fs::path final_path(path);
  std::string dir = final_path.parent_path().string();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError("cannot write " + path + ": directory " + dir +
                     (fs::exists(dir, ec) ? " is not a directory" : " does not exist"));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    throw InputError("cannot write " + path + ": directory " + dir + " is not writable");
  }
  const fs::file_status file_status = fs::status(final_path, ec);
  if (fs::is_directory(file_status)) throw InputError(path + " is a directory, not a file");
  if (fs::exists(file_status) && !overwrite) {
    throw InputError(path + " exists; pass --overwrite to replace it");
  }

  std::string partial = path + ".partial." + std::to_string(::getpid());
  Handle fcpl = ordered_plist(H5P_FILE_CREATE, partial);
  Handle fapl = file_access_plist(H5F_CLOSE_STRONG, partial);
  Handle file = make(H5Fcreate(partial.c_str(), H5F_ACC_TRUNC, fcpl.get(), fapl.get()), H5Fclose,
                     "cannot create file", partial);
  return ResultFile(path, std::move(partial), overwrite, file.release());
}

ResultFile::ResultFile(std::string final_path, std::string partial_path, bool overwrite,
                       int64_t file)
    : final_path_(std::move(final_path)),
      partial_path_(std::move(partial_path)),
      overwrite_(overwrite),
      file_(file) {
  set_partial_file_for_signals(partial_path_);  // a SIGTERM now removes it (stop_signals.h)
}

ResultFile& ResultFile::operator=(ResultFile&& other) noexcept {
  if (this != &other) {
    release();
    take(other);
  }
  return *this;
}

void ResultFile::take(ResultFile& other) noexcept {
  final_path_ = std::exchange(other.final_path_, {});
  partial_path_ = std::exchange(other.partial_path_, {});
  overwrite_ = other.overwrite_;
  committed_ = other.committed_;
  keep_partial_ = other.keep_partial_;
  file_ = std::exchange(other.file_, -1);
}

void ResultFile::release() noexcept {
  if (file_ >= 0) H5Fclose(file_);
  file_ = -1;
  if (!partial_path_.empty()) set_partial_file_for_signals("");
  if (!committed_ && !keep_partial_ && !partial_path_.empty()) std::remove(partial_path_.c_str());
  partial_path_.clear();
}

void ResultFile::check_writable() const {
  if (committed_) throw std::logic_error("ResultFile: " + final_path_ + " is already committed");
  if (file_ < 0) throw std::logic_error("ResultFile: no open file (moved from or failed commit)");
}

void ResultFile::write_attr(const std::string& group, const std::string& name, int64_t file_type,
                            int64_t mem_type, const std::vector<uint64_t>& dims, const void* data,
                            bool reserved_ok) {
  check_writable();
  std::vector<std::string> parts = split_path(group);
  if (!reserved_ok) check_not_reserved(join_path(parts, parts.size()), name);
  Handle obj = open_group(file_, parts, parts.size(), partial_path_);
  write_attr_on(obj.get(), join_path(parts, parts.size()), name, file_type, mem_type, dims, data,
                partial_path_);
}

void ResultFile::set_attr(const std::string& group, const std::string& name,
                          const std::string& value) {
  check_writable();
  Handle type = utf8_string_type(partial_path_);
  const char* text = value.c_str();
  write_attr(group, name, type.get(), type.get(), {}, &text);
}

void ResultFile::set_attr(const std::string& group, const std::string& name, const char* value) {
  if (value == nullptr) throw std::invalid_argument("ResultFile: null string for " + name);
  set_attr(group, name, std::string(value));
}

// Numeric attributes: scalar and 1-D overloads per element type.
#define SSD_ATTR_WRITERS(T, FILE_TYPE, MEM_TYPE)                                          \
  void ResultFile::set_attr(const std::string& group, const std::string& name, T value) { \
    write_attr(group, name, FILE_TYPE, MEM_TYPE, {}, &value);                             \
  }                                                                                       \
  void ResultFile::set_attr(const std::string& group, const std::string& name,            \
                            const std::vector<T>& values) {                               \
    write_attr(group, name, FILE_TYPE, MEM_TYPE, {values.size()}, values.data());         \
  }
SSD_ATTR_WRITERS(double, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE)
SSD_ATTR_WRITERS(int64_t, H5T_STD_I64LE, H5T_NATIVE_INT64)
#undef SSD_ATTR_WRITERS

void ResultFile::write_dataset_impl(const std::string& path, const std::vector<uint64_t>& dims,
                                    int64_t file_type, int64_t mem_type, size_t elem_size,
                                    const void* data) {
  check_writable();
  std::vector<std::string> parts = split_path(path);
  if (parts.empty()) throw std::invalid_argument("ResultFile: empty dataset path '" + path + "'");
  const std::string where = join_path(parts, parts.size());
  uint64_t count = 0;
  Handle space = make_space(dims, &count, "dataset " + where, partial_path_);
  if (count > 0 && data == nullptr) {
    throw std::invalid_argument("ResultFile: null data for dataset " + where);
  }
  Handle parent = open_group(file_, parts, parts.size() - 1, partial_path_);
  htri_t exists = H5Lexists(parent.get(), parts.back().c_str(), H5P_DEFAULT);
  if (exists < 0) fail("cannot look up " + where, partial_path_);
  if (exists > 0)
    throw std::runtime_error("HDF5: " + where + " already exists in " + partial_path_);

  Handle dcpl = make(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, "H5Pcreate", partial_path_);
  uint64_t bytes = 0;
  if (!dims.empty() && !__builtin_mul_overflow(count, elem_size, &bytes) &&
      bytes > kChunkThresholdBytes) {
    std::vector<hsize_t> chunk = chunk_dims(dims, elem_size);
    check(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()),
          "cannot set chunking for " + where, partial_path_);
    check(H5Pset_shuffle(dcpl.get()), "cannot set shuffle for " + where, partial_path_);
    check(H5Pset_deflate(dcpl.get(), kGzipLevel), "cannot set gzip for " + where, partial_path_);
  }
  Handle dset = make(H5Dcreate2(parent.get(), parts.back().c_str(), file_type, space.get(),
                                H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                     H5Dclose, "cannot create dataset " + where, partial_path_);
  if (count > 0) {
    check(H5Dwrite(dset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
          "cannot write dataset " + where, partial_path_);
  }
}

// The typed overloads: element type, HDF5 file type, HDF5 memory type.
#define SSD_TYPED_WRITERS(T, FILE_TYPE, MEM_TYPE)                                            \
  void ResultFile::write_dataset(const std::string& path, const std::vector<uint64_t>& dims, \
                                 const T* data) {                                            \
    write_dataset_impl(path, dims, FILE_TYPE, MEM_TYPE, sizeof(T), data);                    \
  }                                                                                          \
  void ResultFile::write_column(const std::string& path, const std::vector<T>& values) {     \
    write_dataset(path, {values.size()}, values.data());                                     \
  }
SSD_TYPED_WRITERS(int32_t, H5T_STD_I32LE, H5T_NATIVE_INT32)
SSD_TYPED_WRITERS(int64_t, H5T_STD_I64LE, H5T_NATIVE_INT64)
SSD_TYPED_WRITERS(double, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE)
SSD_TYPED_WRITERS(float, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT)
SSD_TYPED_WRITERS(uint8_t, H5T_STD_U8LE, H5T_NATIVE_UINT8)
#undef SSD_TYPED_WRITERS

void ResultFile::set_dataset_attr(const std::string& dataset_path, const std::string& name,
                                  const std::string& value) {
  check_writable();
  const std::vector<std::string> parts = split_path(dataset_path);
  const std::string where = join_path(parts, parts.size());
  check_not_reserved(where, name);
  Handle obj = make(H5Oopen(file_, where.c_str(), H5P_DEFAULT), H5Oclose, "cannot open " + where,
                    partial_path_);
  Handle type = utf8_string_type(partial_path_);
  const char* text = value.c_str();
  write_attr_on(obj.get(), where, name, type.get(), type.get(), {}, &text, partial_path_);
}

void ResultFile::commit() {
  check_writable();
  const int64_t one = 1;  // last, so only a finished file carries it
  write_attr("/", kCompleteAttr, H5T_STD_I64LE, H5T_NATIVE_INT64, {}, &one, true);
  check(H5Fflush(file_, H5F_SCOPE_GLOBAL), "cannot flush file", partial_path_);
  herr_t closed = H5Fclose(std::exchange(file_, -1));
  if (closed < 0) fail("cannot close file", partial_path_);
  fsync_file(partial_path_);
  std::error_code ec;
  if (!overwrite_ && fs::exists(final_path_, ec)) {
    keep_partial_ = true;
    set_partial_file_for_signals("");  // kept on purpose: the error message names it
    throw InputError(final_path_ + " appeared while this run was writing; results kept in " +
                     partial_path_ + "; pass --overwrite to replace it");
  }
  if (std::rename(partial_path_.c_str(), final_path_.c_str()) != 0) {
    throw std::runtime_error("cannot rename " + partial_path_ + " to " + final_path_ + ": " +
                             std::strerror(errno));
  }
  committed_ = true;
  set_partial_file_for_signals("");
}

}  // namespace ssd
