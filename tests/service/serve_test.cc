// prewarm run --serve (and verify --serve) against real clients: prewarm probe, a gRPC health
// client (Check and Watch), prewarm.v1.Status/Get, promtool on the metrics, and a real Prometheus
// server scraping.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "prewarm/service/proto/status.grpc.pb.h"
#include "prewarm/util/subprocess.h"
#include "tests/testing/background.h"
#include "tests/testing/cli.h"
#include "tests/testing/net.h"
#include "tests/testing/small_cache.h"
#include "tests/testing/temp_dir.h"

namespace prewarm {
namespace {

namespace fs = std::filesystem;
using grpc::health::v1::HealthCheckResponse;

std::vector<std::string> ServeArgs(const std::string& cache, std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {testing::PrewarmBinary(),
                                "run",
                                "--serve",
                                "--arch",
                                "gfx90a",
                                "--kv-cache-dtype",
                                "fp8",
                                "--max-num-seqs",
                                "4",
                                "--cache-dir",
                                cache,
                                "--metrics-address",
                                "127.0.0.1:0",
                                "--grpc-address",
                                "127.0.0.1:0",
                                "--progress-interval",
                                "0"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int Probe(int port, const std::string& service = "prewarm") {
  return testing::RunPrewarm({"probe", "--addr", "127.0.0.1:" + std::to_string(port), "--service",
                              service, "--timeout", "2"})
      .exit_code;
}

using testing::FreePort;
std::string Http(const std::string& url) { return testing::HttpGet(url); }

struct Ports {
  int metrics = -1, grpc = -1;
};
Ports WaitForPorts(testing::Background& p) {
  Ports ports;
  if (auto m = p.WaitForStderr("metrics on ", 20)) ports.metrics = testing::PortAfter(*m);
  if (auto g = p.WaitForStderr("gRPC health and status on ", 20))
    ports.grpc = testing::PortAfter(*g);
  return ports;
}

// A loopback socket bound to a free port and listening (the kernel completes handshakes; nobody
// accepts or answers), optionally with SO_REUSEPORT as a gRPC server binds. The fd and its port.
std::pair<int, int> HoldLoopbackPort(bool reuse_port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  if (reuse_port) ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return {fd, 0};
  ::listen(fd, 8);
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return {fd, ntohs(a.sin_port)};
}

TEST(ServeTest, HealthFollowsTheCacheFromStartToShutdown) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  // Slow compiles hold the NOT_SERVING window open.
  testing::Background p(ServeArgs(cache, {"--jobs", "1", "--verify-interval", "0.3"}), dir.path(),
                        {{"PREWARM_TEST_COMPILE_DELAY_MS", "400"}});
  ASSERT_TRUE(p.started());
  const Ports ports = WaitForPorts(p);
  ASSERT_GT(ports.grpc, 0) << p.Stderr();
  ASSERT_GT(ports.metrics, 0) << p.Stderr();

  EXPECT_EQ(Probe(ports.grpc), 4) << "NOT_SERVING while keys are missing";
  EXPECT_EQ(Probe(ports.grpc, ""), 4) << "the empty name mirrors prewarm";
  EXPECT_EQ(Probe(ports.grpc, "no-such-service"), 3) << "an unknown service is an RPC failure";

  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(ports.grpc),
                                     grpc::InsecureChannelCredentials());
  // Watch from a second thread: it must see NOT_SERVING, then SERVING.
  std::mutex mu;
  std::vector<int> seen;
  grpc::ClientContext watch_ctx;
  std::thread watcher([&] {
    auto stub = grpc::health::v1::Health::NewStub(channel);
    grpc::health::v1::HealthCheckRequest req;
    req.set_service("prewarm");
    auto reader = stub->Watch(&watch_ctx, req);
    HealthCheckResponse resp;
    while (reader->Read(&resp)) {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(resp.status());
    }
  });
  // A failed ASSERT below returns early: cancel the stream and join, or the thread's destructor
  // aborts the whole test binary ("Subprocess aborted", hiding the failure's message).
  struct JoinOnExit {
    grpc::ClientContext& ctx;
    std::thread& thread;
    ~JoinOnExit() {
      if (!thread.joinable()) return;
      ctx.TryCancel();
      thread.join();
    }
  } join_on_exit{watch_ctx, watcher};
  {
    auto status = prewarm::v1::Status::NewStub(channel);
    grpc::ClientContext ctx;
    prewarm::v1::GetResponse resp;
    ASSERT_TRUE(status->Get(&ctx, prewarm::v1::GetRequest(), &resp).ok());
    EXPECT_FALSE(resp.ready());
  }
  ASSERT_TRUE(p.WaitForStderr("serving until SIGTERM", testing::kCompileWatchdogS)) << p.Stderr();
  EXPECT_EQ(Probe(ports.grpc), 0);
  EXPECT_EQ(Probe(ports.grpc, ""), 0);
  {
    auto status = prewarm::v1::Status::NewStub(channel);
    grpc::ClientContext ctx;
    prewarm::v1::GetResponse resp;
    ASSERT_TRUE(status->Get(&ctx, prewarm::v1::GetRequest(), &resp).ok());
    EXPECT_TRUE(resp.ready());
    EXPECT_EQ(resp.phase(), "serving");
    ASSERT_EQ(resp.launchers_size(), 1);
    EXPECT_EQ(resp.launchers(0).launcher(), "fp8_bmm");
    EXPECT_EQ(resp.launchers(0).planned(), 8);
    EXPECT_EQ(resp.launchers(0).done(), 8);
    EXPECT_EQ(resp.launchers(0).failed(), 0);
  }
  EXPECT_NE(Http("http://127.0.0.1:" + std::to_string(ports.metrics) + "/metrics")
                .find("prewarm_ready 1"),
            std::string::npos);

  // Damage an entry while serving: the next re-check turns health NOT_SERVING, and the sidecar
  // compiles it again (slowly here: 400 ms), then SERVING (RunServeCompilesADamagedEntryAgain).
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    if (e.path().extension() == ".co") {
      fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
      fs::resize_file(e.path(), 100);
      break;
    }
  }
  bool went_down = false;
  for (int i = 0; i < 400 && !went_down; ++i) {
    went_down = Probe(ports.grpc) == 4;
    if (!went_down) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(went_down) << p.Stderr();
  ASSERT_TRUE(
      p.WaitForStderr("every planned key is valid now; SERVING", testing::kCompileWatchdogS))
      << p.Stderr();
  EXPECT_EQ(Probe(ports.grpc), 0);
  EXPECT_NE(Http("http://127.0.0.1:" + std::to_string(ports.metrics) + "/metrics")
                .find("prewarm_ready 1"),
            std::string::npos);

  // A server that waited for its open Watch stream to end would never exit: the wait below is
  // a hang guard, not a speed test.
  p.Signal(SIGTERM);
  const std::optional<int> code = p.Wait(30);
  ASSERT_TRUE(code.has_value()) << "still running 30 s after SIGTERM with a Watch stream open";
  EXPECT_EQ(*code, 0) << p.Stderr();
  watch_ctx.TryCancel();
  watcher.join();
  std::lock_guard<std::mutex> lock(mu);
  // NOT_SERVING, SERVING, NOT_SERVING (the damage), SERVING (compiled again), in that order.
  const std::vector<int> want = {HealthCheckResponse::NOT_SERVING, HealthCheckResponse::SERVING,
                                 HealthCheckResponse::NOT_SERVING, HealthCheckResponse::SERVING};
  std::vector<int> changes;
  for (int s : seen) {
    if (changes.empty() || changes.back() != s) changes.push_back(s);
  }
  // The shutdown sets NOT_SERVING for the open stream, where it gets there before the end.
  if (changes.size() == want.size() + 1) changes.pop_back();
  EXPECT_EQ(changes, want);
  EXPECT_EQ(Probe(ports.grpc), 2) << "a dead port is a connect failure";
}

TEST(ServeTest, SigtermDuringACompileStopsQuicklyLeavesNothingPartialAndARerunCompletes) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  testing::Background p(ServeArgs(cache, {"--jobs", "2"}), dir.path(),
                        {{"PREWARM_TEST_COMPILE_DELAY_MS", "5000"}});
  ASSERT_TRUE(p.WaitForStderr("run: 8 keys", 20)) << p.Stderr();
  // Both compile workers started: each holds its first job for 5 s.
  std::vector<int> workers;
  for (int i = 0; i < 400 && workers.size() < 2; ++i) {
    workers = testing::ChildrenOf(p.pid(), "worker");
    if (workers.size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(workers.size(), 2u) << p.Stderr();
  p.Signal(SIGTERM);
  const std::optional<int> code = p.Wait(30);
  ASSERT_TRUE(code.has_value()) << "still running 30 s after SIGTERM";
  EXPECT_NE(p.Stderr().find("stopped by a signal"), std::string::npos) << p.Stderr();
  // It did not wait for the compiles: they were killed, so none of them wrote an entry.
  for (int w : workers) {
    std::ifstream cmd("/proc/" + std::to_string(w) + "/cmdline");
    const std::string argv((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    EXPECT_EQ(argv.find("worker"), std::string::npos) << "worker " << w << " outlived the run";
  }
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    EXPECT_NE(e.path().extension(), ".co") << "a compile finished before the stop: " << e.path();
  }
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "left behind: " << e.path();
  }
  SubprocessResult r = testing::RunPrewarm({"run", "--arch", "gfx90a", "--kv-cache-dtype", "fp8",
                                            "--max-num-seqs", "4", "--cache-dir", cache});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("8 keys: 8 compiled, 0 cached"), std::string::npos) << r.stdout_text;
}

TEST(MetricsTest, PromtoolAcceptsTheLiveEndpointAndTheTextfile) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  testing::Background p(ServeArgs(cache), dir.path());
  const Ports ports = WaitForPorts(p);
  ASSERT_TRUE(p.WaitForStderr("serving until SIGTERM", testing::kCompileWatchdogS)) << p.Stderr();
  const std::string live = Http("http://127.0.0.1:" + std::to_string(ports.metrics) + "/metrics");
  ASSERT_NE(live.find("prewarm_build_info{"), std::string::npos) << live;
  for (const std::string& text : {live, ReadText(cache + "/prewarm/metrics.prom")}) {
    SubprocessOptions o;
    o.stdin_data = text;
    auto r = RunSubprocess({"promtool", "check", "metrics"}, o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit_code, 0) << r->stdout_text << r->stderr_text;
    EXPECT_EQ(r->stdout_text + r->stderr_text, "") << "promtool complained";
  }
  for (const char* metric :
       {"prewarm_variants{", "prewarm_compile_seconds_bucket{",
        "prewarm_run_seconds{phase=\"total\"}", "prewarm_cache_bytes ",
        "prewarm_cache_entries_rejected_total{reason=\"bad_checksum\"}", "prewarm_ready 1"}) {
    EXPECT_NE(live.find(metric), std::string::npos) << metric;
  }
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(5), 0);
}

