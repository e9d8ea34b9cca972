// Helpers shared by the GoogleTest programs.
#pragma once

#include <filesystem>
#include <string>

namespace ssd::test {

// A fresh, empty directory under the build tree, removed at process exit is not guaranteed:
// tests name it after themselves so reruns start clean.
std::filesystem::path fresh_dir(const std::string& name);

}  // namespace ssd::test
