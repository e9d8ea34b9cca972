#include "comm/messages.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace ssd {

const char* speculation_source_names() {
  return "initial,cache_hit,primary,backup";
}
namespace {

class Writer {
 public:
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
  template <typename T>
  void put_vector(const std::vector<T>& v) {
    put<uint64_t>(v.size());
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    bytes.insert(bytes.end(), p, p + v.size() * sizeof(T));
  }
  std::vector<uint8_t> bytes;
};

class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& b) : bytes_(b) {}
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  template <typename T>
  std::vector<T> get_vector() {
    const uint64_t n = get<uint64_t>();
    if (n > bytes_.size()) throw std::runtime_error("message: bad vector length");
    need(n * sizeof(T));
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), bytes_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return v;
  }
  // A flag is written as 0 or 1; any other byte is a corrupt message (found by fuzzing: such
  // a message decoded, and encoded back to different bytes).
  bool get_flag() {
    const uint8_t v = get<uint8_t>();
    if (v > 1) throw std::runtime_error("message: bad flag byte");
    return v == 1;
  }
  SpeculationSource get_source() {
    const int32_t v = get<int32_t>();
    if (v < int32_t(SpeculationSource::Initial) || v > int32_t(SpeculationSource::Backup))
      throw std::runtime_error("message: bad speculation source " + std::to_string(v));
    return SpeculationSource(v);
  }
  void done() const {
    if (at_ != bytes_.size()) throw std::runtime_error("message: trailing bytes");
  }

 private:
  void need(size_t n) const {
    if (at_ + n > bytes_.size()) throw std::runtime_error("message: truncated");
  }
  const std::vector<uint8_t>& bytes_;
  size_t at_ = 0;
};

}  // namespace

std::vector<uint8_t> encode(const StartMessage& m) {
  Writer w;
  w.put(m.group);
  w.put(m.max_new_tokens);
  w.put(m.lookahead);
  w.put(m.temperature);
  w.put(m.seed);
  w.put<uint8_t>(m.synthetic);
  w.put_vector(m.sequence_ids);
  w.put<uint64_t>(m.prompts.size());
  for (const auto& p : m.prompts) w.put_vector(p);
  return std::move(w.bytes);
}

void decode(const std::vector<uint8_t>& bytes, StartMessage& m) {
  Reader r(bytes);
  m.group = r.get<int32_t>();
  m.max_new_tokens = r.get<int32_t>();
  m.lookahead = r.get<int32_t>();
  m.temperature = r.get<double>();
  m.seed = r.get<uint64_t>();
  m.synthetic = r.get_flag();
  m.sequence_ids = r.get_vector<int32_t>();
  const uint64_t n = r.get<uint64_t>();
  if (n > bytes.size()) throw std::runtime_error("message: bad prompt count");
  m.prompts.resize(n);
  for (auto& p : m.prompts) p = r.get_vector<int32_t>();
  r.done();
}

std::vector<uint8_t> encode(const OutcomeMessage& m) {
  Writer w;
  w.put(m.round);
  w.put(m.temperature);
  w.put(m.target_busy_s);
  w.put(m.batch_live);
  w.put<uint8_t>(m.stop);
  w.put_vector(m.sequences);
  return std::move(w.bytes);
}

void decode(const std::vector<uint8_t>& bytes, OutcomeMessage& m) {
  Reader r(bytes);
  m.round = r.get<int32_t>();
  m.temperature = r.get<double>();
  m.target_busy_s = r.get<double>();
  m.batch_live = r.get<int32_t>();
  m.stop = r.get_flag();
  m.sequences = r.get_vector<SequenceOutcome>();
  r.done();
}

namespace {

std::vector<uint8_t> encode_speculation(const SpeculationMessage& m, const DraftTelemetry& t) {
  Writer w;
  w.put(m.round);
  w.put(m.vocab);
  w.put(t.draft_start_s);
  w.put(t.draft_end_s);
  w.put(t.idle_s);
  w.put(t.cache_build_s);
  w.put(t.fallback_s);
  w.put(t.branches);
  w.put(t.fanout_total);
  w.put(t.forward_passes);
  w.put<uint64_t>(m.sequences.size());
  for (const auto& s : m.sequences) {
    w.put(s.row);
    w.put<uint8_t>(s.cache_hit);
    w.put(s.source);
    w.put(s.bonus_rank);
    w.put_vector(s.fanout);
    w.put(s.resolved_bonus);
    w.put_vector(s.tokens);
    w.put_vector(s.probs);
  }
  return std::move(w.bytes);
}

void decode_speculation(const std::vector<uint8_t>& bytes, SpeculationMessage& m,
                        DraftTelemetry& t) {
  Reader r(bytes);
  m.round = r.get<int32_t>();
  m.vocab = r.get<int32_t>();
  t.draft_start_s = r.get<double>();
  t.draft_end_s = r.get<double>();
  t.idle_s = r.get<double>();
  t.cache_build_s = r.get<double>();
  t.fallback_s = r.get<double>();
  t.branches = r.get<int32_t>();
  t.fanout_total = r.get<int32_t>();
  t.forward_passes = r.get<int32_t>();
  const uint64_t n = r.get<uint64_t>();
  if (n > bytes.size()) throw std::runtime_error("message: bad sequence count");
  m.sequences.resize(n);
  for (auto& s : m.sequences) {
    s.row = r.get<int32_t>();
    s.cache_hit = r.get_flag();
    s.source = r.get_source();
    s.bonus_rank = r.get<int32_t>();
    s.fanout = r.get_vector<int32_t>();
    s.resolved_bonus = r.get<int32_t>();
    s.tokens = r.get_vector<int32_t>();
    s.probs = r.get_vector<float>();
  }
  r.done();
}

}  // namespace

std::vector<uint8_t> encode(const SpeculationMessage& m) {
  return encode_speculation(m, DraftTelemetry{});
}

std::vector<uint8_t> encode(const TimedSpeculation& m) {
  return encode_speculation(m.speculation, m.telemetry);
}

void decode(const std::vector<uint8_t>& bytes, SpeculationMessage& m) {
  DraftTelemetry ignored;
  decode_speculation(bytes, m, ignored);
}

void decode(const std::vector<uint8_t>& bytes, TimedSpeculation& m) {
  decode_speculation(bytes, m.speculation, m.telemetry);
}

std::vector<uint8_t> encode(const ReadyMessage& m) {
  Writer w;
  w.put(m.group);
  return std::move(w.bytes);
}

void decode(const std::vector<uint8_t>& bytes, ReadyMessage& m) {
  Reader r(bytes);
  m.group = r.get<int32_t>();
  r.done();
}

}  // namespace ssd
