// service/telemetry.h: the counts a run reports, as the Status RPC reads them and as the text the
// exposer serves (checked by promtool in serve_test.cc), and the ready listeners.
#include "prewarm/service/telemetry.h"

#include <thread>

#include "gtest/gtest.h"

namespace prewarm {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(TelemetryTest, CountsFollowThePlanAndTheKeysDone) {
  Telemetry t("0.1.0", "hiprtc test", "gfx942");
  t.SetPlan({{"fp8_bmm", 3}, {"sparse_decode", 1}});
  t.KeyDone("fp8_bmm", KeyState::kCompiled, 0.25, "");
  t.KeyDone("fp8_bmm", KeyState::kCached, 0, "");
  t.KeyDone("fp8_bmm", KeyState::kFailed, 1.5, "fp8_bmm m_exact=3: boom");
  const ProgressSnapshot s = t.Snapshot();
  const LauncherProgressCounts& c = s.launchers.at("fp8_bmm");
  EXPECT_EQ(c.planned, 3);
  EXPECT_EQ(c.compiled, 1);
  EXPECT_EQ(c.cached, 1);
  EXPECT_EQ(c.failed, 1);
  EXPECT_EQ(s.launchers.at("sparse_decode").planned, 1);
  EXPECT_EQ(s.last_error, "fp8_bmm: fp8_bmm m_exact=3: boom");  // by launcher
  EXPECT_FALSE(s.ready);
  const std::string text = t.Text();
  EXPECT_TRUE(Has(text, "prewarm_variants{launcher=\"fp8_bmm\",state=\"planned\"} 3")) << text;
  EXPECT_TRUE(Has(text, "prewarm_variants{launcher=\"fp8_bmm\",state=\"compiled\"} 1"));
  EXPECT_TRUE(Has(text, "prewarm_variants{launcher=\"fp8_bmm\",state=\"failed\"} 1"));
  EXPECT_TRUE(Has(text, "prewarm_variants{launcher=\"sparse_decode\",state=\"cached\"} 0"));
  // Compile time is observed for what compiled: not a cache hit, not a failure.
  EXPECT_TRUE(Has(text, "prewarm_compile_seconds_count{launcher=\"fp8_bmm\"} 1")) << text;
  EXPECT_TRUE(Has(text, "prewarm_compile_seconds_sum{launcher=\"fp8_bmm\"} 0.25")) << text;
  EXPECT_TRUE(Has(text, "prewarm_ready 0"));
  EXPECT_TRUE(Has(text,
                  "prewarm_build_info{arch=\"gfx942\",toolchain=\"hiprtc test\","
                  "version=\"0.1.0\"} 1"))
      << text;
  // A new plan starts the counts again.
  t.SetPlan({{"fp8_bmm", 2}});
  EXPECT_EQ(t.Snapshot().launchers.at("fp8_bmm").compiled, 0);
}

TEST(TelemetryTest, ReadyListenersHearEveryChangeAndOnlyChanges) {
  Telemetry t("0.1.0", "nvrtc test", "sm_90");
  std::vector<bool> heard;
  t.OnReadyChange([&](bool ready) { heard.push_back(ready); });
  t.SetReady(true);
  t.SetReady(true);
  t.SetReady(false);
  EXPECT_EQ(heard, (std::vector<bool>{true, false}));
  EXPECT_TRUE(Has(t.Text(), "prewarm_ready 0"));
  t.SetReady(true);
  EXPECT_TRUE(t.Snapshot().ready);
  EXPECT_TRUE(Has(t.Text(), "prewarm_ready 1"));
}

TEST(TelemetryTest, RejectionsCacheBytesPhasesAndSpillsAreExported) {
  Telemetry t("0.1.0", "hiprtc test", "gfx950");
  t.SetPlan({{"fp8_bmm", 1}});
  t.SetRejected(RejectReason::kBadChecksum, 2);
  t.SetRejected(RejectReason::kBadChecksum, 5);  // the store's running total, not an increment
  t.SetCacheBytes(123456);
  t.SetPhaseSeconds("compile", 2.5);
  t.SetSpilling({{"fp8_bmm", 1}});
  t.SetPhase("serving");
  const std::string text = t.Text();
  EXPECT_TRUE(Has(text, "prewarm_cache_entries_rejected_total{reason=\"bad_checksum\"} 5")) << text;
  EXPECT_TRUE(Has(text, "prewarm_cache_bytes 123456"));
  EXPECT_TRUE(Has(text, "prewarm_run_seconds{phase=\"compile\"} 2.5"));
  EXPECT_TRUE(Has(text, "prewarm_variants_spilling{launcher=\"fp8_bmm\"} 1"));
  EXPECT_EQ(t.Snapshot().phase, "serving");
}

TEST(TelemetryTest, ManyThreadsReportingAtOnceLoseNothing) {
  Telemetry t("0.1.0", "hiprtc test", "gfx942");
  t.SetPlan({{"fp8_bmm", 800}});
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 100; ++k) {
        t.KeyDone("fp8_bmm", KeyState::kCompiled, 0.01, "");
        (void)t.Snapshot();
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(t.Snapshot().launchers.at("fp8_bmm").compiled, 800);
  EXPECT_TRUE(Has(t.Text(), "prewarm_variants{launcher=\"fp8_bmm\",state=\"compiled\"} 800"));
}

}  // namespace
}  // namespace prewarm
