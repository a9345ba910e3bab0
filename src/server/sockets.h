// The sockets cpp-httplib (0.11, Debian 12's) keeps to itself: the listening socket, and the
// connection of a request.
//
// ConnectionWatch: whether the client of a request has closed its connection, while the request
// still runs.
// cpp-httplib (0.11, Debian 12's) notices a closed connection only when a write to it fails, and
// a request waiting for its first token, or a non-streamed one, writes nothing until the end: a
// client that gave up would keep its request, and its KV blocks, to the last token. The watch
// finds the request's socket among the process's descriptors (the TCP connection with the
// request's local port and peer address) and peeks at it.
#pragma once

#include <string>

namespace onnx_genai::server {

// The socket listening on `port` (httplib keeps it to itself), or -1. The server raises its
// backlog (httplib's is 5, compiled in: a burst of clients would see dropped SYNs and
// second-long retries; Linux lets listen() on a listening socket change it) and shuts it down to
// stop accepting while requests drain (httplib's own stop() also cuts streams short).
int find_listening_socket(int port);

class ConnectionWatch {
 public:
  // Finds the socket at once: a socket reset by its peer has no peer address to find it by.
  ConnectionWatch(std::string remote_addr, int remote_port, int local_port);
  // True once the peer has closed (or reset) the connection. Not finding the socket counts as open.
  bool closed();

 private:
  int find_socket() const;

  std::string remote_addr_;
  int remote_port_, local_port_;
  int fd_;  // -1: not found
};

}  // namespace onnx_genai::server
