//===- Heartbeat.cpp - Each rank's sign of life to its neighbour ----------===//

#include "Heartbeat.h"

#include <arpa/inet.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace cleave::rt::comm;

namespace {

/// How often a rank tells its successor it is alive.
constexpr int64_t kIntervalMs = 1000;
/// How long a rank waits to hear its predecessor at all before it gives
/// up watching it (at least the timeout).
constexpr int64_t kFirstHeardWithinMs = 15000;

enum : uint32_t { kAlive = 1, kLeaving = 2 };

struct Datagram {
  uint64_t nonce;
  uint32_t rank;
  uint32_t kind;
};

} // namespace

bool Heartbeat::open(std::string &why) {
  socket = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in any = {};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  if (socket < 0 ||
      bind(socket, reinterpret_cast<sockaddr *>(&any), sizeof any) != 0) {
    why = std::string("cannot open a UDP socket: ") + std::strerror(errno);
    if (socket >= 0)
      ::close(socket);
    socket = -1;
    return false;
  }
  return true;
}

HeartbeatAddress Heartbeat::address() const {
  HeartbeatAddress a = {};
  gethostname(a.host, sizeof a.host - 1);
  sockaddr_in bound = {};
  socklen_t length = sizeof bound;
  if (socket >= 0 &&
      getsockname(socket, reinterpret_cast<sockaddr *>(&bound), &length) == 0)
    a.port = bound.sin_port;
  ifaddrs *list = nullptr;
  if (getifaddrs(&list) != 0)
    return a;
  for (ifaddrs *i = list; i && a.count < HeartbeatAddress::kMaxAddresses;
       i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
        (i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK))
      a.ipv4[a.count++] =
          reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr.s_addr;
  freeifaddrs(list);
  return a;
}

void Heartbeat::start(int rank, std::vector<HeartbeatAddress> all,
                      uint64_t nonce, double timeoutSeconds, int64_t nowMs) {
  this->rank = rank;
  everyone = std::move(all);
  int size = static_cast<int>(everyone.size());
  successor = (rank + 1) % size;
  predecessor = (rank + size - 1) % size;
  this->nonce = nonce;
  this->timeoutSeconds = timeoutSeconds;
  startedMs = lastHeardMs = nowMs;
  lastSentMs = nowMs - kIntervalMs; // the first one at once
}

void Heartbeat::send(uint32_t kind) {
  const HeartbeatAddress &to = everyone[successor];
  Datagram d = {nonce, static_cast<uint32_t>(rank), kind};
  sockaddr_in peer = {};
  peer.sin_family = AF_INET;
  peer.sin_port = to.port;
  // Every address the successor's host has, and this host's loopback in
  // case it is this host: only the right process takes it (nonce, rank).
  for (int i = 0; i <= to.count; ++i) {
    peer.sin_addr.s_addr = i < to.count ? to.ipv4[i] : htonl(INADDR_LOOPBACK);
    sendto(socket, &d, sizeof d, MSG_DONTWAIT,
           reinterpret_cast<sockaddr *>(&peer), sizeof peer);
  }
}

Heartbeat::Finding Heartbeat::beat(int64_t nowMs) {
  if (!on())
    return Finding::Nothing;
  Datagram d;
  ssize_t got;
  while ((got = recv(socket, &d, sizeof d, MSG_DONTWAIT)) >= 0)
    if (got == sizeof d && d.nonce == nonce &&
        d.rank == static_cast<uint32_t>(predecessor)) {
      if (d.kind == kLeaving)
        predecessorLeft = true;
      heard = true;
      lastHeardMs = nowMs;
    }
  if (nowMs - lastSentMs >= kIntervalMs) {
    send(kAlive);
    lastSentMs = nowMs;
  }
  if (predecessorLeft)
    return Finding::Nothing;
  if (heard)
    return nowMs - lastHeardMs > timeoutSeconds * 1000 ? Finding::Silent
                                                       : Finding::Nothing;
  int64_t waitMs =
      std::max<int64_t>(kFirstHeardWithinMs, int64_t(timeoutSeconds * 1000));
  if (!reportedUnheard && nowMs - startedMs > waitMs) {
    reportedUnheard = true;
    return Finding::Unheard;
  }
  return Finding::Nothing;
}

void Heartbeat::leave() {
  if (!on())
    return;
  // Three, since a datagram may be lost; the successor otherwise takes
  // this rank's leaving for silence only if it outlives it by the timeout.
  for (int i = 0; i < 3; ++i)
    send(kLeaving);
  ::close(socket);
  socket = -1;
}
