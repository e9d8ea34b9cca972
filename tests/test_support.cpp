#include "tests/test_support.h"

namespace ssd::test {

std::filesystem::path fresh_dir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::path(SSD_BINARY_DIR) / "test-work" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace ssd::test
