// kolo-timeline — summarises a KOLO_TIMELINE trace: where the time went per phase, and
// which rank was the straggler (last to submit a tensor) how often and by how much.
//   kolo-timeline trace.json
// Accepts a trace cut short by a killed job (missing closing bracket).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

using nlohmann::json;

namespace {

json load(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  auto parsed = json::parse(text, nullptr, false);
  if (!parsed.is_discarded()) return parsed;
  // Cut short: keep every complete event line and close the array.
  const size_t last = text.rfind("},");
  if (last == std::string::npos) throw std::runtime_error(path + " holds no complete event");
  parsed = json::parse(text.substr(0, last + 1) + "]", nullptr, false);
  if (parsed.is_discarded()) throw std::runtime_error(path + " is not a Chrome trace (JSON array of events)");
  return parsed;
}

struct PhaseTotal {
  double us = 0;
  long count = 0;
};

struct Straggle {
  long times_last = 0;
  double lag_us = 0;  // summed: how much later than the first rank
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kolo-timeline TRACE.json\n");
    return 2;
  }
  json events;
  try {
    events = load(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kolo-timeline: %s\n", e.what());
    return 1;
  }
  std::map<int, std::vector<std::pair<std::string, double>>> open;  // tid -> stack of (phase, start)
  std::map<std::string, PhaseTotal> phases;
  std::map<int, std::vector<std::pair<int, double>>> ready;  // tid -> (rank, ts) during NEGOTIATE
  std::map<int, Straggle> stragglers;
  long negotiations = 0;
  for (const auto& e : events) {
    const std::string ph = e.value("ph", "");
    const int tid = e.value("tid", 0);
    const double ts = e.value("ts", 0.0);
    if (ph == "B") {
      open[tid].push_back({e.value("name", ""), ts});
    } else if (ph == "E" && !open[tid].empty()) {
      auto [name, start] = open[tid].back();
      open[tid].pop_back();
      phases[name].us += ts - start;
      phases[name].count++;
      if (name == "NEGOTIATE" && !ready[tid].empty()) {
        auto& r = ready[tid];
        auto first = std::min_element(r.begin(), r.end(), [](auto& a, auto& b) { return a.second < b.second; });
        auto last = std::max_element(r.begin(), r.end(), [](auto& a, auto& b) { return a.second < b.second; });
        if (r.size() > 1) {
          stragglers[last->first].times_last++;
          stragglers[last->first].lag_us += last->second - first->second;
          negotiations++;
        }
        r.clear();
      }
    } else if (ph == "i") {
      int rank = -1;
      if (std::sscanf(e.value("name", "").c_str(), "rank %d ready", &rank) == 1) ready[tid].push_back({rank, ts});
    }
  }
  std::printf("%-28s %10s %14s %12s\n", "phase", "count", "total (ms)", "mean (us)");
  for (const auto& [name, t] : phases)
    std::printf("%-28s %10ld %14.3f %12.1f\n", name.c_str(), t.count, t.us / 1e3, t.count ? t.us / t.count : 0.0);
  std::printf("\nstraggler (last rank to submit), over %ld negotiations:\n", negotiations);
  std::printf("%-8s %12s %10s %16s\n", "rank", "times last", "share", "mean lag (us)");
  for (const auto& [rank, s] : stragglers)
    std::printf("%-8d %12ld %9.1f%% %16.1f\n", rank, s.times_last, 100.0 * s.times_last / std::max(1L, negotiations),
                s.lag_us / std::max(1L, s.times_last));
  return 0;
}
