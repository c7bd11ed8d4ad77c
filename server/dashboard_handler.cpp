/// \file dashboard_handler.cpp
/// Routes a request to the API, /metrics or the static files, after the viewer token check.
#include "server/dashboard_handler.hpp"

#include <unistd.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <memory>

#include "server/api_router.hpp"
#include "server/event_feed.hpp"
#include "server/metrics.hpp"
#include "server/static_files.hpp"
#include "server/viewer_access.hpp"
#include "tracker/tracker_state.hpp"
#include "tuner/records.hpp"

namespace webtune::server {

namespace fs = std::filesystem;

namespace {

struct Dashboard : std::enable_shared_from_this<Dashboard> {
  explicit Dashboard(const DashboardOptions& o)
      : store(o.db.empty() ? nullptr : std::make_unique<RecordStore>(o.db)),
        router(store.get()),
        files(o.web_root),
        token(o.viewer_token) {}

  std::optional<tracker::HttpResponse> handle(const tracker::HttpRequest& request,
                                              const tracker::TrackerState* live) {
    const std::optional<RequestTarget> target = parse_target(request.target);
    if (!target) return json_error(400, "malformed request target");
    if (!viewer_allowed(request, *target, token)) {
      tracker::HttpResponse r = json_error(401,
                                           "a viewer token is needed: ?token=, "
                                           "Authorization: Bearer, or the dashboard cookie");
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
      return r;
    }
    if (target->path == "/api/events") return events(request);
    if (target->path == "/api" || target->path.starts_with("/api/"))
      return router.route(request.method, *target, live);
    if (request.method != "GET") {
      tracker::HttpResponse r = json_error(405, "only GET is served here");
      r.headers.emplace_back("Allow", "GET");
      return r;
    }
    if (target->path == "/metrics") {
      tracker::HttpResponse r;
      r.content_type = kPrometheusContentType;
      if (live) {
        const boost::json::object summary = live->summary(tracker::Clock::now());
        r.body = prometheus_text(&summary, store.get());
      } else {
        r.body = prometheus_text(nullptr, store.get());
      }
      return r;
    }
    std::optional<tracker::HttpResponse> file = files.serve(target->path);
    if (!file) return json_error(404, "not found: " + target->path);
    // Opened with ?token=: keep the token in a cookie for the page's scripts and API calls.
    if (!token.empty() && target->query.count("token"))
      file->headers.emplace_back("Set-Cookie", viewer_cookie(token));
    return file;
  }

  /// GET /api/events: a TrialFeed of its own per connection, polled by the session.
  tracker::HttpResponse events(const tracker::HttpRequest& request) {
    if (request.method != "GET") {
      tracker::HttpResponse r = json_error(405, "the API is read-only: use GET");
      r.headers.emplace_back("Allow", "GET");
      return r;
    }
    if (!store) return json_error(404, "no records file: no events");
    auto feed = std::make_shared<TrialFeed>(*store, store->path());
    tracker::HttpResponse r;
    r.content_type = "text/event-stream";
    r.stream = std::make_shared<tracker::EventStream>();
    r.stream->interval = std::chrono::milliseconds(250);
    // The feed reads through this dashboard's store: keep the dashboard alive with it.
    r.stream->poll = [self = shared_from_this(), feed]() -> std::optional<std::string> {
      return feed->poll();
    };
    return r;
  }

  std::unique_ptr<RecordStore> store;
  ApiRouter router;
  StaticFiles files;
  std::string token;
};

}  // namespace

fs::path default_web_root() {
  if (const char* env = std::getenv("WEBTUNE_WEB_ROOT"); env && *env) return env;
#ifdef WEBTUNE_BUILD_WEB_ROOT
  std::error_code ec;
  if (fs::is_directory(WEBTUNE_BUILD_WEB_ROOT, ec)) return WEBTUNE_BUILD_WEB_ROOT;
#endif
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return "web";
  return fs::path(std::string(buffer, static_cast<size_t>(n))).parent_path() / ".." / "share" /
         "webtune" / "web";
}

tracker::HttpHandler make_dashboard_handler(const DashboardOptions& options) {
  auto dashboard = std::make_shared<Dashboard>(options);
  return [dashboard](const tracker::HttpRequest& request, const tracker::TrackerState* live) {
    return dashboard->handle(request, live);
  };
}

}  // namespace webtune::server
