// Backup speculators for cache misses (paper §4.3, --backup random|ngram): negligible latency
// (T_b ~ 0 in Theorem 17), at the price of fewer accepted tokens (E_miss < E_hit). The paper's
// implementation returns random tokens and notes (footnote 2) that n-gram speculators such as
// prompt lookup do better at the same cost.
#pragma once

#include <cstdint>
#include <vector>

namespace ssd {

// K proposed tokens for a sequence, and the K probability rows (K * vocab, row-major) the
// proposal was drawn from, needed for lossless verification at temperature > 0. Rows are only
// filled when asked for.
// The backup speculator (SSD's fallback when the primary is too slow): random tokens or an
// n-gram lookup in the sequence itself.
enum class BackupKind { Random, Ngram };
const char* backup_kind_name(BackupKind kind);  // "random", "ngram"

struct BackupProposal {
  std::vector<int32_t> tokens;
  std::vector<float> probs;
};

// K tokens uniform over the vocabulary, drawn from uniform01(seed, stream, counter)
// (ssd/sampling.h) with counter advanced once per token. Uniform rows (1/vocab).
BackupProposal random_backup(int K, int vocab, uint64_t seed, uint64_t stream, uint64_t& counter,
                             bool want_probs);

// Prompt-lookup decoding (Saxena 2023): find the most recent earlier occurrence of the longest
// suffix of `tokens` (n = max_n down to 1) and propose the K tokens that followed it, reading
// on through the proposal itself when the continuation reaches the end of the sequence (so a
// repeated pattern keeps repeating). With no match at all, repeats the last token (token 0 for
// an empty sequence). Deterministic; one-hot rows.
BackupProposal ngram_backup(const std::vector<int32_t>& tokens, int K, int vocab, int max_n,
                            bool want_probs);

}  // namespace ssd
