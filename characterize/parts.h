// The parts of `ssd-bench characterize`, one file each: measurement primitives (timing.cpp),
// memory bandwidth (memory.cpp), the host's compute peaks (compute_peak.cpp), GEMMs (gemm.cpp),
// the target all-reduce and the draft<->target link (comm.cpp), forward passes (forward.cpp),
// SD's and SSD's rounds (rounds.cpp), the verification window (window.cpp), the steadiness of
// the timed passes (steadiness.cpp), gathering to rank 0 (results.cpp), the console tables
// (report.cpp) and the HDF5 file (file.cpp). characterize.cpp sets up the launch and runs them
// in order.
//
// Everything here works through the Backend and AllReduce interfaces and MPI, so the same code
// characterizes a CPU node and a GPU node.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "characterize/compute_peak.h"
#include "harness/cli.h"
#include "harness/hdf5_writer.h"
#include "harness/report.h"
#include "harness/run_info.h"
#include "kernels/backend.h"
#include "model/config.h"
#include "model/model.h"

namespace ssd {

// ---- measurement primitives (timing.cpp) ----

// Uniform values in [-0.05, 0.05), never all zero (a zero weight could take a fast path), filled
// in parallel with `threads` threads; seeded, so every run measures the same numbers.
std::vector<float> random_floats(size_t count, uint64_t seed, int threads);

struct Timing {
  double mean_s = 0.0;    // per call, over all timed calls
  double median_s = 0.0;  // per call, in the median of the timed batches
  double best_s = 0.0;    // per call, in the fastest of the timed batches
  int calls = 0;          // timed calls
};

// Times `call` on `backend`: one warm-up call, then batches of back-to-back calls, each closed
// by backend.synchronize(), for at least min_time seconds in all. Host clock around the work
// plus a synchronize is right for every backend: GPU work is asynchronous and counts only once
// it has finished. Batches rather than single calls keep the synchronize cost out of
// microsecond GEMMs.
Timing time_calls(Backend& backend, const std::function<void()>& call, double min_time);

// time_calls for several calls at once, their batches taken in turn (each call's first batch,
// then each call's second, ...), so that drift of a shared host moves them alike. One Timing
// per call, in order; each call still gets min_time.
std::vector<Timing> time_calls_interleaved(Backend& backend,
                                           const std::vector<std::function<void()>>& calls,
                                           double min_time);

// ---- results: what each rank measures ----

struct MemoryResult {  // Backend::copy of one buffer into another
  int rank = 0;
  int64_t element_bytes = 0;
  int64_t buffer_bytes = 0;  // each of source and destination
  int passes = 0;
  double best_s = 0.0, mean_s = 0.0;   // one copy
  double gbps = 0.0, mean_gbps = 0.0;  // (bytes read + bytes written) / time / 1e9
};

struct HostReadResult {  // the CPU read loop (rank 0 only; the host, whatever the backend)
  int64_t bytes = 0;
  int threads = 0;
  double gbps = 0.0, one_thread_gbps = 0.0;
  int streams = 0, one_thread_streams = 0;  // concurrent streams per thread of the best pass
};

// Every rank on a node running the read loop at once, each over a buffer of its own (SSD's
// target and draft ranks stream their weights together): what the node's memory gives ranks
// that read together, beside HostReadResult's one rank alone. The report keeps world rank 0's
// node's.
// Each pass comes after NodeLatencyProbe's reading of how far apart the ranks' cores are: on a
// guest whose vCPUs move between sharing a die and not, the pairs tell which the bandwidth met.
struct NodeReadPass {
  double latency_ns = 0.0;  // NodeLatencyProbe::farthest_ns just before the pass
  double gbps = 0.0;        // the ranks' rates in this pass, summed
};

struct NodeReadResult {
  int ranks = 0;           // on the node, each with HostReadResult::threads threads
  int streams = 0;         // per thread: rank 0's best alone
  double spacing_s = 0.0;  // between passes (--min-time), each started together (a barrier)
  std::vector<NodeReadPass> passes;
  double gbps = 0.0;  // the ranks' mean rates, summed: the passes' mean
  double min_rank_gbps = 0.0, max_rank_gbps = 0.0;
};

// The one-way latency of a cache line between the cores of world rank 0's node's first rank and
// each other rank of the node (node_latency.cpp). Collective over `node`, as are its
// constructor and destructor (an MPI shared-memory window).
class NodeLatencyProbe {
 public:
  explicit NodeLatencyProbe(MPI_Comm node);
  ~NodeLatencyProbe();
  NodeLatencyProbe(const NodeLatencyProbe&) = delete;
  NodeLatencyProbe& operator=(const NodeLatencyProbe&) = delete;
  // The largest of the first rank's latencies to the others (the best of its round-trip groups
  // with each), in ns, on every rank; 0 with one rank.
  double farthest_ns();

