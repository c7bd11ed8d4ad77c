/// \file agent_page_test.cpp
/// The tracker's static files for /agent (tracker/agent_page.hpp), without networking: what is
/// served, with which headers, and that no request escapes the agent root.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tracker/agent_page.hpp"

namespace webtune::tracker {
namespace {

namespace fs = std::filesystem;

std::string header(const AgentPageResponse& r, const std::string& name) {
  for (const auto& [n, v] : r.headers)
    if (n == name) return v;
  return {};
}

class AgentPageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The process id and the test's name: ctest runs these tests as parallel processes, and
    // gtest's random seed (the former suffix) comes from the clock, so two processes started in
    // the same millisecond shared one folder and one removed it under the other.
    base_ = fs::path(::testing::TempDir()) /
            ("agent_page_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_ / "root" / "sub");
    write(base_ / "root" / "index.html", "<!doctype html>index");
    write(base_ / "root" / "agent.mjs", "export {}");
    write(base_ / "root" / "sub" / "x.wasm", "wasm");
    write(base_ / "root" / ".hidden", "secret");
    write(base_ / "secret.txt", "outside");
    fs::create_directories(base_ / "runtime");
    write(base_ / "runtime" / "webgl2.mjs", "export const runner = 1;");
    fs::create_symlink(base_ / "secret.txt", base_ / "root" / "link.txt");
    root_ = (base_ / "root").string();
  }
  void TearDown() override { fs::remove_all(base_); }
  static void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

  fs::path base_;
  std::string root_;
};

TEST_F(AgentPageTest, ServesThePageAndModulesWithIsolationHeaders) {
  for (const char* target : {"/agent", "/agent/", "/agent?token=abc&name=x"}) {
    AgentPageResponse r = agent_page_response(target, root_);
    EXPECT_EQ(r.status, 200) << target;
    EXPECT_EQ(r.body, "<!doctype html>index") << target;
    EXPECT_EQ(header(r, "Content-Type"), "text/html; charset=utf-8");
    EXPECT_EQ(header(r, "Cross-Origin-Opener-Policy"), "same-origin");
    EXPECT_EQ(header(r, "Cross-Origin-Embedder-Policy"), "require-corp");
  }
  AgentPageResponse module = agent_page_response("/agent/agent.mjs", root_);
  EXPECT_EQ(module.status, 200);
  EXPECT_EQ(header(module, "Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(header(agent_page_response("/agent/sub/x.wasm", root_), "Content-Type"),
            "application/wasm");
  AgentPageResponse head = agent_page_response("/agent/agent.mjs", root_, true, true);
  EXPECT_TRUE(head.body.empty());
  EXPECT_EQ(header(head, "Content-Length"), "9");
  EXPECT_EQ(agent_page_response("/agent/agent.mjs", root_, false).status, 405);
}

TEST_F(AgentPageTest, ServesTheSharedKernelRunnersUnderRuntime) {
  // browser-agent/webgl2.mjs imports ../runtime/webgl2.mjs: /agent/webgl2.mjs → /runtime/...
  EXPECT_TRUE(is_agent_page_target("/runtime/webgl2.mjs"));
  AgentPageResponse r = agent_page_response("/runtime/webgl2.mjs", root_);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "export const runner = 1;");
  EXPECT_EQ(header(r, "Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(header(r, "Cross-Origin-Embedder-Policy"), "require-corp");
}

TEST_F(AgentPageTest, RefusesTraversalHiddenFilesAndLinksOutOfTheRoot) {
  for (const char* target :
       {"/agent/../secret.txt", "/agent/sub/../../secret.txt", "/agent/%2e%2e/secret.txt",
        "/agent/%2E%2E%2Fsecret.txt", "/agent/%252e%252e/secret.txt", "/agent/..%5csecret.txt",
        "/agent/.hidden", "/agent//etc/passwd", "/agent/sub//x.wasm", "/agent/link.txt",
        "/agent/missing.js", "/agent/sub", "/agent/%zz", "/agent/a%00b", "/agent/sub/"}) {
    AgentPageResponse r = agent_page_response(target, root_);
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(r.body.find("outside"), std::string::npos) << target;
    EXPECT_EQ(r.body.find("secret"), std::string::npos) << target;
  }
  for (const char* target : {"/runtime", "/runtime/", "/runtime/../secret.txt",
                             "/runtime/%2e%2e/secret.txt", "/runtime/missing.mjs"}) {
    EXPECT_EQ(agent_page_response(target, root_).status, 404) << target;
  }
  EXPECT_FALSE(is_agent_page_target("/runtimex"));
  EXPECT_FALSE(is_agent_page_target("/agentx"));
  EXPECT_FALSE(is_agent_page_target("/ws"));
  EXPECT_TRUE(is_agent_page_target("/agent?token=1"));
}

// Model packages under /models/<name>/: the test's base directory serves as the models
// directory, so "root" is a package name there and secret.txt a plain file.
TEST_F(AgentPageTest, ServesModelPackagesUnderTheirName) {
  const std::string models = base_.string();
  AgentPageResponse page = model_page_response("/models/root/", models);
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.body, "<!doctype html>index");
  EXPECT_EQ(header(page, "Cross-Origin-Embedder-Policy"), "require-corp");
  EXPECT_EQ(model_page_response("/models/root/sub/x.wasm?x=1", models).body, "wasm");
  AgentPageResponse redirect = model_page_response("/models/root", models);
  EXPECT_EQ(redirect.status, 308);
  EXPECT_EQ(header(redirect, "Location"), "/models/root/");
  AgentPageResponse head = model_page_response("/models/root/agent.mjs", models, true, true);
  EXPECT_TRUE(head.body.empty());
  EXPECT_EQ(header(head, "Content-Length"), "9");
  EXPECT_EQ(model_page_response("/models/root/agent.mjs", models, false).status, 405);
  AgentPageResponse none = model_page_response("/models/root/", "");
  EXPECT_EQ(none.status, 404);
  EXPECT_NE(none.body.find("--models"), std::string::npos);
  for (const char* target :
       {"/models/", "/models", "/models/../root/index.html", "/models/%2e%2e/secret.txt",
        "/models/root/../secret.txt", "/models/root/.hidden", "/models/root/link.txt",
        "/models/.hidden/x", "/models/missing/", "/models/root%2fsub/x.wasm", "/models/secret.txt/",
        "/models/root//index.html"}) {
    AgentPageResponse r = model_page_response(target, models);
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(r.body.find("outside"), std::string::npos) << target;
  }
  EXPECT_TRUE(is_model_page_target("/models/x/"));
  EXPECT_FALSE(is_model_page_target("/modelsx"));
}

}  // namespace
}  // namespace webtune::tracker
