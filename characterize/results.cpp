// Gathering every rank's characterize results to world rank 0: each rank's results as one JSON
// text, collected with MPI_Gatherv (the same way gather_rank_info collects the rank table).
#include <mpi.h>

#include <nlohmann/json.hpp>

#include "characterize/parts.h"

namespace ssd {

// nlohmann's conventions: to_json/from_json next to the types, found by argument lookup; every
// JSON key is the field's own name.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MemoryResult, rank, element_bytes, buffer_bytes, passes, best_s,
                                   mean_s, gbps, mean_gbps)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(GemmResult, rank, model, shape, purpose, kernel, in, out,
                                   full_out, rows, per_token, element_bytes, seconds, gflops, gbps)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CommResult, bytes, wire_bytes, iterations, seconds, algbw_gbps,
                                   busbw_gbps)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ForwardResult, rank, model, kind, rows, sequences, calls,
                                   seconds, best_seconds, concurrent, context)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RankResults, rank, role, memory, gemm, forward, all_reduce, p2p)

std::vector<RankResults> gather_results(const RankResults& mine) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string text = nlohmann::json(mine).dump();
  int length = int(text.size());
  std::vector<int> lengths(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[size_t(r)] = total;
    total += lengths[size_t(r)];
  }
  std::string all(rank == 0 ? size_t(total) : 0, '\0');
  MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
              0, MPI_COMM_WORLD);
  std::vector<RankResults> out;
  if (rank != 0) return out;
  for (int r = 0; r < size; ++r)
    out.push_back(
        nlohmann::json::parse(all.substr(size_t(offsets[size_t(r)]), size_t(lengths[size_t(r)])))
            .get<RankResults>());
  return out;
}

}  // namespace ssd
