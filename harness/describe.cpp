// The names of the run flags' enums (the flags' values), for the CLI, the settings list
// (harness/settings.cpp) and the result row.
#include "harness/cli.h"

namespace ssd {

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::SD:
      return "sd";
    case Mode::SSD:
      return "ssd";
    case Mode::AR:
      break;
  }
  return "ar";
}

const char* output_format_name(OutputFormat format) {
  switch (format) {
    case OutputFormat::Csv:
      return "csv";
    case OutputFormat::Jsonl:
      return "jsonl";
    case OutputFormat::Text:
      break;
  }
  return "text";
}

const char* placement_name(DraftPlacement placement) {
  switch (placement) {
    case DraftPlacement::Collocated:
      return "collocated";
    case DraftPlacement::Separate:
      return "separate";
    case DraftPlacement::None:
      return "none";
    case DraftPlacement::Auto:
      break;
  }
  return "auto";
}

}  // namespace ssd
