// The sockets cpp-httplib (0.11, Debian 12's) keeps to itself: the connection of a request, and
// the listening socket.
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

// httplib listens with a backlog of 5 (compiled into the library): a burst of clients connecting
// at once would see dropped SYNs and second-long retries. Linux lets listen() on a listening
// socket raise its backlog; this finds the socket listening on `port` and does that.
void raise_listen_backlog(int port, int backlog);

class ConnectionWatch {
 public:
  ConnectionWatch(std::string remote_addr, int remote_port, int local_port)
      : remote_addr_(std::move(remote_addr)), remote_port_(remote_port), local_port_(local_port) {}
  // True once the peer has closed (or reset) the connection. Not finding the socket counts as open.
  bool closed();

 private:
  int find_socket() const;

  std::string remote_addr_;
  int remote_port_, local_port_;
  int fd_ = -2;  // -2: not looked up yet; -1: not found
};

}  // namespace onnx_genai::server
