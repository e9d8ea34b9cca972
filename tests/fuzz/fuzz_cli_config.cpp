// A CLI11 config file (--config FILE) of arbitrary bytes: a parsed command line, or CliExit with
// a one-line message and code 2.
#include "harness/cli.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = ssd::fuzz::write_input(data, size, "-flags.toml");
  const char* argv[] = {"ssd-bench", "--config", path.c_str()};
  try {
    (void)ssd::parse_cli(3, argv);
  } catch (const ssd::CliExit& e) {
    if (e.code != 2 && e.code != 0) std::abort();
    if (e.code == 2 && e.text.find('\n') != std::string::npos) std::abort();  // one line
  }
  return 0;
}
