// core/heartbeat_socket.h — a UDP side channel for heartbeats (core/liveness.h).
//
// Why: heartbeats sent as MPI messages share Open MPI's TCP connection with the bulk data of
// the collectives; on a slow link a 1-byte heartbeat waits behind every byte queued before
// it (a 100 MB allreduce at 200 Mbit/s: seconds), and a live peer is declared dead. A UDP
// datagram has its own socket: it waits at most in the link's queue. Liveness counts a peer
// as heard when either path delivers, so a host whose UDP is filtered keeps the MPI path.
//
// A datagram carries "kolo", the sender's rank and the job's token (rank 0's random number),
// so stray datagrams from another job are ignored.
//
// Ownership: owns its socket. Thread safety: set_peers() before any send()/poll(); after
// that send() and poll() may be called from several threads at once; neither blocks.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kolo {

class HeartbeatSocket {
 public:
  struct Endpoint {
    uint32_t ipv4 = 0;  // network byte order; 0 = unreachable by UDP (heartbeats over MPI only)
    uint16_t port = 0;  // network byte order
  };

  // A non-blocking UDP socket on every address, an ephemeral port; null if none can be made.
  static std::unique_ptr<HeartbeatSocket> open();
  ~HeartbeatSocket();
  HeartbeatSocket(const HeartbeatSocket&) = delete;
  HeartbeatSocket& operator=(const HeartbeatSocket&) = delete;

  // What peers should send to: this host's IPv4 address on the interface between hosts
  // (`interface` if given: Config::heartbeat_interface(), KOLO_NETWORK_INTERFACE or Open MPI's
  // btl_tcp_if_include; else the host name's address, else the first non-loopback interface
  // with one) and the socket's port.
  Endpoint local_endpoint(const std::string& interface) const;

  // Every rank's endpoint (index = rank), this job's token and this rank.
  void set_peers(std::vector<Endpoint> peers, uint64_t token, int rank);
  void send(int peer);    // best effort
  // One valid datagram, if any arrived. `arrived` (optional): when the kernel received it
  // (SO_TIMESTAMPNS, on the steady clock; the read time where the kernel gives none), so a
  // receiver that was starved or stopped still knows when a peer last spoke.
  bool poll(int* from, std::chrono::steady_clock::time_point* arrived = nullptr);
  // True once, after the kernel dropped datagrams for want of buffer space (SO_RXQ_OVFL):
  // the arrival times read since may omit later ones.
  bool take_dropped();

 private:
  explicit HeartbeatSocket(int fd) : fd_(fd) {}
  int fd_;
  std::vector<Endpoint> peers_;
  uint64_t token_ = 0;
  int rank_ = 0;
  uint32_t drops_seen_ = 0;  // the kernel's drop counter at the last datagram read
  bool dropped_ = false;
};

// A random 64-bit number (rank 0's becomes the job's token).
uint64_t random_token();

}  // namespace kolo