TEST(MetricsTest, AnAddressInUseIsExitOneAndAFailedPushIsOnlyAWarning) {
  testing::TempDir dir;
  // Hold a port, then ask prewarm to serve metrics on it.
  const auto [fd, port] = HoldLoopbackPort(false);
  ASSERT_GT(port, 0);
  const std::string busy = "127.0.0.1:" + std::to_string(port);
  const std::vector<std::string> base = {
      "run", "--arch",      "gfx90a",         "--kv-cache-dtype", "fp8", "--max-num-seqs",
      "1",   "--cache-dir", dir.path() + "/c"};
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--metrics-address", busy});
  SubprocessResult r = testing::RunPrewarm(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.stderr_text.find("cannot serve metrics on " + busy), std::string::npos)
      << r.stderr_text;
  ::close(fd);
  // A Pushgateway that is not there: the run still succeeds, and says so once, in words (it
  // said "HTTP -7", libcurl's error code negated).
  args = base;
  const std::string nobody = "127.0.0.1:" + std::to_string(FreePort());
  args.insert(args.end(), {"--pushgateway", "http://" + nobody});
  r = testing::RunPrewarm(args);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  const size_t first = r.stderr_text.find("push to the Pushgateway");
  EXPECT_NE(first, std::string::npos) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("push to the Pushgateway", first + 1), std::string::npos);
  EXPECT_NE(r.stderr_text.find("failed: cannot connect to " + nobody + ": Connection refused"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("HTTP -"), std::string::npos) << r.stderr_text;
}

