// RankLayout: how the MPI world splits into the target's tensor-parallel group and the draft
// ranks. World ranks [0, T) are target TP ranks 0..T-1, world ranks [T, T + D) are draft ranks
// 0..D-1; target rank 0 (world rank 0) leads the run and writes the results.
#pragma once

#include <mpi.h>

#include <string>

namespace ssd {

enum class Role { Target, Draft };

struct RankLayout {
  int world_rank = 0;
  int world_size = 1;
  int target_tp = 1;    // T
  int draft_ranks = 0;  // D
  Role role = Role::Target;
  int group_rank = 0;  // rank within the role's group
  int group_size = 1;
  MPI_Comm group = MPI_COMM_NULL;  // the target TP group or the draft group
  int target_leader = 0;           // world rank of target tp 0
  int draft_leader = -1;           // world rank of draft 0; -1 when there are no draft ranks

  bool is_leader() const { return group_rank == 0; }
  bool is_run_leader() const { return world_rank == target_leader; }
  // "target tp 0/2", "draft 0/1"
  std::string role_name() const;
};

// Splits MPI_COMM_WORLD. Every rank checks the same numbers, so a bad layout makes every rank
// throw the same InputError ("mpirun -np N does not equal --target-tp T + --draft-ranks D").
RankLayout make_rank_layout(int target_tp, int draft_ranks);
void free_rank_layout(RankLayout& layout);

}  // namespace ssd
