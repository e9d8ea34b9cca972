#include "ssd/backup_speculator.h"

#include <algorithm>
#include <stdexcept>

#include "ssd/sampling.h"

namespace ssd {

const char* backup_kind_name(BackupKind kind) {
  return kind == BackupKind::Ngram ? "ngram" : "random";
}
namespace {

void check(int K, int vocab) {
  if (K < 0 || vocab <= 0) throw std::invalid_argument("backup speculator: need K >= 0, vocab > 0");
}

}  // namespace

BackupProposal random_backup(int K, int vocab, uint64_t seed, uint64_t stream, uint64_t& counter,
                             bool want_probs) {
  check(K, vocab);
  BackupProposal out;
  out.tokens.resize(K);
  for (int i = 0; i < K; ++i) {
    const double u = uniform01(seed, stream, counter++);
    out.tokens[i] = std::min(int32_t(u * vocab), int32_t(vocab - 1));
  }
  // The draft distribution q is exactly uniform, so the target accepts token x with
  // probability min(1, p(x) vocab) and the output stays lossless.
  if (want_probs) out.probs.assign(size_t(K) * vocab, 1.0f / float(vocab));
  return out;
}

BackupProposal ngram_backup(const std::vector<int32_t>& tokens, int K, int vocab, int max_n,
                            bool want_probs) {
  check(K, vocab);
  const int len = int(tokens.size());
  // `ext` is the sequence extended by the proposal; copying ext[from + i] lets a match whose
  // continuation runs into the end of the sequence keep going through what it just proposed.
  std::vector<int32_t> ext = tokens;
  ext.reserve(len + K);
  int from = -1;
  for (int n = std::min(max_n, len - 1); n >= 1 && from < 0; --n) {
    const int32_t* suffix = tokens.data() + len - n;
    // Most recent first: recent context predicts the next tokens best. The match must end
    // before the suffix itself so that at least one continuation token exists.
    for (int j = len - n - 1; j >= 0; --j) {
      if (std::equal(suffix, suffix + n, tokens.data() + j)) {
        from = j + n;
        break;
      }
    }
  }
  BackupProposal out;
  out.tokens.resize(K);
  for (int i = 0; i < K; ++i) {
    const int32_t next = from >= 0 ? ext[from + i] : (len > 0 ? tokens.back() : 0);
    out.tokens[i] = next;
    ext.push_back(next);
  }
  // A deterministic proposal is a one-hot draft distribution: verification accepts x with
  // probability min(1, p(x)) and resamples from the residual otherwise.
  if (want_probs) {
    out.probs.assign(size_t(K) * vocab, 0.0f);
    for (int i = 0; i < K; ++i)
      if (out.tokens[i] >= 0 && out.tokens[i] < vocab)
        out.probs[size_t(i) * vocab + out.tokens[i]] = 1.0f;
  }
  return out;
}

}  // namespace ssd
