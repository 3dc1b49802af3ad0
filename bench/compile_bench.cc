// Compile throughput of the embedded example's plan with 1, 2, 4, ... jobs, each on an empty
// cache: one-shot worker processes (one per key), persistent worker processes (prewarm run's
// mode), and the same pool running the compiler in threads; then a rerun on the full cache
// (verify-and-skip). Speedups are against one-shot processes with one job. Prints one table.
//   compile_bench [--arch gfx90a|sm_90] [--jobs 1,2,4] [--worker PATH]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "prewarm/catalog/catalog.h"
#include "prewarm/compile/fill.h"
#include "prewarm/launchers/plan.h"
#include "prewarm/toolchain/worker.h"
#include "prewarm/util/strings.h"

namespace {

using prewarm::FillItem;

double Fill(const std::string& root, const std::vector<FillItem>& items,
            const prewarm::FillOptions& options, int* failed) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<prewarm::FillResult> r =
      prewarm::FillCache(prewarm::CacheStore(root), items, options);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  *failed = 0;
  for (const auto& x : r) *failed += x.state == prewarm::KeyState::kFailed ? 1 : 0;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string arch_name = "gfx90a", worker = BENCH_PREWARM_BINARY, jobs_list = "1,2,4";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--arch")) arch_name = argv[i + 1];
    if (!std::strcmp(argv[i], "--jobs")) jobs_list = argv[i + 1];
    if (!std::strcmp(argv[i], "--worker")) worker = argv[i + 1];
  }
  const prewarm::Arch arch = *prewarm::ParseArch(arch_name);
  auto tc = prewarm::OpenToolchain(arch.platform);
  if (!tc.ok()) {
    std::fprintf(stderr, "%s\n", std::string(tc.status().message()).c_str());
    return 1;
  }
  const prewarm::ModelConfig model = prewarm::SeedsModelConfig();
  const prewarm::Limits limits = *prewarm::ResolveLimits(
      {}, {}, model, prewarm::VllmBatchDefaults(prewarm::LargeMemoryGpuArch(arch), arch.name));
  const prewarm::Plan plan =
      prewarm::BuildPlan(limits, model, *prewarm::ShapeForRank(model, 1), {arch});
  std::vector<FillItem> items;
  for (const auto& lp : plan.launchers) {
    const std::string mk = *prewarm::ManagerKey(**tc, arch, lp.name);
    for (const auto& pk : lp.keys) {
      items.push_back(
          {{lp.name, mk, pk.key.String(), arch.name}, prewarm::JobForKey(pk.key, arch)});
    }
  }
  const std::string base =
      (std::filesystem::temp_directory_path() / "prewarm-compile-bench").string();
  std::printf("%s, %zu keys, %s\n", arch.name.c_str(), items.size(), (*tc)->Identity().c_str());
  std::printf("%-9s %-5s %-9s %-9s %-8s %-7s\n", "mode", "jobs", "seconds", "keys/s", "speedup",
              "failed");
  double one_process = 0;
  for (const char* mode : {"process", "persistent", "thread"}) {
    double one = 0;
    for (std::string_view j : prewarm::StrSplit(jobs_list, ',')) {
      const int jobs = static_cast<int>(*prewarm::ParseInt64(j));
      std::filesystem::remove_all(base);
      prewarm::FillOptions o;
      o.jobs = jobs;
      o.producer = "bench";
      if (std::string_view(mode) == "process") {
        prewarm::WorkerOptions w;
        w.binary = worker;
        o.compile = [w](const prewarm::CompileJob& job) {
          return prewarm::CompileInWorker(job, w);
        };
      } else if (std::string_view(mode) == "persistent") {
        prewarm::WorkerOptions w;
        w.binary = worker;
        o.compile = [w](const prewarm::CompileJob& job) {
          thread_local std::unique_ptr<prewarm::PersistentWorker> pw;
          if (pw == nullptr) pw = std::make_unique<prewarm::PersistentWorker>(w);
          return pw->Compile(job);
        };
      } else {
        const prewarm::Toolchain* t = tc->get();
        o.compile = [t](const prewarm::CompileJob& job) { return t->Compile(job); };
      }
      int failed = 0;
      const double s = Fill(base, items, o, &failed);
      if (one == 0) one = s;
      if (one_process == 0) one_process = s;
      std::printf("%-9s %-5d %-9.2f %-9.2f %-8.2f %-7d\n", mode, jobs, s,
                  static_cast<double>(items.size()) / s, one_process / s, failed);
      if (std::string_view(mode) == "persistent" && j == prewarm::StrSplit(jobs_list, ',').back()) {
        // The same cache, full: every key is read, checked and skipped.
        int f2 = 0;
        const double warm = Fill(base, items, o, &f2);
        std::printf("%-9s %-5d %-9.4f %-9.0f %-8s %-7d  (%.3f ms per key)\n", "full", jobs, warm,
                    static_cast<double>(items.size()) / warm, "-", f2,
                    1000 * warm / static_cast<double>(items.size()));
      }
    }
  }
  std::filesystem::remove_all(base);
  return 0;
}