 private:
  MPI_Comm node_;
  int rank_ = 0, ranks_ = 1;
  MPI_Win window_ = MPI_WIN_NULL;
  char* lines_ = nullptr;  // one 64-byte flag line per rank, in the first rank's memory
};

struct GemmResult {  // one Backend::matmul shape at one row count
  int rank = 0;
  std::string model;    // target | draft
  std::string shape;    // q_proj, k/v_proj, ... (equal shapes merged with '+')
  std::string purpose;  // decode | verify | branch | prefill: why these rows
  std::string kernel;   // the backend's GEMM (--gemm)
  int64_t in = 0, out = 0, full_out = 0, rows = 0;
  int64_t per_token = 0;  // matrices of this shape in one forward pass
  int64_t element_bytes = 0;
  double seconds = 0.0, gflops = 0.0, gbps = 0.0;  // gbps: weight bytes / time
};

struct CommResult {        // one message size of a communication sweep
  int64_t bytes = 0;       // all-reduce: per rank; point to point: requested per message
  int64_t wire_bytes = 0;  // point to point: mean encoded message bytes (both directions)
  int iterations = 0;
  double seconds = 0.0;     // one all-reduce (slowest rank), or one way (half a round trip)
  double algbw_gbps = 0.0;  // bytes / seconds / 1e9
  double busbw_gbps = 0.0;  // all-reduce: algbw * 2 (n - 1) / n (nccl-tests); p2p: algbw
};

struct ForwardResult {  // one kind of forward pass, timed on the model's leader rank
  int rank = 0;
  std::string model;  // target | draft | sd (SD's round) | host
  std::string kind;   // ar | verify | draft | glue | branch | rows | argmax | ...
  int rows = 0, sequences = 0, calls = 0;
  int context = 0;                           // committed tokens per sequence before the step
  double seconds = 0.0, best_seconds = 0.0;  // mean and fastest call
  // Timed while the other model's rank timed its own passes (SSD: the draft builds its cache
  // while the target verifies), rather than alone (AR; SD, whose draft and target alternate).
  bool concurrent = false;
};

struct RankResults {
  int rank = 0;
  std::string role;
  MemoryResult memory;
  std::vector<GemmResult> gemm;
  std::vector<ForwardResult> forward;
  std::vector<CommResult> all_reduce;  // world rank 0 (target tp 0), with T > 1
  std::vector<CommResult> p2p;         // world rank 0, with a draft rank
};

// Collective over MPI_COMM_WORLD: every rank's results, in rank order, on world rank 0 (an
// empty vector elsewhere). results.cpp.
std::vector<RankResults> gather_results(const RankResults& mine);

// ---- measurements (memory.cpp, gemm.cpp, comm.cpp, forward.cpp) ----

MemoryResult measure_copy_bandwidth(Backend& backend, int64_t bytes, double min_time);
HostReadResult measure_host_read(int64_t bytes, int threads);
// The read loop's buffer, of measure_host_read and measure_node_read: `bytes` rounded down to
// whole 64-float blocks of random values, first touched by `threads` threads.
std::vector<float> read_loop_buffer(int64_t bytes, int threads);
// Collective over MPI_COMM_WORLD, every rank at once (throws nothing): each rank gets its own
// node's result.
// Its passes are `spacing_s` apart, so that they sample a guest's moving cores over a while.
NodeReadResult measure_node_read(const std::vector<float>& buffer, int threads, int streams,
                                 double spacing_s);
// The host's compute peaks: characterize/compute_peak.h.

struct LinearShape {
  std::string name;
  int in = 0, out = 0;
  int per_token = 0;  // matrices of this shape one forward pass multiplies by
};
// The distinct [out, in] shapes of one tensor-parallel shard's linear layers (Megatron split:
// q/k/v/gate/up by output rows, o/down by input columns, lm_head replicated).
std::vector<LinearShape> linear_shapes(const ModelConfig& config, int tp);

struct GemmRows {
  int rows = 0;
  std::string purpose;
};
// Weights are uploaded as `storage` (the model's --weight-dtype), so element_bytes and GB/s
// are those of the bytes a decode step really streams.
std::vector<GemmResult> measure_gemms(Backend& backend, const std::string& model,
                                      const std::vector<LinearShape>& shapes,
                                      const std::vector<GemmRows>& rows, double min_time,
                                      int threads, DType storage);

// Collective over `group` (the target TP group): one AllReduce::sum per size, 4 bytes to
// max_bytes in steps of x4. Every rank returns the same rows.
std::vector<CommResult> measure_all_reduce(Backend& backend, AllReduce& all_reduce, MPI_Comm group,
                                           int64_t max_bytes, double min_time);
// Between world rank 0 and the draft rank, over PeerLink with the decoding loop's own
// messages: an OutcomeMessage out, a SpeculationMessage back, each about `bytes` long. Both
// sides call it; the target side returns the rows.
std::vector<CommResult> measure_peer_link(bool target_side, int peer, int64_t max_bytes,
                                          double min_time);

struct ForwardPlan {
  int lookahead = 4, batch = 1, context = 128;
  std::vector<int> branch_rows;  // ascending
  double min_time = 0.2;
  bool concurrent = false;    // timed side by side with the other model's leader ...
  int peer = -1;              // ... world rank `peer`, each kept busy until both are done
  bool host_sampling = true;  // the target's leader also times the host work per logits row
};
// The target's forward passes (ar: one token per sequence; verify: K+1), driven by the TP
// group's leader as a run drives them; followers serve. The leader returns the rows. With
// `sd_draft` (the leader's copy of the draft), also SD's collocated round: model "sd", kinds
// verify and draft, each model's pass following the other's.
std::vector<ForwardResult> time_target_forwards(Model& model, MPI_Comm group, int rank,
                                                const ForwardPlan& plan, Model* sd_draft = nullptr);
// The draft's (draft: one token per sequence; glue: K+1 per sequence; branch: SSD's
// branch-masked steps at each of plan.branch_rows), on one rank.
std::vector<ForwardResult> time_draft_forwards(Model& model, int rank, const ForwardPlan& plan);

// ---- SD's and SSD's rounds (rounds.cpp) ----

class ModelGroup;
// SD's collocated round on the target's leader, `draft_model` its copy of the draft: the
// verification, then K draft steps. Model "sd", kinds verify (per round) and draft (per step).
std::vector<ForwardResult> time_sd_rounds(ModelGroup& target, Model& draft_model, int rank,
                                          const ForwardPlan& plan);
// SSD's round between the target's leader and the draft rank (plan.peer): the target verifies
// while the draft builds a uniform:1 cache (glue + K branch steps over plan.branch_rows'
// fewest rows), every round started by the target's go; then the draft drafts K tokens just
// in time, as after a miss. Model "ssd": the target's kind verify, the draft's kinds build and
// fallback (per step). Both sides call theirs at once.
ForwardResult time_ssd_rounds_target(ModelGroup& target, int rank, const ForwardPlan& plan);
std::vector<ForwardResult> time_ssd_rounds_draft(ModelGroup& draft, int rank,
                                                 const ForwardPlan& plan);

// ---- the verification window (window.cpp) ----

// The `model` `kind` pass of `forwards`, preferring one timed with `concurrent` as given (the
// other if only that was timed); nullptr if there is none.
const ForwardResult* find_forward(const std::vector<ForwardResult>& forwards,
                                  const std::string& model, const std::string& kind,
                                  bool concurrent);

struct VerificationWindow {
  bool present = false;  // needs the target's verify and the draft's branch steps
  double verify_s = 0.0, glue_s = 0.0;
  double draft_s = 0.0;                        // the draft's one-token step
  double sd_draft_s = 0.0, sd_verify_s = 0.0;  // as SD's round takes them (else alone)
  double t_sd = 0.0;                           // K sd_draft_s / sd_verify_s (the paper's T_SD)
  int base_rows = 0;      // branch rows of the window's step (the fewest measured)
  double branch_s = 0.0;  // its time
  int window_steps = 0;   // floor(verify_s / branch_s)
  double step_a_s = 0.0;  // branch step ~ a + b * rows, least squares over the measured rows
  double step_b_s = 0.0;
  // The window's limit (ssd/fanout.h window_fanout_limit; written as fanout_budget): the
  // largest total fan-out per sequence whose cache build fits. Not a cache's own B nor the
  // --budget setting.
  int window_fanout_limit = 0;
  int window_limit_rows = 0;  // window_fanout_limit * batch: rows of each of its branch steps
                              // (written as budget_rows)
};
VerificationWindow verification_window(const std::vector<ForwardResult>& forwards, int lookahead,
                                       int batch);

// The passes that timed clearly below a pass of fewer rows of the same model, context and
// timing (a disturbed host; steadiness.cpp), each as one line ("target beside rows 3 rows
// 9.870 ms < rows 2 rows 12.994 ms"), and SSD rounds whose verification or build took over 1.2x
// the passes they are made of timed beside ("ssd beside verify 5 rows 199.588 ms > 1.20 x target
// verify beside 131.345 ms"); empty when the curves rise with rows and the rounds agree.
std::vector<std::string> unsteady_passes(const std::vector<ForwardResult>& forwards);

// ---- console and file (report.cpp, file.cpp) ----

struct CharacterizeModel {
  std::string role;  // target | draft
  ModelSummary summary;
  std::vector<LinearShape> shapes;  // of rank 0's shard (target) or the draft
};

struct CharacterizeReport {
  RunInfo info;
  const CharacterizeConfig* config = nullptr;
  std::string backend;  // world rank 0's
  int target_tp = 1, draft_ranks = 0;
  bool draft_collocated = false;
  std::vector<CharacterizeModel> models;
  std::vector<RankResults> ranks;
  std::optional<HostReadResult> host_read;
  std::optional<NodeReadResult> node_read;      // where world rank 0's node holds 2 or more ranks
  std::optional<HostPeakResult> host_fma;       // fp32 FMAs (--compute f32)
  std::optional<HostPeakResult> host_bf16_dot;  // vdpbf16ps (--compute bf16), where there is one
  std::optional<HostPeakResult> host_amx_bf16;  // TDPBF16PS (--compute amx), where there is one
  // What rank 0's GEMMs multiply the target's weights in (Backend::compute_for): "f32", "bf16"
  // or "amx". The bounds below use this compute's peak (compute_peak).
  std::string target_compute = "f32";
  VerificationWindow window;
  // The AR decode bound of rank 0's target shard: linear-layer weight bytes per step (at the
  // target's weight dtype) over the bandwidth a decode step can use (bound_gbps: the host's
  // many-stream read bandwidth when weights are in host memory, the device copy bandwidth on a
  // GPU), and the measured AR step against it.
  double decode_bytes = 0.0, ar_bound_tok_s = 0.0, decode_ms = 0.0, bound_gbps = 0.0;
  std::string bound_source;  // which bandwidth bound_gbps is
  // The verification's bound (host weights only): batch x (K+1) rows take at least the AR
  // bound's weight reading and at least 2 x rows x parameters FLOPs at the compute's peak;
  // verify_ms is the measured verification (timed alone).
  double verify_rows = 0.0, verify_gflop = 0.0, verify_bound_ms = 0.0, verify_ms = 0.0;
  // Linear-layer parameters of rank 0's target shard, set where the verification's bound is
  // (host weights and a probe of the compute's peak); 0 elsewhere.
  double linear_params = 0.0;
  DType target_dtype = DType::F32;
  std::vector<std::string> unsteady;  // unsteady_passes of every rank's forward passes
};

// The peak of the target's compute (host_bf16_dot for "bf16", host_amx_bf16 for "amx", else
// host_fma), nullptr where it was not measured; and its name for the console ("bf16
// dot-product", "bf16 AMX tile", "fp32 FMA").
// characterize.cpp.
const HostPeakResult* compute_peak(const CharacterizeReport& report);
const char* compute_peak_name(const CharacterizeReport& report);

// A target step of `rows` token rows (any split over sequences) at its hardware floor, in ms:
// the AR bound's weight reading, or 2 x rows x linear_params FLOPs at compute_peak, whichever
// is longer. Attention and the other per-row work are left out, so the floor is below what any
// kernel can reach. 0 where there is no such bound (weights on a GPU, no probe of the peak).
// characterize.cpp.
double target_step_bound_ms(const CharacterizeReport& report, int rows);

// Every resolved setting, as name = value pairs (console header, /config, config_json).
// characterize.cpp.
std::vector<std::pair<std::string, std::string>> describe(const CharacterizeConfig& config);

void print_header(std::ostream& os, const CharacterizeReport& r);
// The tables; returns the number of measurements that are not positive and finite.
int print_tables(std::ostream& os, const CharacterizeReport& r);
// Writes and commits `file` (created at set-up, so a bad --out fails before measuring).
void write_characterize_file(ResultFile& file, const std::vector<std::string>& argv,
                             const CharacterizeReport& r);

}  // namespace ssd