TEST(ServeTest, AGrpcPortInUseIsExitOneEvenWhenItsHolderSharesPorts) {
  testing::TempDir dir;
  // Hold a port the way another gRPC server would: with SO_REUSEPORT, which lets any later
  // socket that also asks for it bind the same port.
  const auto [fd, port] = HoldLoopbackPort(true);
  ASSERT_GT(port, 0);
  const std::string busy = "127.0.0.1:" + std::to_string(port);
  SubprocessResult r =
      testing::RunPrewarm({"run", "--arch", "gfx90a", "--kv-cache-dtype", "fp8", "--max-num-seqs",
                           "1", "--cache-dir", dir.path() + "/c", "--grpc-address", busy});
  ::close(fd);
  EXPECT_EQ(r.exit_code, 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("cannot serve gRPC on " + busy), std::string::npos) << r.stderr_text;
}

// A Pushgateway that accepts the connection and never answers: the run ends anyway, after the
// push deadline (10 s), with one warning, exit 0.
TEST(MetricsTest, ASilentPushgatewayCostsTheDeadlineNotTheRun) {
  testing::TempDir dir;
  const auto [fd, port] = HoldLoopbackPort(false);  // handshakes complete; nobody answers
  ASSERT_GT(port, 0);
  SubprocessResult r = testing::RunPrewarm(
      {"run", "--arch", "gfx90a", "--kv-cache-dtype", "fp8", "--max-num-seqs", "1", "--cache-dir",
       dir.path() + "/c", "--pushgateway", "http://127.0.0.1:" + std::to_string(port)});
  ::close(fd);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("did not finish within 10 s; continuing without it"),
            std::string::npos)
      << r.stderr_text;
}

