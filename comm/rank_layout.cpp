#include "comm/rank_layout.h"

#include "kernels/errors.h"

namespace ssd {

std::string RankLayout::role_name() const {
  return (role == Role::Target ? "target tp " : "draft ") + std::to_string(group_rank) + "/" +
         std::to_string(group_size);
}

RankLayout make_rank_layout(int target_tp, int draft_ranks) {
  RankLayout l;
  MPI_Comm_rank(MPI_COMM_WORLD, &l.world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &l.world_size);
  if (target_tp < 1) throw InputError("target tensor-parallel size: must be at least 1");
  if (draft_ranks < 0) throw InputError("draft ranks: must be 0 or more");
  if (target_tp + draft_ranks != l.world_size)
    throw InputError(std::to_string(l.world_size) + " ranks launched for a layout of " +
                     std::to_string(target_tp) + " target + " + std::to_string(draft_ranks) +
                     " draft ranks");
  l.target_tp = target_tp;
  l.draft_ranks = draft_ranks;
  l.role = l.world_rank < target_tp ? Role::Target : Role::Draft;
  l.group_rank = l.role == Role::Target ? l.world_rank : l.world_rank - target_tp;
  l.group_size = l.role == Role::Target ? target_tp : draft_ranks;
  l.draft_leader = draft_ranks > 0 ? target_tp : -1;
  MPI_Comm_split(MPI_COMM_WORLD, l.role == Role::Target ? 0 : 1, l.group_rank, &l.group);
  return l;
}

void free_rank_layout(RankLayout& l) {
  if (l.group != MPI_COMM_NULL) MPI_Comm_free(&l.group);
}

}  // namespace ssd
