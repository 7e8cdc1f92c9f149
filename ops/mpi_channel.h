// ops/mpi_channel.h — the ControlChannel over MPI point-to-point messages on kolo's own
// control communicator: requests travel to rank 0 with one tag, response lists from rank 0
// with another. Sends are non-blocking (MPI_Isend), the channel owns their buffers until
// MPI reports them complete; receives use matched probes (MPI_Improbe/MPI_Mrecv), safe
// under MPI_THREAD_MULTIPLE.
//
// Thread safety: coordinator thread only, except send_heartbeat and poll_heartbeat, which
// keep no state and may be called from any thread at once under MPI_THREAD_MULTIPLE (the
// liveness listener thread, core/liveness.h).
#pragma once

#include <mpi.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"

namespace kolo::ops {

class MpiChannel final : public ControlChannel {
 public:
  explicit MpiChannel(MPI_Comm control_comm);
  ~MpiChannel() override;
  Status send_to_root(std::vector<uint8_t> message) override;
  Status send_to_all(std::vector<uint8_t> message) override;
  Status poll_from_peers(int* source, std::vector<uint8_t>* message, bool* got) override;
  Status poll_from_root(std::vector<uint8_t>* message, bool* got) override;
  Status progress(size_t* in_flight) override;
  Status send_heartbeat(int peer, const std::string& notice) override;
  Status poll_heartbeat(int* source, std::string* notice, bool* got) override;
  // Leaves queued sends to MPI instead of cancelling them (a peer is dead: MPI_Cancel may
  // wait for it); their buffers are kept until the process exits, as MPI may still read them.
  void abandon();

 private:
  Status send(std::shared_ptr<std::vector<uint8_t>> bytes, int dest, int tag);
  Status poll(int source, int tag, int* from, std::vector<uint8_t>* message, bool* got);

  struct InFlight {
    std::shared_ptr<std::vector<uint8_t>> bytes;
    MPI_Request request;
  };
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::deque<InFlight> sends_;
};

}  // namespace kolo::ops
