/// \file agent_command.cpp
/// `webtune agent --tracker ws://127.0.0.1:9190/ws --key gles [--token T]`: a native OpenGL
/// agent. It measures one job at a time in an isolated GL worker process (a hung or crashed
/// kernel costs one trial, not the agent) and reconnects with backoff when the tracker goes away.
/// It also answers model jobs (MODEL_JOBS.md, native_agent/model_job.hpp): a package fetched from
/// the tracker's /models/ into the cache folder (--cache-dir), measured end to end in the same
/// GL worker.
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <cstdlib>
#include <memory>

#include "commands.hpp"
#include "native_agent/device_class.hpp"
#include "native_agent/isolated_runtime.hpp"
#include "native_agent/model_job.hpp"
#include "tracker/agent_connection.hpp"
#include "tracker/tracker_client.hpp"

namespace webtune::cli {

namespace {

struct AgentArgs {
  std::string tracker = "ws://127.0.0.1:9190/ws", key = "gles", token, name, ca_file;
  std::string cache_dir = default_model_cache_dir();
  pid_t parent_pid = 0;  ///< when set, the agent ends with that process (an embedded farm)
};

/// An agent of an embedded farm must not outlive the `webtune tune` that started it, even when
/// that one is SIGKILLed: it would hold the terminal's (or a test runner's) output pipe open and
/// reconnect to a dead tracker forever. PR_SET_PDEATHSIG sends SIGTERM when the parent dies;
/// the getppid() check covers a parent that died before the call.
void exit_with_parent(pid_t parent) {
  if (parent <= 0) return;
  if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) spdlog::warn("agent: PR_SET_PDEATHSIG failed");
  if (::getppid() != parent) {
    spdlog::info("agent: parent {} is gone; exiting", parent);
    std::exit(0);
  }
}

/// A model job: download (here, in the agent process) then load and time (in the GL worker),
/// both within the job's timeout_s; all_cost is the whole job's seconds.
MeasureResult run_model_job(IsolatedRuntime& runtime, const AgentArgs& args,
                            const boost::json::value& json) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  MeasureResult result;
  tracker::ModelMeasureInput input;
  try {
    input = tracker::ModelMeasureInput::from_json(json);
  } catch (const std::exception& e) {
    result = MeasureResult::failure(MeasureErrorNo::kInstantiation,
                                    std::string("bad model input: ") + e.what());
  }
  if (result.ok()) {
    try {
      const std::string dir =
          fetch_model_package(args.tracker, input, args.cache_dir, input.options.timeout_s);
      const double left = input.options.timeout_s - elapsed();
      if (left <= 0)
        throw ModelJobError(MeasureErrorNo::kRunTimeout,
                            "the package download used the whole timeout");
      result = runtime.run_request(model_worker_request(dir, input, left), left, "model job");
    } catch (const ModelJobError& e) {
      result = MeasureResult::failure(e.error(), e.what());
    } catch (const std::exception& e) {
      result = MeasureResult::failure(MeasureErrorNo::kCompileHost, e.what());
    }
  }
  if (!result.ok())
    spdlog::warn("model job {}: {}: {}", input.model, error_name(result.error), result.message);
  result.all_cost = elapsed();
  result.timestamp =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return result;
}

boost::json::object run_input(IsolatedRuntime& runtime, const AgentArgs& args,
                              const boost::json::value& input) {
  MeasureResult result;
  try {
    // Throws for a `kind` other than "kernel" or "model" (the tracker refuses those at submit;
    // an exception here would end the agent's job thread).
    if (tracker::is_model_input(input)) return run_model_job(runtime, args, input).to_json();
    result = runtime.measure(MeasureInput::from_json(input));
  } catch (const std::exception& e) {
    result = MeasureResult::failure(MeasureErrorNo::kInstantiation,
                                    std::string("bad measure input: ") + e.what());
  }
  return result.to_json();
}

void run_agent(const AgentArgs& args) {
  exit_with_parent(args.parent_pid);
  if (!args.ca_file.empty()) tracker::set_tracker_ca_file(args.ca_file);
  // Fork the GL worker before any thread starts.
  auto runtime = std::make_shared<IsolatedRuntime>(run_model_worker_request);
  const GlDeviceInfo& device = runtime->info();
  tracker::AgentOptions options;
  options.url = args.tracker;
  // A family ("gles") becomes the key of this device class (native_agent/device_class.hpp),
  // e.g. gles:llvmpipe:mesa-22.3.6:linux-x86_64:intel-xeon-platinum-8481c:2t; a key with a ':'
  // is used as given.
  const HostInfo host = HostInfo::current();
  options.keys = {args.key.find(':') == std::string::npos ? device_class_key(args.key, device, host)
                                                          : args.key};
  options.token = args.token;
  options.name = args.name.empty() ? "native-agent/" + device.short_name() : args.name;
  options.device = device_class_json(device, host);
  options.job_kinds = {"kernel", "model"};
  spdlog::info("agent: {} ({}) serving key {}", device.renderer, device.version, options.keys[0]);

  boost::asio::io_context ioc;
  tracker::AgentConnection connection(ioc, options,
                                      [runtime, &args](const boost::json::value& input) {
                                        return run_input(*runtime, args, input);
                                      });
  boost::asio::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    connection.stop();
    ioc.stop();
  });
  connection.start();
  ioc.run();
}

}  // namespace

void add_agent_command(CLI::App& app) {
  auto args = std::make_shared<AgentArgs>();
  CLI::App* cmd = app.add_subcommand("agent", "Run a native OpenGL ES agent for the tracker");
  cmd->add_option("--tracker", args->tracker, "ws://HOST:PORT/ws or wss://HOST:PORT/ws")
      ->capture_default_str();
  cmd->add_option("--key", args->key, "key, or key prefix completed with the device name")
      ->capture_default_str();
  cmd->add_option("--token", args->token, "agent token (or $WEBTUNE_AGENT_TOKEN)")
      ->envname("WEBTUNE_AGENT_TOKEN");
  cmd->add_option("--ca-file", args->ca_file,
                  "CA certificate(s) that signed a wss:// tracker's certificate (or "
                  "$WEBTUNE_CA_FILE)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--name", args->name, "name shown in the farm");
  cmd->add_option("--cache-dir", args->cache_dir,
                  "folder of the model packages fetched for model jobs, one subfolder per "
                  "manifest hash (or $WEBTUNE_MODEL_CACHE)")
      ->capture_default_str();
  cmd->add_option("--parent-pid", args->parent_pid,
                  "exit when this process (the program that started the agent) ends");
  cmd->callback([args] { run_agent(*args); });
}

}  // namespace webtune::cli
