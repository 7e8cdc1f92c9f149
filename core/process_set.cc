// The process-set registry and KOLO_PROCESS_SETS parsing (see core/process_set.h).
#include "core/process_set.h"

#include <algorithm>
#include <cctype>

namespace kolo {
namespace {

std::string trimmed(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t at = 0;
  for (;;) {
    const size_t next = s.find(sep, at);
    parts.push_back(s.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) return parts;
    at = next + 1;
  }
}

Status bad_token(const std::string& text, const std::string& token, const std::string& why) {
  return Status::invalid_argument("KOLO_PROCESS_SETS=\"" + text + "\": " + why + " at \"" + token +
                                  "\"; expected sets of ranks separated by ';', ranks by ',' (e.g. \"0,1;2,3\")");
}

}  // namespace

Status parse_process_sets(const std::string& text, std::vector<std::vector<int>>* out) {
  out->clear();
  if (trimmed(text).empty()) return Status::ok();
  for (const std::string& set_text : split(text, ';')) {
    if (trimmed(set_text).empty()) return bad_token(text, set_text, "an empty set");
    std::vector<int> ranks;
    for (const std::string& raw : split(set_text, ',')) {
      const std::string token = trimmed(raw);
      if (token.empty()) return bad_token(text, set_text, "an empty rank");
      if (token.size() > 9 || !std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return bad_token(text, token, "not a rank (a whole number >= 0)");
      ranks.push_back(std::stoi(token));
    }
    out->push_back(std::move(ranks));
  }
  return Status::ok();
}

Status check_process_set_ranks(const std::vector<int>& ranks, int world_size, const std::string& what,
                               std::vector<int>* sorted) {
  if (ranks.empty()) return Status::invalid_argument(what + ": a process set needs at least one rank");
  std::vector<int> s = ranks;
  std::sort(s.begin(), s.end());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] < 0 || s[i] >= world_size)
      return Status::invalid_argument(what + ": rank " + std::to_string(s[i]) +
                                      " is not a rank of the job (ranks are 0.." + std::to_string(world_size - 1) +
                                      ")");
    if (i > 0 && s[i] == s[i - 1])
      return Status::invalid_argument(what + ": rank " + std::to_string(s[i]) + " is listed twice");
  }
  *sorted = std::move(s);
  return Status::ok();
}

std::string describe_process_set(int32_t id, const std::vector<int>& ranks) {
  std::string s = "process set " + std::to_string(id) + " (ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s + ")";
}

int32_t ProcessSetRegistry::reserve(std::vector<int> sorted_ranks) {
  std::lock_guard<std::mutex> lock(mu_);
  const int32_t id = next_id_++;
  sets_[id] = Entry{std::move(sorted_ranks), false};
  ++version_;
  return id;
}

void ProcessSetRegistry::activate(int32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sets_.find(id);
  if (it != sets_.end()) it->second.active = true;
  ++version_;
}

bool ProcessSetRegistry::erase(int32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  ++version_;
  return sets_.erase(id) > 0;
}

std::optional<std::vector<int>> ProcessSetRegistry::ranks(int32_t id, bool* active) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sets_.find(id);
  if (it == sets_.end()) return std::nullopt;
  if (active) *active = it->second.active;
  return it->second.ranks;
}

std::map<int32_t, std::vector<int>> ProcessSetRegistry::active_sets() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<int32_t, std::vector<int>> out;
  for (const auto& [id, e] : sets_)
    if (e.active) out.emplace(id, e.ranks);
  return out;
}

uint64_t ProcessSetRegistry::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

}  // namespace kolo
