/// \file connection_slot.hpp
/// One open connection as the tracker's connection cap counts it: the listener takes a slot per
/// accepted socket, the HTTP session holds it and hands it to the WebSocket session on upgrade,
/// and the count drops when the last holder is destroyed. Single-threaded (the tracker's one
/// io_context thread).
#pragma once

#include <cstddef>
#include <utility>

namespace webtune::tracker {

class ConnectionSlot {
 public:
  ConnectionSlot() = default;
  explicit ConnectionSlot(size_t* count) : count_(count) {
    if (count_) ++*count_;
  }
  ConnectionSlot(ConnectionSlot&& other) noexcept : count_(std::exchange(other.count_, nullptr)) {}
  ConnectionSlot& operator=(ConnectionSlot&& other) noexcept {
    if (this != &other) {
      release();
      count_ = std::exchange(other.count_, nullptr);
    }
    return *this;
  }
  ConnectionSlot(const ConnectionSlot&) = delete;
  ConnectionSlot& operator=(const ConnectionSlot&) = delete;
  ~ConnectionSlot() { release(); }

 private:
  void release() {
    if (count_) --*count_;
    count_ = nullptr;
  }
  size_t* count_ = nullptr;
};

}  // namespace webtune::tracker
