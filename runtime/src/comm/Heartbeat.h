//===- Heartbeat.h - Each rank's sign of life to its neighbour ------------===//
//
// A rank that is stopped, or whose host the network no longer reaches, has
// not died: the launcher sees nothing, and its peers would wait in their
// next collective until the collective timeout. So the ranks form a ring:
// each sends its successor a UDP datagram every second, from the
// watchdog's thread (whatever the rank's own thread is doing), and expects
// one from its predecessor; a predecessor silent for the heartbeat timeout
// ends the job. Every rank is some rank's predecessor, so any one silent
// rank, or a host cut off, is noticed.
//
// Datagrams, not MPI messages: MPI from a second thread would need
// MPI_THREAD_MULTIPLE, and messages on pairs of ranks the model never
// joins, sent in a job's last moments, leave MPI_Finalize waiting forever
// with UCX over TCP (a rank still flushing a connection its peer has
// closed). A datagram carries the job's nonce and the sender's rank, so a
// stray one is ignored; a rank watches its predecessor only once it has
// heard it, so a network that drops the datagrams (a firewall) turns the
// heartbeat off, with a warning, rather than ending a healthy job.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_RUNTIME_COMM_HEARTBEAT_H
#define CLEAVE_RUNTIME_COMM_HEARTBEAT_H

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::rt::comm {

/// Where a rank's heartbeats reach it: its host (by name, for messages),
/// the host's IPv4 addresses (the loopback one apart) and its socket's
/// port (0: none). Plain bytes, gathered from every rank at start.
struct HeartbeatAddress {
  static constexpr int kMaxAddresses = 8;
  char host[64];
  uint32_t ipv4[kMaxAddresses]; // network byte order
  uint64_t token;               // random; rank 0's is the job's nonce
  uint16_t port;
  uint8_t count;
};

class Heartbeat {
public:
  /// Opens this rank's socket; false, with the reason, where it cannot.
  bool open(std::string &why);
  /// Where this rank listens (after open).
  HeartbeatAddress address() const;
  /// Starts beating: this rank's place in the ring, every rank's address,
  /// the job's nonce (the same on every rank) and the timeout.
  void start(int rank, std::vector<HeartbeatAddress> all, uint64_t nonce,
             double timeoutSeconds, int64_t nowMs);
  bool on() const { return socket >= 0 && !everyone.empty(); }

  /// What a turn of the watchdog found.
  enum class Finding {
    Nothing,
    Silent,  // the predecessor, once heard, has been silent too long
    Unheard, // the predecessor was never heard: the heartbeat is off
  };
  /// One turn (every ~100 ms): takes what came, sends when due, and says
  /// whether the predecessor has fallen silent.
  Finding beat(int64_t nowMs);
  /// Tells the successor this rank leaves the job (it then stops
  /// expecting heartbeats from it), and closes the socket.
  void leave();

  int predecessorRank() const { return predecessor; }
  double timeout() const { return timeoutSeconds; }

private:
  void send(uint32_t kind);

  int socket = -1;
  int rank = 0, successor = 0, predecessor = 0;
  std::vector<HeartbeatAddress> everyone;
  uint64_t nonce = 0;
  double timeoutSeconds = 10;
  int64_t startedMs = 0, lastHeardMs = 0, lastSentMs = 0;
  bool heard = false, predecessorLeft = false, reportedUnheard = false;
};

} // namespace cleave::rt::comm

#endif // CLEAVE_RUNTIME_COMM_HEARTBEAT_H
