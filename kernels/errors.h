// Error types. InputError is the user's fault (bad flag, bad file): the program prints its
// one-line message and exits with status 2. Anything else is a bug or a runtime failure.
// In kernels/, the library every other one links, so that model/ (config and weight files),
// comm/ (the rank layout) and the rest throw it without depending on each other for it.
#pragma once

#include <stdexcept>
#include <string>

namespace ssd {

struct InputError : std::runtime_error {
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace ssd
