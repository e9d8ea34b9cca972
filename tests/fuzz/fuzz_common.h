// Helpers of the libFuzzer targets: the loaders read files, so each input is written to a file
// of this process's own first.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace ssd::fuzz {

// Writes `data` to a per-process scratch file with the given suffix and returns its path.
inline std::string write_input(const uint8_t* data, size_t size, const std::string& suffix) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path =
      std::string(dir && *dir ? dir : "/tmp") + "/ssd-fuzz-" + std::to_string(::getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

}  // namespace ssd::fuzz
