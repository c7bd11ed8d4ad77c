/// \file model_api_test.cpp
/// The dashboard API's whole-model measurements (server/api_router.hpp, /api/models's
/// "measurements"; issue 16 item 3) over a real SQLite records file: the values the Models panel
/// shows, nulls where a number does not exist, newest first.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <filesystem>

#include "server/api_router.hpp"
#include "server/url.hpp"
#include "tuner/records.hpp"

namespace webtune::server {
namespace {

namespace bj = boost::json;
namespace fs = std::filesystem;

TEST(ModelApi, ModelsListsRecentMeasurementsBesideTheEstimate) {
  const fs::path dir = fs::path(::testing::TempDir()) / "webtune_model_api";
  fs::remove_all(dir);
  fs::create_directories(dir);
  RecordStore store((dir / "records.db").string());
  ApiRouter router(&store);
  auto get = [&router] {
    tracker::HttpResponse r = router.route("GET", *parse_target("/api/models"), nullptr);
    EXPECT_EQ(r.status, 200) << r.body;
    return bj::parse(r.body).as_object();
  };
  // An empty records file lists nothing (and still the model runs).
  EXPECT_TRUE(get().at("measurements").as_array().empty());
  EXPECT_TRUE(get().at("models").as_array().empty());

  ModelMeasurementRecord m;
  m.created = 1.7e9;
  m.model = "resnet18-webgl2";
  m.manifest_sha256 = std::string(64, 'c');
  m.model_sha256 = std::string(64, 'd');
  m.target = "webgl2";
  m.device_key = "webgl2:gpu-a:chrome-1:linux";
  m.agent = "tab-1";
  m.seed = 7;
  m.costs = {0.012, 0.010, 0.011};
  m.estimated_ms = 8.0;
  store.add_model_measurement(m);
  ModelMeasurementRecord failed = m;
  failed.created = 1.7e9 + 60;
  failed.model = "mobilenet-wasm";
  failed.target = "wasm";
  failed.agent = "tab-2";
  failed.error = MeasureErrorNo::kCompileHost;
  failed.message = "package changed: manifest sha256 aa != bb";
  failed.estimated_ms.reset();
  store.add_model_measurement(failed);

  const bj::object body = get();
  const bj::array& list = body.at("measurements").as_array();
  ASSERT_EQ(list.size(), 2u);
  // Newest first.
  const bj::object& f = list[0].as_object();
  EXPECT_EQ(f.at("model").as_string(), "mobilenet-wasm");
  EXPECT_EQ(f.at("error_no").as_int64(), 2);
  EXPECT_EQ(f.at("error").as_string(), "COMPILE_HOST");
  EXPECT_EQ(f.at("message").as_string(), "package changed: manifest sha256 aa != bb");
  EXPECT_TRUE(f.at("median_ms").is_null());
  EXPECT_TRUE(f.at("min_ms").is_null());
  EXPECT_TRUE(f.at("estimated_ms").is_null());
  EXPECT_TRUE(f.at("measured_over_estimate").is_null());
  EXPECT_EQ(f.at("runs").to_number<uint64_t>(), 0u);

  const bj::object& r = list[1].as_object();
  EXPECT_EQ(r.at("model").as_string(), "resnet18-webgl2");
  EXPECT_EQ(r.at("target").as_string(), "webgl2");
  EXPECT_EQ(r.at("device_key").as_string(), "webgl2:gpu-a:chrome-1:linux");
  EXPECT_EQ(r.at("agent").as_string(), "tab-1");
  EXPECT_EQ(r.at("manifest_sha256").as_string(), std::string(64, 'c'));
  EXPECT_EQ(r.at("model_sha256").as_string(), std::string(64, 'd'));
  EXPECT_EQ(r.at("seed").to_number<uint64_t>(), 7u);
  EXPECT_DOUBLE_EQ(r.at("created").as_double(), 1.7e9);
  EXPECT_EQ(r.at("runs").to_number<uint64_t>(), 3u);
  EXPECT_DOUBLE_EQ(r.at("median_ms").as_double(), 11.0);
  EXPECT_DOUBLE_EQ(r.at("min_ms").as_double(), 10.0);
  EXPECT_DOUBLE_EQ(r.at("estimated_ms").as_double(), 8.0);
  EXPECT_DOUBLE_EQ(r.at("measured_over_estimate").as_double(), 11.0 / 8.0);
  EXPECT_EQ(r.at("error_no").as_int64(), 0);
  EXPECT_EQ(r.at("error").as_string(), "NO_ERROR");

  // At most kRecentModelMeasurements are listed, the newest.
  for (int i = 0; i < kRecentModelMeasurements; ++i) {
    m.model = "bulk-" + std::to_string(i);
    m.created = 1.8e9 + i;
    store.add_model_measurement(m);
  }
  const bj::object recent = get();
  const bj::array& many = recent.at("measurements").as_array();
  ASSERT_EQ(many.size(), static_cast<size_t>(kRecentModelMeasurements));
  EXPECT_EQ(many[0].at("model").as_string(),
            "bulk-" + std::to_string(kRecentModelMeasurements - 1));

  // Without a records file: an empty list, not an error.
  ApiRouter bare(nullptr);
  tracker::HttpResponse none = bare.route("GET", *parse_target("/api/models"), nullptr);
  EXPECT_EQ(none.status, 200);
  EXPECT_TRUE(bj::parse(none.body).at("measurements").as_array().empty());
}

}  // namespace
}  // namespace webtune::server
