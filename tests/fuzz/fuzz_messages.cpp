// Draft<->target messages of arbitrary bytes (the first byte picks the type): decode() returns a
// message or throws std::runtime_error, never crashes or allocates without bound; a decoded
// message encodes back to the same bytes.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "comm/messages.h"

namespace {

template <typename Message>
void round_trip(const std::vector<uint8_t>& bytes) {
  Message m;
  try {
    ssd::decode(bytes, m);
  } catch (const std::runtime_error&) {
    return;
  }
  if (ssd::encode(m) != bytes) std::abort();
}

// SSD_FUZZ_WRITE_SEEDS=DIR: writes one valid message of each type to DIR and exits (the seed
// corpus of scripts/fuzz.sh).
void write_seeds(const std::string& dir) {
  ssd::StartMessage start;
  start.group = 1;
  start.max_new_tokens = 16;
  start.lookahead = 4;
  start.temperature = 0.7;
  start.sequence_ids = {0, 1};
  start.prompts = {{1, 2, 3}, {4, 5}};
  ssd::OutcomeMessage outcome;
  outcome.round = 3;
  outcome.sequences = {{0, 2, 17, 9, 0, 0}, {1, 4, -1, 12, 3, 1}};
  ssd::TimedSpeculation spec;
  spec.speculation.vocab = 8;
  spec.speculation.sequences.resize(1);
  spec.speculation.sequences[0].tokens = {1, 2, 3, 4};
  spec.speculation.sequences[0].fanout = {2, 1, 1, 1, 0};
  spec.speculation.sequences[0].probs.assign(32, 0.125f);
  spec.telemetry.fanout_total = 6;
  spec.telemetry.forward_passes = 7;
  const ssd::ReadyMessage ready{1};
  const std::vector<std::pair<uint8_t, std::vector<uint8_t>>> seeds = {{0, ssd::encode(start)},
                                                                       {1, ssd::encode(outcome)},
                                                                       {2, ssd::encode(spec)},
                                                                       {3, ssd::encode(ready)}};
  for (const auto& [type, bytes] : seeds) {
    std::FILE* f = std::fopen((dir + "/seed-" + std::to_string(type)).c_str(), "wb");
    if (!f) std::exit(1);
    std::fputc(type, f);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  std::exit(0);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("SSD_FUZZ_WRITE_SEEDS")) write_seeds(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::vector<uint8_t> bytes(data + 1, data + size);
  switch (data[0] % 4) {
    case 0:
      round_trip<ssd::StartMessage>(bytes);
      break;
    case 1:
      round_trip<ssd::OutcomeMessage>(bytes);
      break;
    case 2:
      round_trip<ssd::TimedSpeculation>(bytes);
      break;
    default:
      round_trip<ssd::ReadyMessage>(bytes);
      break;
  }
  return 0;
}