// Idle connections (a port scanner, a stuck client) must not stall the scrape: with 200 of them
// open, /metrics still answers within 3 s (it used to wait for civetweb's 30 s request timeout
// with two).
TEST(MetricsTest, IdleConnectionsDoNotStallTheScrape) {
  testing::TempDir dir;
  testing::Background p(ServeArgs(dir.path() + "/cache"), dir.path());
  ASSERT_TRUE(p.started());
  const Ports ports = WaitForPorts(p);
  ASSERT_GT(ports.metrics, 0) << p.Stderr();
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(ports.metrics));
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    idle.push_back(fd);
  }
  auto r = RunSubprocess({"curl", "-s", "--max-time", "3",
                          "http://127.0.0.1:" + std::to_string(ports.metrics) + "/metrics"});
  for (int fd : idle) ::close(fd);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->stdout_text.find("prewarm_"), std::string::npos)
      << "no answer within 3 s: " << r->stdout_text << r->stderr_text;
}

// A real Pushgateway on a free port, its state in `dir` (Debian's default file would leak between
// runs); Ready() waits for it to answer.
struct Pushgateway {
  explicit Pushgateway(const std::string& dir)
      : port(FreePort()),
        base("http://127.0.0.1:" + std::to_string(port)),
        gw({"prometheus-pushgateway", "--web.listen-address=127.0.0.1:" + std::to_string(port),
            "--persistence.file=" + dir + "/pg.data"},
           dir) {}
  bool Ready() {
    if (!gw.started()) return false;
    for (int i = 0; i < 50; ++i) {
      if (Http(base + "/-/ready").find("OK") != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  int port;
  std::string base;
  testing::Background gw;
};

TEST(MetricsTest, TheFinalMetricsArePushedToARealPushgateway) {
  testing::TempDir dir;
  Pushgateway pg(dir.path());
  ASSERT_TRUE(pg.Ready()) << pg.gw.Stderr();
  const std::string& base = pg.base;
  testing::Background& gw = pg.gw;
  SubprocessResult r =
      testing::RunPrewarm({"run", "--arch", "gfx90a", "--kv-cache-dtype", "fp8", "--max-num-seqs",
                           "4", "--cache-dir", dir.path() + "/c", "--pushgateway", base});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("Pushgateway"), std::string::npos) << r.stderr_text;
  const std::string pushed = Http(base + "/metrics");
  EXPECT_NE(pushed.find("prewarm_variants{"), std::string::npos) << pushed.substr(0, 2000);
  EXPECT_NE(pushed.find("prewarm_ready{"), std::string::npos);
  EXPECT_NE(pushed.find("state=\"compiled\""), std::string::npos);
  EXPECT_NE(pushed.find("job=\"prewarm\""), std::string::npos);
  gw.Signal(SIGTERM);
  gw.Wait(5);
}

// Each pod pushes to a group of its own (a push replaces its whole group: with every pod in the
// group {job="prewarm", instance=""}, the last init pod to finish erased the others). The chart
// gives PREWARM_PUSHGATEWAY_GROUP=namespace=NS,pod=NAME from the downward API; without it the
// group is instance=<host name>. Two pods of one namespace, then a host, against a real
// Pushgateway: three groups, each with its own pod's values.
TEST(MetricsTest, EachPodPushesToAGroupOfItsOwn) {
  testing::TempDir dir;
  Pushgateway pg(dir.path());
  ASSERT_TRUE(pg.Ready()) << pg.gw.Stderr();
  const std::string& base = pg.base;
  testing::Background& gw = pg.gw;
  const std::vector<std::string> run = {
      "run", "--arch",      "gfx90a",          "--kv-cache-dtype", "fp8", "--max-num-seqs",
      "4",   "--cache-dir", dir.path() + "/c", "--pushgateway",    base};
  // Pod a compiles; pod b, on the same volume, finds it all cached; then a plain host run.
  for (const char* pod : {"dsv32-7f9c-a", "dsv32-7f9c-b"}) {
    SubprocessResult r = testing::RunPrewarm(
        run, {{"PREWARM_PUSHGATEWAY_GROUP", std::string("namespace=ml,pod=") + pod}});
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_EQ(r.stderr_text.find("Pushgateway"), std::string::npos) << r.stderr_text;
  }
  SubprocessResult r = testing::RunPrewarm(run, {{"PREWARM_PUSHGATEWAY_GROUP", std::nullopt}});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof(host) - 1), 0);

