// The ResultFile's commit protocol: everything goes to PATH.partial.PID, and only commit() marks
// it complete and renames it to PATH. A writer abandoned, killed or stopped by SIGTERM leaves no
// PATH; a PATH that appears before commit is kept; an existing PATH needs overwrite; a bad
// directory is an InputError; nothing is written after commit; and the oracle
// result_file_is_complete (tests/hdf5_read_back.h) itself. What is written: test_hdf5_writer.cpp.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/hdf5_writer.h"
#include "harness/stop_signals.h"
#include "kernels/errors.h"
#include "tests/hdf5_read_back.h"
#include "tests/test_support.h"

namespace ssd {
namespace {

namespace fs = std::filesystem;
using hdf5_read_back::Id;
using hdf5_read_back::result_file_is_complete;

TEST(Hdf5Writer, DestructorWithoutCommitLeavesNoFile) {
  const fs::path dir = test::fresh_dir("hdf5_abandon");
  const fs::path path = dir / "out.h5";
  {
    ResultFile out = ResultFile::create(path, false);
    out.set_attr("/", "x", 1.0);
    EXPECT_EQ(out.final_path(), path.string());
    EXPECT_EQ(out.partial_path(), path.string() + ".partial." + std::to_string(getpid()));
    EXPECT_TRUE(fs::exists(out.partial_path()));
    EXPECT_FALSE(fs::exists(path));
    out.write_column("/g/c", std::vector<double>{1.0});
    EXPECT_FALSE(result_file_is_complete(out.partial_path()));
    out.set_attr("/g", "still_writable", 1.0);
    ResultFile moved = std::move(out);  // the moved-from object must not delete anything
    EXPECT_THROW(out.set_attr("/", "y", 1.0), std::logic_error);
    EXPECT_TRUE(fs::exists(moved.partial_path()));
  }
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(Hdf5Writer, KilledWriterLeavesOnlyAnIncompletePartial) {
  const fs::path path = test::fresh_dir("hdf5_killed") / "out.h5";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // writes, then dies without destructors or commit
    ResultFile out = ResultFile::create(path, false);
    out.set_attr("/", "x", 1.0);
    out.write_column("/c", std::vector<double>(50000, 1.0));
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  const std::string partial = path.string() + ".partial." + std::to_string(child);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::exists(partial));
  EXPECT_FALSE(result_file_is_complete(partial));
}

// SIGTERM while the file is being written (Slurm's time limit): the handler removes the partial
// file and exits 128 + 15; a file already committed is not touched by a later signal.
TEST(Hdf5Writer, SigtermRemovesThePartialFile) {
  const fs::path dir = test::fresh_dir("hdf5_sigterm");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    install_stop_handlers(1);  // not world rank 0: no message in the test's output
    ResultFile done = ResultFile::create(dir / "done.h5", false);
    done.set_attr("/", "x", 1.0);
    done.commit();
    ResultFile out = ResultFile::create(dir / "out.h5", false);
    out.write_column("/c", std::vector<double>(50000, 1.0));
    raise(SIGTERM);
    _exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir)) left.push_back(entry.path().filename());
  EXPECT_EQ(left, std::vector<std::string>{"done.h5"});
  EXPECT_TRUE(result_file_is_complete(dir / "done.h5"));
}

TEST(Hdf5Writer, FinalFileAppearingBeforeCommitIsKept) {
  const fs::path path = test::fresh_dir("hdf5_race") / "out.h5";
  ResultFile out = ResultFile::create(path, false);
  std::ofstream(path) << "other";
  EXPECT_THROW(out.commit(), InputError);
  EXPECT_EQ(fs::file_size(path), 5u);
  const std::string partial = out.partial_path();
  out = ResultFile::create(path.string() + ".2", false);  // drops the failed one: partial kept
  EXPECT_TRUE(result_file_is_complete(partial));
}

TEST(Hdf5Writer, ExistingFileNeedsOverwrite) {
  const fs::path path = test::fresh_dir("hdf5_overwrite") / "out.h5";
  std::ofstream(path) << "old";
  try {
    ResultFile::create(path, false);
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), path.string() + " exists; pass --overwrite to replace it");
  }
  ResultFile out = ResultFile::create(path, true);
  out.set_attr("/", "v", int64_t{2});
  EXPECT_EQ(fs::file_size(path), 3u);  // the old file stays until commit
  out.commit();
  EXPECT_TRUE(result_file_is_complete(path));
  EXPECT_FALSE(fs::exists(out.partial_path()));
}

TEST(Hdf5Writer, BadDirectoryIsAnInputError) {
  const fs::path dir = test::fresh_dir("hdf5_baddir");
  const fs::path missing = dir / "no" / "such" / "out.h5";
  try {
    ResultFile::create(missing, false);
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "no" / "such").string()), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ResultFile::create(dir, true), InputError);  // a directory, even with overwrite
  if (geteuid() != 0) {                                     // root writes anywhere
    const fs::path locked = dir / "locked";
    fs::create_directory(locked);
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROW(ResultFile::create(locked / "out.h5", false), InputError);
    fs::permissions(locked, fs::perms::owner_all);
  }
}

TEST(Hdf5Writer, WritesAfterCommitThrow) {
  const fs::path path = test::fresh_dir("hdf5_after_commit") / "out.h5";
  ResultFile out = ResultFile::create(path, false);
  out.commit();
  EXPECT_TRUE(out.committed());
  EXPECT_THROW(out.set_attr("/", "x", 1.0), std::logic_error);
  EXPECT_THROW(out.write_column("/c", std::vector<double>{1.0}), std::logic_error);
  EXPECT_THROW(out.set_dataset_attr("/", "x", "y"), std::logic_error);
  EXPECT_THROW(out.commit(), std::logic_error);
}

TEST(Hdf5Writer, ResultFileIsComplete) {
  const fs::path dir = test::fresh_dir("hdf5_complete");
  EXPECT_FALSE(result_file_is_complete((dir / "missing.h5").string()));
  std::ofstream(dir / "text.h5") << "not hdf5 at all\n";
  EXPECT_FALSE(result_file_is_complete((dir / "text.h5").string()));
  EXPECT_FALSE(result_file_is_complete(dir.string()));
  {  // valid HDF5 without the attribute, as a killed writer would leave behind
    Id raw(H5Fcreate((dir / "raw.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  }
  EXPECT_FALSE(result_file_is_complete((dir / "raw.h5").string()));
  ResultFile out = ResultFile::create(dir / "done.h5", false);
  out.commit();
  EXPECT_TRUE(result_file_is_complete((dir / "done.h5").string()));
}

}  // namespace
}  // namespace ssd
