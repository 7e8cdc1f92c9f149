// Host name and network interfaces (core/host_info.h).
#include "core/host_info.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>

namespace kolo {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "?";
  return buf;
}

std::vector<std::string> interface_names() {
  std::vector<std::string> names;
  struct if_nameindex* list = if_nameindex();
  if (list == nullptr) return names;
  for (struct if_nameindex* i = list; i->if_index != 0; ++i) names.emplace_back(i->if_name);
  if_freenameindex(list);
  return names;
}

std::string interface_addresses(const std::string& name) {
  std::string out;
  struct ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return out;
  for (struct ifaddrs* a = all; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || name != a->ifa_name) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<struct sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
    if (!out.empty()) out += ",";
    out += text;
  }
  freeifaddrs(all);
  return out;
}

Status check_interface(const std::string& name) {
  const auto names = interface_names();
  if (std::find(names.begin(), names.end(), name) != names.end()) return Status::ok();
  std::string have;
  for (const auto& n : names) have += (have.empty() ? "" : ", ") + n;
  return Status::invalid_argument("KOLO_NETWORK_INTERFACE=" + name + ": host " + host_name() +
                                  " has no such interface (it has: " + have + ")");
}

int cpus_for_ranks() {
  const long online = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return static_cast<int>(online);
  const int mine = CPU_COUNT(&set);
  return mine > 1 ? mine : static_cast<int>(online);
}

}  // namespace kolo