  // The groups, by the Pushgateway's own API, and what each holds.
  const nlohmann::json groups =
      nlohmann::json::parse(Http(base + "/api/v1/metrics"), nullptr, false);
  ASSERT_TRUE(groups.is_object()) << Http(base + "/api/v1/metrics");
  std::map<std::string, nlohmann::json> by_key;  // the grouping labels, as JSON text
  for (const auto& g : groups["data"]) by_key[g["labels"].dump()] = g;
  const std::string a = R"({"job":"prewarm","namespace":"ml","pod":"dsv32-7f9c-a"})";
  const std::string b = R"({"job":"prewarm","namespace":"ml","pod":"dsv32-7f9c-b"})";
  const std::string h = nlohmann::json{{"instance", host}, {"job", "prewarm"}}.dump();
  std::string keys;
  for (const auto& [key, g] : by_key) keys += key + "\n";
  ASSERT_EQ(by_key.size(), 3u) << keys;
  for (const std::string& key : {a, b, h}) ASSERT_EQ(by_key.count(key), 1u) << key;
  // A variant count by state: pod a compiled what pod b found cached. Had b replaced a's group,
  // a's compiled count would be gone.
  auto variants = [&](const std::string& key, const std::string& state) {
    for (const auto& m : by_key[key]["prewarm_variants"]["metrics"]) {
      if (m["labels"].value("state", "") == state) return std::stod(m["value"].get<std::string>());
    }
    return -1.0;
  };
  EXPECT_GT(variants(a, "compiled"), 0);
  EXPECT_EQ(variants(a, "cached"), 0);
  EXPECT_EQ(variants(b, "compiled"), 0);
  EXPECT_EQ(variants(b, "cached"), variants(a, "compiled"));
  // And as Prometheus scrapes it: every series of pod a's group carries its labels.
  const std::string pushed = Http(base + "/metrics");
  EXPECT_NE(pushed.find(
                R"(prewarm_ready{instance="",job="prewarm",namespace="ml",pod="dsv32-7f9c-a"} 1)"),
            std::string::npos)
      << pushed.substr(0, 3000);
  gw.Signal(SIGTERM);
  gw.Wait(5);
}

// A grouping key the Pushgateway cannot take is bad input, named, before anything is compiled.
TEST(MetricsTest, ABadPushgatewayGroupIsExitTwo) {
  testing::TempDir dir;
  for (const auto& [group, why] : std::vector<std::pair<std::string, std::string>>{
           {"pod", "\"pod\" has no ="},
           {"pod=", "pod has no value"},
           {"job=x", "job is prewarm's own"},
           {"pod=a,pod=b", "pod is given twice"},
           {"my-pod=a", "\"my-pod\" is not a label name"},
           {"__name__=a", "__name__: names that start with __ are reserved"}}) {
    SubprocessResult r = testing::RunPrewarm(
        {"run", "--arch", "gfx90a", "--kv-cache-dtype", "fp8", "--max-num-seqs", "1", "--cache-dir",
         dir.path() + "/c", "--pushgateway", "http://127.0.0.1:1"},
        {{"PREWARM_PUSHGATEWAY_GROUP", group}});
    EXPECT_EQ(r.exit_code, 2) << group << ": " << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("PREWARM_PUSHGATEWAY_GROUP=" + group + ": " + why),
              std::string::npos)
        << r.stderr_text;
    EXPECT_FALSE(fs::exists(dir.path() + "/c/prewarm")) << group;
  }
}

