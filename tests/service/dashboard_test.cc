// Every query of dashboards/prewarm-startup.json, run by a real Prometheus that scrapes a real
// `prewarm run --serve` as the Prometheus Operator would, with the pod's namespace on every
// series: no query may fail; with $namespace that namespace (or All) every prewarm panel shows
// data, with another it shows none (the kube-state-metrics panels may be empty here: there is
// no cluster).
#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/background.h"
#include "tests/testing/cli.h"
#include "tests/testing/net.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

// $namespace as Grafana gives it to Prometheus: a regex (All is .*, the dashboard's allValue).
std::string Substitute(std::string expr, const std::string& ns) {
  for (const auto& [var, value] :
       {std::pair<std::string, std::string>{"$__rate_interval", "1m"}, {"$namespace", ns}}) {
    for (size_t at; (at = expr.find(var)) != std::string::npos;)
      expr.replace(at, var.size(), value);
  }
  return expr;
}

TEST(DashboardTest, EveryPanelQueryRunsAndPrewarmPanelsHaveData) {
  const nlohmann::json dash = nlohmann::json::parse(std::ifstream(PREWARM_DASHBOARD));
  ASSERT_EQ(dash["schemaVersion"], 39);
  testing::TempDir dir;
  testing::Background p(
      {testing::PrewarmBinary(), "run", "--serve", "--arch", "gfx90a", "--kv-cache-dtype", "fp8",
       "--max-num-seqs", "4", "--cache-dir", dir.path() + "/cache", "--metrics-address",
       "127.0.0.1:0", "--grpc-address", "127.0.0.1:0"},
      dir.path());
  auto metrics_line = p.WaitForStderr("metrics on ", 20);
  ASSERT_TRUE(metrics_line.has_value()) << p.Stderr();
  ASSERT_TRUE(p.WaitForStderr("serving until SIGTERM", testing::kCompileWatchdogS)) << p.Stderr();
  const testing::Prometheus prom(dir.path(), testing::PortAfter(*metrics_line),
                                 {{"namespace", "ml"}, {"pod", "dsv32-0"}});
  // Wait for a few scrapes: increase() over 1m needs two samples.
  bool have = false;
  for (int i = 0; i < 60 && !have; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const auto j =
        nlohmann::json::parse(prom.Query("count_over_time(prewarm_ready[1m])"), nullptr, false);
    have = j.is_object() && !j["data"]["result"].empty() &&
           std::stoi(j["data"]["result"][0]["value"][1].get<std::string>()) >= 3;
  }
  ASSERT_TRUE(have) << prom.Stderr();
  int queries = 0;
  for (const auto& panel : dash["panels"]) {
    for (const auto& target : panel["targets"]) {
      for (const std::string ns : {".*", "ml", "(ml|other)", "other"}) {
        const std::string expr = Substitute(target["expr"].get<std::string>(), ns);
        const auto j = nlohmann::json::parse(prom.Query(expr), nullptr, false);
        ++queries;
        ASSERT_TRUE(j.is_object()) << panel["title"] << ": no answer for " << expr;
        EXPECT_EQ(j.value("status", ""), "success")
            << panel["title"] << ": " << expr << ": " << j.dump();
        if (expr.find("prewarm_") == std::string::npos) continue;
        const nlohmann::json& result = j["data"]["result"];
        if (ns != "other") {
          EXPECT_FALSE(result.empty()) << panel["title"] << ": no data for " << expr;
          continue;
        }
        // Another namespace: nothing, or only a stat's "or vector(0)" fallback.
        const bool fallback = expr.find("or vector(0)") != std::string::npos &&
                              result.size() == 1 && result[0]["metric"].empty() &&
                              result[0]["value"][1] == "0";
        EXPECT_TRUE(result.empty() || fallback)
            << panel["title"] << ": another namespace's pods in " << expr << ": " << result.dump();
      }
    }
  }
  EXPECT_GE(queries, 4 * 12);
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(5), 0);
}

}  // namespace
}  // namespace prewarm
