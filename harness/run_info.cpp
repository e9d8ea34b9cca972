#include "harness/run_info.h"

#include <cblas.h>
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <CLI/Version.hpp>
#include <ctime>
#include <nlohmann/json.hpp>

#include "build_info.h"
#include "kernels/cpu/cpu_backend.h"

namespace ssd {

std::string iso_time_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

RunInfo collect_run_info() {
  RunInfo info;
  info.version = SSD_VERSION;
  info.git_commit = SSD_GIT_COMMIT;
  info.build_type = SSD_BUILD_TYPE;
  info.compiler = SSD_CXX_COMPILER;
  info.start_time = iso_time_now();
  info.host = host_name();
  info.cpu_model = cpu_model_name();

  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  info.libraries.push_back({"hdf5", std::to_string(major) + "." + std::to_string(minor) + "." +
                                        std::to_string(release)});
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int length = 0;
  MPI_Get_library_version(mpi_version, &length);
  std::string mpi(mpi_version, length);
  if (auto comma = mpi.find(','); comma != std::string::npos) mpi = mpi.substr(0, comma);
  info.libraries.push_back({"mpi", mpi});
  std::string blas = openblas_get_config();
  while (!blas.empty() && blas.back() == ' ') blas.pop_back();
  info.libraries.push_back({"openblas", blas});
  info.libraries.push_back({"cli11", CLI11_VERSION});
  info.libraries.push_back({"nlohmann_json", std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                                                 std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                                                 std::to_string(NLOHMANN_JSON_VERSION_PATCH)});
  info.libraries.push_back({"compiler", info.compiler});
  return info;
}

}  // namespace ssd
