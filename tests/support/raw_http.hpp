/// \file raw_http.hpp
/// One HTTP request written as raw bytes to 127.0.0.1:port over a real socket, for tests that
/// must control every header (Host, Origin, an upgrade) the way a hostile peer would. Header-only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace webtune::testing_support {

/// Sends `request` and reads the answer until the server closes the connection, or only up to
/// the end of the status line when `status_line_only` (an upgrade that succeeds stays open).
/// Returns what was read ("connect failed" when nothing listens).
inline std::string raw_http(uint16_t port, const std::string& request,
                            bool status_line_only = false) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "connect failed";
  }
  (void)!::write(fd, request.data(), request.size());
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) {
    response.append(buffer, n);
    if (status_line_only && response.find("\r\n") != std::string::npos) break;
  }
  ::close(fd);
  return response;
}

}  // namespace webtune::testing_support