TEST(MetricsTest, ARealPrometheusScrapesTheSidecar) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  testing::Background p(ServeArgs(cache), dir.path());
  const Ports ports = WaitForPorts(p);
  ASSERT_TRUE(p.WaitForStderr("serving until SIGTERM", testing::kCompileWatchdogS)) << p.Stderr();
  const testing::Prometheus prom(dir.path(), ports.metrics);
  double compiled = -1;
  for (int i = 0; i < 60 && compiled < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const std::string body = prom.Query("sum(prewarm_variants{state=\"compiled\"})");
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_object() && j.value("status", "") == "success" && !j["data"]["result"].empty()) {
      compiled = std::stod(j["data"]["result"][0]["value"][1].get<std::string>());
    }
  }
  const nlohmann::json manifest =
      nlohmann::json::parse(std::ifstream(cache + "/prewarm/manifest.json"));
  EXPECT_EQ(compiled, manifest["counts"]["compiled"].get<double>()) << prom.Stderr();
  EXPECT_EQ(compiled, 8);
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(5), 0);
}

// A grpc.health.v1.Health/Watch stream on service "prewarm", read on its own thread: every status
// the server sent, in order. Cancelled and joined when destroyed.
class HealthWatch {
 public:
  explicit HealthWatch(int port)
      : channel_(grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                     grpc::InsecureChannelCredentials())),
        thread_([this] {
          auto stub = grpc::health::v1::Health::NewStub(channel_);
          grpc::health::v1::HealthCheckRequest req;
          req.set_service("prewarm");
          auto reader = stub->Watch(&ctx_, req);
          HealthCheckResponse resp;
          while (reader->Read(&resp)) {
            std::lock_guard<std::mutex> lock(mu_);
            seen_.push_back(resp.status());
          }
        }) {}
  ~HealthWatch() {
    ctx_.TryCancel();
    thread_.join();
  }
  std::vector<int> Seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  bool SawServing() {
    const std::vector<int> s = Seen();
    return std::find(s.begin(), s.end(), HealthCheckResponse::SERVING) != s.end();
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  grpc::ClientContext ctx_;
  std::mutex mu_;
  std::vector<int> seen_;
  std::thread thread_;
};

std::string ReadBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Damages an entry the way a bad disk or a stray write does: one byte of its payload flipped in
// place, its size and (with keep_mtime) its mtime as they were. Its header still checks; its
// checksum does not.
void FlipAPayloadByte(const fs::path& entry, bool keep_mtime) {
  struct stat before {};
  ASSERT_EQ(::stat(entry.c_str(), &before), 0);
  fs::permissions(entry, fs::perms::owner_write, fs::perm_options::add);
  std::string bytes = ReadBytes(entry);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5a);
  {
    std::fstream out(entry, std::ios::binary | std::ios::in | std::ios::out);
    out.seekp(static_cast<std::streamoff>(bytes.size() / 2));
    out.put(bytes[bytes.size() / 2]);
  }
  fs::permissions(entry, fs::perms::owner_write, fs::perm_options::remove);
  if (keep_mtime) {
    const struct timespec times[2] = {before.st_atim, before.st_mtim};
    ASSERT_EQ(::utimensat(AT_FDCWD, entry.c_str(), times, 0), 0);
  }
  ASSERT_EQ(fs::file_size(entry), static_cast<uintmax_t>(before.st_size));
}

fs::path FirstEntry(const std::string& cache) {
  std::vector<fs::path> entries;
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    if (e.path().extension() == ".co") entries.push_back(e.path());
  }
  std::sort(entries.begin(), entries.end());
  return entries.empty() ? fs::path() : entries.front();
}

