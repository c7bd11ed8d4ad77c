/// \file beast.hpp
/// The Boost.Asio/Beast headers the tracker's network files use, in one place so they can be a
/// precompiled header (they cost ~15 s per translation unit otherwise).
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

namespace webtune::tracker {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = boost::asio::ip::tcp;
namespace ssl = boost::asio::ssl;
/// The two transports a tracker connection can have: plain TCP, or TLS over TCP.
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
}  // namespace webtune::tracker
