#include "ssd/model_group.h"

#include <stdexcept>

namespace ssd {
namespace {

void append(std::vector<int32_t>& out, const std::vector<int32_t>& v) {
  out.push_back(int32_t(v.size()));
  out.insert(out.end(), v.begin(), v.end());
}

std::vector<int32_t> take(const std::vector<int32_t>& in, size_t& at) {
  const size_t n = size_t(in.at(at++));
  if (at + n > in.size()) throw std::runtime_error("ModelGroup: truncated message");
  std::vector<int32_t> v(in.begin() + at, in.begin() + at + n);
  at += n;
  return v;
}

}  // namespace

ModelGroup::ModelGroup(Model& model, MPI_Comm group) : model_(model), group_(group) {
  if (group_ != MPI_COMM_NULL) {
    MPI_Comm_rank(group_, &rank_);
    MPI_Comm_size(group_, &size_);
  }
}

ModelGroup::~ModelGroup() {
  if (has_cache_) release_kv_cache(cache_, *model_.backend);
  release_activations(acts_, *model_.backend);
}

void ModelGroup::broadcast(std::vector<int32_t>& message) {
  if (size_ == 1) return;
  int n = int(message.size());
  MPI_Bcast(&n, 1, MPI_INT, 0, group_);
  message.resize(n);
  MPI_Bcast(message.data(), n, MPI_INT32_T, 0, group_);
}

void ModelGroup::apply(const std::vector<int32_t>& m, std::vector<float>& logits) {
  switch (m.at(0)) {
    case kReset: {
      if (has_cache_) release_kv_cache(cache_, *model_.backend);
      cache_ = create_kv_cache(model_, m.at(1), m.at(2));
      has_cache_ = true;
      break;
    }
    case kForward: {
      ForwardBatch b;
      size_t at = 1;
      b.tokens = take(m, at);
      b.seq = take(m, at);
      b.position = take(m, at);
      b.slot = take(m, at);
      b.prefix = take(m, at);
      b.extra_begin = take(m, at);
      b.extra_slots = take(m, at);
      b.logit_rows = take(m, at);
      ssd::forward(model_, cache_, b, acts_, logits);
      break;
    }
    case kMove:
      for (size_t l = 0; l < cache_.k.size(); ++l)
        model_.backend->kv_move(cache_.k[l], cache_.v[l], cache_.layout, m.at(1), m.at(2), m.at(3),
                                m.at(4), m.at(5));
      break;
    default:
      throw std::runtime_error("ModelGroup: unknown command");
  }
}

void ModelGroup::reset_cache(int sequences, int capacity) {
  std::vector<int32_t> m{kReset, sequences, capacity};
  broadcast(m);
  std::vector<float> unused;
  apply(m, unused);
}

void ModelGroup::forward(const ForwardBatch& b, std::vector<float>& logits) {
  ++forward_passes_;
  if (size_ == 1) {
    ssd::forward(model_, cache_, b, acts_, logits);
    return;
  }
  std::vector<int32_t> m{kForward};
  for (const auto* v : {&b.tokens, &b.seq, &b.position, &b.slot, &b.prefix, &b.extra_begin,
                        &b.extra_slots, &b.logit_rows})
    append(m, *v);
  broadcast(m);
  apply(m, logits);
}

void ModelGroup::kv_move(int src_seq, int src_slot, int dst_seq, int dst_slot, int count) {
  std::vector<int32_t> m{kMove, src_seq, src_slot, dst_seq, dst_slot, count};
  broadcast(m);
  std::vector<float> unused;
  apply(m, unused);
}

void ModelGroup::stop() {
  std::vector<int32_t> m{kStop};
  broadcast(m);
}

void ModelGroup::serve() {
  std::vector<float> logits;
  for (;;) {
    std::vector<int32_t> m;
    broadcast(m);
    if (m.at(0) == kStop) return;
    apply(m, logits);
  }
}

}  // namespace ssd