// Issue 29: verify --serve over an entry with a bad checksum starts NOT_SERVING and must stay so:
// its re-check used to read only the header and size, and said SERVING one interval later. It
// still sees every change: a repair (SERVING), then damage in place with the size and mtime put
// back (NOT_SERVING again, from the ctime).
TEST(ServeTest, VerifyServeStaysNotServingOverABadChecksumAndSeesEachChange) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(testing::FillSmallCache(cache).exit_code, 0);
  const fs::path entry = FirstEntry(cache);
  ASSERT_FALSE(entry.empty());
  FlipAPayloadByte(entry, /*keep_mtime=*/true);
  testing::Background p(testing::With({testing::PrewarmBinary(), "verify", "--serve", "--cache-dir",
                                       cache, "--grpc-address", "127.0.0.1:0", "--metrics-address",
                                       "127.0.0.1:0", "--verify-interval", "0.2"},
                                      testing::kSmallLimits),
                        dir.path());
  const Ports ports = WaitForPorts(p);
  ASSERT_GT(ports.grpc, 0) << p.Stderr();
  ASSERT_TRUE(p.WaitForStderr("NOT_SERVING (nothing is compiled", 20)) << p.Stderr();
  EXPECT_NE(p.Stderr().find("bad_checksum"), std::string::npos) << p.Stderr();
  HealthWatch watch(ports.grpc);
  // Ten re-checks and more, past the window in which a fresh stamp is not trusted.
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  EXPECT_EQ(Probe(ports.grpc), 4) << p.Stderr();
  EXPECT_FALSE(watch.SawServing()) << p.Stderr();
  EXPECT_EQ(p.Stderr().find("valid now; SERVING"), std::string::npos) << p.Stderr();

  // Another pod repairs it (a new file by rename): SERVING.
  const SubprocessResult repaired = testing::FillSmallCache(cache);
  ASSERT_EQ(repaired.exit_code, 0) << repaired.stderr_text;
  ASSERT_TRUE(p.WaitForStderr("every planned key is valid now; SERVING", 20)) << p.Stderr();
  EXPECT_EQ(Probe(ports.grpc), 0);

  // Damaged in place once its stamp is trusted, size and mtime put back: NOT_SERVING, naming it.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  FlipAPayloadByte(entry, /*keep_mtime=*/true);
  const std::optional<std::string> down =
      p.WaitForStderr("planned entries are missing or damaged; NOT_SERVING", 20);
  ASSERT_TRUE(down.has_value()) << p.Stderr();
  const std::string err = p.Stderr();
  const size_t at = err.rfind("1 planned entries are missing or damaged; NOT_SERVING");
  ASSERT_NE(at, std::string::npos) << err;
  EXPECT_NE(err.find("fp8_bmm arch=gfx90a", at), std::string::npos) << err;
  EXPECT_NE(err.find("bad_checksum", at), std::string::npos) << err;
  EXPECT_EQ(Probe(ports.grpc), 4);
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(10), 0) << p.Stderr();
  const std::vector<int> seen = watch.Seen();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front(), HealthCheckResponse::NOT_SERVING);
  EXPECT_TRUE(fs::exists(entry)) << "verify never removes an entry";
}

std::string LastError(int port) {
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  auto status = prewarm::v1::Status::NewStub(channel);
  grpc::ClientContext ctx;
  prewarm::v1::GetResponse resp;
  if (!status->Get(&ctx, prewarm::v1::GetRequest(), &resp).ok()) return "Get failed";
  return resp.last_error();
}

