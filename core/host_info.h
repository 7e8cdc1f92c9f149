// core/host_info.h — what this process can learn about its host without MPI: the host name
// and the network interfaces, for KOLO_NETWORK_INTERFACE and the KOLO_VERBOSE report; and
// how many CPUs its ranks share, for the wait policies.
//
// Thread safety: plain functions over the OS; callable from any thread.
#pragma once

#include <string>
#include <vector>

#include "kolo/status.h"

namespace kolo {

// gethostname(), or "?" if it fails.
std::string host_name();

// Names of this host's network interfaces, in the kernel's order.
std::vector<std::string> interface_names();

// The IPv4 addresses of `name`, comma-separated ("" if it has none or does not exist).
std::string interface_addresses(const std::string& name);

// OK if this host has an interface `name`; otherwise an error naming the host, the
// interface and the interfaces it does have (for KOLO_NETWORK_INTERFACE).
Status check_interface(const std::string& name);

// How many CPUs this host's ranks share: the CPUs this process may run on (its affinity),
// or the machine's online CPUs where the process is bound to one (mpirun binds each of two
// ranks to a core by default; one CPU then says nothing about the peers'). A host with
// more local ranks than this is oversubscribed: a waiting rank must give its CPU away.
int cpus_for_ranks();

}  // namespace kolo
