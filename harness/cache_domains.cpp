#include "harness/cache_domains.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace ssd {
namespace {

// The first line of a sysfs file, "" where it cannot be read.
std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool parse_int(const std::string& text, int& value) {
  if (text.empty() || text.size() > 9 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return false;
  value = std::stoi(text);
  return true;
}

int cache_id_of(int cpu, const std::string& cpu_dir) {
  const std::string cache = cpu_dir + "/cpu" + std::to_string(cpu) + "/cache/index";
  int best_level = 0, id = -1;
  for (int index = 0; index < 16; ++index) {
    int level = 0;
    if (!parse_int(read_line(cache + std::to_string(index) + "/level"), level)) continue;
    if (level < best_level) continue;
    int value = -1;
    if (!parse_int(read_line(cache + std::to_string(index) + "/id"), value)) {
      const std::vector<int> sharing =
          parse_cpu_list(read_line(cache + std::to_string(index) + "/shared_cpu_list"));
      value = sharing.empty() ? -1 : sharing.front();
    }
    best_level = level;
    id = value;
  }
  return id;
}

std::vector<int> llc_ids(const RankInfo& r) {
  return parse_cpu_list(r.llc);
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t dash = item.find('-');
    int first = 0, last = 0;
    if (dash == std::string::npos) {
      if (!parse_int(item, first)) return {};
      last = first;
    } else if (!parse_int(item.substr(0, dash), first) || !parse_int(item.substr(dash + 1), last) ||
               last < first || last - first > (1 << 20)) {
      return {};  // a million CPUs in one range is a broken file, not a machine
    }
    for (int cpu = first; cpu <= last; ++cpu) out.push_back(cpu);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> last_level_cache_ids(const std::vector<int>& cpus, const std::string& cpu_dir) {
  std::vector<int> ids;
  for (int cpu : cpus) ids.push_back(cache_id_of(cpu, cpu_dir));
  return ids;
}

std::vector<int> cache_domains(const std::vector<int>& cpus, const std::string& cpu_dir) {
  std::vector<int> ids = last_level_cache_ids(cpus, cpu_dir);
  ids.erase(std::remove(ids.begin(), ids.end(), -1), ids.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

int host_cache_domains(const std::string& cpu_dir) {
  const std::vector<int> online = parse_cpu_list(read_line(cpu_dir + "/online"));
  return int(cache_domains(online, cpu_dir).size());
}

std::vector<std::string> shared_cache_warnings(const std::vector<RankInfo>& ranks,
                                               bool ranks_stream_together) {
  std::vector<std::string> out;
  if (!ranks_stream_together) return out;
  for (const RankInfo& draft : ranks) {
    if (!starts_with(draft.role, "draft") || draft.gpu || draft.host_llcs < 2) continue;
    const std::vector<int> mine = llc_ids(draft);
    std::vector<int> shared, targets;
    for (const RankInfo& target : ranks) {
      if (!starts_with(target.role, "target") || target.gpu || target.host != draft.host) continue;
      const std::vector<int> theirs = llc_ids(target);
      std::vector<int> both;
      std::set_intersection(mine.begin(), mine.end(), theirs.begin(), theirs.end(),
                            std::back_inserter(both));
      if (both.empty()) continue;
      targets.push_back(target.rank);
      shared.insert(shared.end(), both.begin(), both.end());
    }
    if (targets.empty()) continue;
    std::sort(shared.begin(), shared.end());
    shared.erase(std::unique(shared.begin(), shared.end()), shared.end());
    std::string names;
    for (int t : targets) names += (names.empty() ? "" : ",") + std::to_string(t);
    out.push_back("draft rank " + std::to_string(draft.rank) + " shares last-level cache " +
                  cpu_list_text(shared) + " with target rank" + (targets.size() > 1 ? "s " : " ") +
                  names + " on " + draft.host + ", which has " + std::to_string(draft.host_llcs) +
                  ": their weight streams then share one die's path to memory; mpirun "
                  "--map-by l3cache:PE=" +
                  std::to_string(std::max(1, draft.threads)) +
                  " --bind-to core puts each rank under a cache of its own");
  }
  return out;
}

}  // namespace ssd
