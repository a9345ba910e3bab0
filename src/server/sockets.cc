#include "server/sockets.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <functional>

namespace onnx_genai::server {

namespace {

// The numeric host and port of a socket address, as httplib reports them (getnameinfo).
bool host_and_port(const sockaddr_storage& addr, socklen_t len, std::string& host, int& port) {
  char name[NI_MAXHOST];
  char service[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, name, sizeof name, service, sizeof service,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  host = name;
  port = std::atoi(service);
  return true;
}

// The first of the process's descriptors that `match` accepts; -1 when none does.
int find_descriptor(const std::function<bool(int)>& match) {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (match(static_cast<int>(fd))) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

}  // namespace

int find_listening_socket(int port) {
  return find_descriptor([port](int fd) {
    int listening = 0;
    socklen_t size = sizeof listening;
    sockaddr_storage local{};
    socklen_t local_len = sizeof local;
    std::string host;
    int local_port = 0;
    return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &size) == 0 && listening &&
           getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
           host_and_port(local, local_len, host, local_port) && local_port == port;
  });
}

ConnectionWatch::ConnectionWatch(std::string remote_addr, int remote_port, int local_port)
    : remote_addr_(std::move(remote_addr)), remote_port_(remote_port), local_port_(local_port), fd_(find_socket()) {}

int ConnectionWatch::find_socket() const {
  return find_descriptor([this](int fd) {
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    std::string local_host, peer_host;
    int local_port = 0, peer_port = 0;
    return getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 &&
           getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
           host_and_port(local, local_len, local_host, local_port) && host_and_port(peer, peer_len, peer_host, peer_port) &&
           local_port == local_port_ && peer_port == remote_port_ && peer_host == remote_addr_;
  });
}

bool ConnectionWatch::closed() {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  // Readable: either the peer's next pipelined request or its end of stream.
  char byte;
  return recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

}  // namespace onnx_genai::server
