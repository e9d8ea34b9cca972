// Gathering every rank's characterize results to world rank 0: each rank's results as one JSON
// text, collected with MPI_Gatherv (the same way gather_rank_info collects the rank table).
#include <mpi.h>

#include <nlohmann/json.hpp>

#include "characterize/parts.h"

namespace ssd {

// nlohmann's conventions: to_json/from_json next to the types, found by argument lookup.
void to_json(nlohmann::json& j, const MemoryResult& r) {
  j = {{"rank", r.rank},
       {"element_bytes", r.element_bytes},
       {"buffer_bytes", r.buffer_bytes},
       {"passes", r.passes},
       {"best_s", r.best_s},
       {"mean_s", r.mean_s},
       {"gbps", r.gbps},
       {"mean_gbps", r.mean_gbps}};
}
void from_json(const nlohmann::json& j, MemoryResult& r) {
  j.at("rank").get_to(r.rank);
  j.at("element_bytes").get_to(r.element_bytes);
  j.at("buffer_bytes").get_to(r.buffer_bytes);
  j.at("passes").get_to(r.passes);
  j.at("best_s").get_to(r.best_s);
  j.at("mean_s").get_to(r.mean_s);
  j.at("gbps").get_to(r.gbps);
  j.at("mean_gbps").get_to(r.mean_gbps);
}

void to_json(nlohmann::json& j, const GemmResult& r) {
  j = {{"rank", r.rank},
       {"model", r.model},
       {"shape", r.shape},
       {"purpose", r.purpose},
       {"kernel", r.kernel},
       {"in", r.in},
       {"out", r.out},
       {"full_out", r.full_out},
       {"rows", r.rows},
       {"per_token", r.per_token},
       {"element_bytes", r.element_bytes},
       {"seconds", r.seconds},
       {"gflops", r.gflops},
       {"gbps", r.gbps}};
}
void from_json(const nlohmann::json& j, GemmResult& r) {
  j.at("rank").get_to(r.rank);
  j.at("model").get_to(r.model);
  j.at("shape").get_to(r.shape);
  j.at("purpose").get_to(r.purpose);
  j.at("kernel").get_to(r.kernel);
  j.at("in").get_to(r.in);
  j.at("out").get_to(r.out);
  j.at("full_out").get_to(r.full_out);
  j.at("rows").get_to(r.rows);
  j.at("per_token").get_to(r.per_token);
  j.at("element_bytes").get_to(r.element_bytes);
  j.at("seconds").get_to(r.seconds);
  j.at("gflops").get_to(r.gflops);
  j.at("gbps").get_to(r.gbps);
}

void to_json(nlohmann::json& j, const CommResult& r) {
  j = {{"bytes", r.bytes},     {"wire_bytes", r.wire_bytes}, {"iterations", r.iterations},
       {"seconds", r.seconds}, {"algbw_gbps", r.algbw_gbps}, {"busbw_gbps", r.busbw_gbps}};
}
void from_json(const nlohmann::json& j, CommResult& r) {
  j.at("bytes").get_to(r.bytes);
  j.at("wire_bytes").get_to(r.wire_bytes);
  j.at("iterations").get_to(r.iterations);
  j.at("seconds").get_to(r.seconds);
  j.at("algbw_gbps").get_to(r.algbw_gbps);
  j.at("busbw_gbps").get_to(r.busbw_gbps);
}

void to_json(nlohmann::json& j, const ForwardResult& r) {
  j = {{"rank", r.rank},
       {"model", r.model},
       {"kind", r.kind},
       {"rows", r.rows},
       {"sequences", r.sequences},
       {"calls", r.calls},
       {"seconds", r.seconds},
       {"best_seconds", r.best_seconds},
       {"concurrent", r.concurrent},
       {"context", r.context}};
}
void from_json(const nlohmann::json& j, ForwardResult& r) {
  j.at("rank").get_to(r.rank);
  j.at("model").get_to(r.model);
  j.at("kind").get_to(r.kind);
  j.at("rows").get_to(r.rows);
  j.at("sequences").get_to(r.sequences);
  j.at("calls").get_to(r.calls);
  j.at("seconds").get_to(r.seconds);
  j.at("best_seconds").get_to(r.best_seconds);
  j.at("concurrent").get_to(r.concurrent);
  j.at("context").get_to(r.context);
}

void to_json(nlohmann::json& j, const RankResults& r) {
  j = {{"rank", r.rank}, {"role", r.role},       {"memory", r.memory},
       {"gemm", r.gemm}, {"forward", r.forward}, {"all_reduce", r.all_reduce},
       {"p2p", r.p2p}};
}
void from_json(const nlohmann::json& j, RankResults& r) {
  j.at("rank").get_to(r.rank);
  j.at("role").get_to(r.role);
  j.at("memory").get_to(r.memory);
  j.at("gemm").get_to(r.gemm);
  j.at("forward").get_to(r.forward);
  j.at("all_reduce").get_to(r.all_reduce);
  j.at("p2p").get_to(r.p2p);
}

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