// Issue 31 item 11: the sidecar that finds an entry damaged (in place, the size kept) or removed
// while serving names its key in the log and in Status' last_error, goes NOT_SERVING, compiles
// it again (keeping the cache whole is its job) and returns to SERVING with the entry valid.
TEST(ServeTest, RunServeCompilesADamagedOrMissingEntryAgainNamingIt) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(testing::FillSmallCache(cache).exit_code, 0);
  testing::Background p(ServeArgs(cache, {"--verify-interval", "0.2"}), dir.path());
  const Ports ports = WaitForPorts(p);
  ASSERT_GT(ports.grpc, 0) << p.Stderr();
  ASSERT_TRUE(p.WaitForStderr("serving until SIGTERM", testing::kCompileWatchdogS)) << p.Stderr();
  HealthWatch watch(ports.grpc);
  EXPECT_EQ(Probe(ports.grpc), 0);
  EXPECT_EQ(LastError(ports.grpc), "");

  const fs::path entry = FirstEntry(cache);
  const std::string good = ReadBytes(entry);
  FlipAPayloadByte(entry, /*keep_mtime=*/true);
  ASSERT_TRUE(p.WaitForStderr("compiled again: fp8_bmm arch=gfx90a", 60)) << p.Stderr();
  ASSERT_TRUE(p.WaitForStderr("every planned key is valid now; SERVING", 60)) << p.Stderr();
  std::string err = p.Stderr();
  const size_t at = err.find(
      "1 planned entry is missing or damaged while serving; NOT_SERVING, "
      "compiling it again");
  ASSERT_NE(at, std::string::npos) << err;
  EXPECT_NE(err.find("fp8_bmm arch=gfx90a", at), std::string::npos) << err;
  EXPECT_NE(err.find("bad_checksum", at), std::string::npos) << err;
  std::string last = LastError(ports.grpc);
  EXPECT_NE(last.find("fp8_bmm arch=gfx90a"), std::string::npos) << last;
  EXPECT_NE(last.find("bad_checksum"), std::string::npos) << last;
  EXPECT_EQ(ReadBytes(entry), good) << "compiled again: the same bytes as the first compile";
  EXPECT_EQ(Probe(ports.grpc), 0);

  // Removed: the same, naming it missing.
  const fs::path gone = [&] {
    std::vector<fs::path> all;
    for (const auto& e : fs::recursive_directory_iterator(cache)) {
      if (e.path().extension() == ".co") all.push_back(e.path());
    }
    std::sort(all.begin(), all.end());
    return all.back();
  }();
  fs::remove(gone);
  ASSERT_TRUE(p.WaitForStderr(": missing", 60)) << p.Stderr();
  for (int i = 0; i < 600 && !fs::exists(gone); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(fs::exists(gone)) << p.Stderr();
  for (int i = 0; i < 100 && Probe(ports.grpc) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Probe(ports.grpc), 0) << p.Stderr();
  last = LastError(ports.grpc);
  EXPECT_NE(last.find(": missing"), std::string::npos) << last;
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(10), 0) << p.Stderr();
  const SubprocessResult v =
      testing::RunPrewarm(testing::With({"verify", "--cache-dir", cache}, testing::kSmallLimits));
  EXPECT_EQ(v.exit_code, 0) << v.stdout_text << v.stderr_text;
  // Health followed: SERVING, NOT_SERVING, SERVING, NOT_SERVING, SERVING.
  std::vector<int> changes;
  for (int s : watch.Seen()) {
    if (changes.empty() || changes.back() != s) changes.push_back(s);
  }
  if (changes.size() == 6) changes.pop_back();  // the shutdown's NOT_SERVING
  EXPECT_EQ(changes,
            (std::vector<int>{HealthCheckResponse::SERVING, HealthCheckResponse::NOT_SERVING,
                              HealthCheckResponse::SERVING, HealthCheckResponse::NOT_SERVING,
                              HealthCheckResponse::SERVING}));
}

// Issue 29: run --serve that cannot replace a damaged entry (its compile times out twice) is
// NOT_SERVING, and its re-check must not turn that into SERVING.
TEST(ServeTest, RunServeThatCannotReplaceADamagedEntryStaysNotServing) {
  testing::TempDir dir;
  const std::string cache = dir.path() + "/cache";
  ASSERT_EQ(testing::FillSmallCache(cache).exit_code, 0);
  const fs::path entry = FirstEntry(cache);
  ASSERT_FALSE(entry.empty());
  FlipAPayloadByte(entry, /*keep_mtime=*/false);
  const std::string damaged = ReadBytes(entry);
  testing::Background p(
      ServeArgs(cache, {"--jobs", "1", "--verify-interval", "0.2", "--compile-timeout", "0.5"}),
      dir.path(), {{"PREWARM_TEST_COMPILE_DELAY_MS", "5000"}});
  const Ports ports = WaitForPorts(p);
  ASSERT_GT(ports.grpc, 0) << p.Stderr();
  HealthWatch watch(ports.grpc);
  ASSERT_TRUE(p.WaitForStderr("serving until SIGTERM", testing::kCompileWatchdogS)) << p.Stderr();
  EXPECT_NE(p.Stdout().find("8 keys: 0 compiled, 7 cached, 1 failed"), std::string::npos)
      << p.Stdout();
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  EXPECT_EQ(Probe(ports.grpc), 4) << p.Stderr();
  EXPECT_FALSE(watch.SawServing()) << p.Stderr();
  EXPECT_EQ(p.Stderr().find("valid now; SERVING"), std::string::npos) << p.Stderr();
  EXPECT_EQ(ReadBytes(entry), damaged) << "the damaged entry was replaced after all";
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(10), 0) << p.Stderr();
}

}  // namespace
}  // namespace prewarm
