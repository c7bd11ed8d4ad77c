/// \file beast.hpp
/// The Boost.Asio/Beast headers the tracker's network files use, in one place so they can be a
/// precompiled header (they cost ~15 s per translation unit otherwise).
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

namespace webtune::tracker {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = boost::asio::ip::tcp;
}  // namespace webtune::tracker
