#include "tests/gpu/msa_index_keys.h"

#include <memory>
#include <utility>

#include "prewarm/cache/store.h"
#include "prewarm/catalog/catalog.h"
#include "prewarm/compile/fill.h"
#include "prewarm/launchers/launcher.h"
#include "prewarm/toolchain/toolchain.h"
#include "prewarm/toolchain/worker.h"
#include "prewarm/util/cpu.h"
#include "prewarm/util/status_macros.h"
#include "tests/testing/cli.h"

namespace prewarm::msa_test {

Key InsertKey(const Arch& arch, bool small, const MsaShape& s) {
  Key k = NewKey("msa_norm_rope_insert", arch);
  k.Set("small", small).Set("heads", int64_t{s.heads}).Set("kv_heads", int64_t{s.kv_heads});
  k.Set("index_heads", int64_t{s.index_heads}).Set("head_dim", int64_t{kD});
  k.Set("rope_dim", int64_t{kRope}).Set("index_dim", int64_t{kD});
  return k;
}
Key TopkKey(const Arch& arch, const char* launcher, int64_t strips, int64_t kb, int64_t init,
            int64_t local) {
  Key k = NewKey(launcher, arch);
  if (strips > 0) k.Set("strips", strips);
  k.Set("topk_blocks", kb).Set("init_blocks", init).Set("local_blocks", local);
  return k;
}

Key IndexDecodeKey(const Arch& arch, int64_t rows_tile, int64_t hi, int64_t kb, int64_t init,
                   int64_t local) {
  Key k = NewKey("msa_index_decode", arch);
  k.Set("rows_tile", rows_tile).Set("index_heads", hi).Set("index_dim", int64_t{kD});
  k.Set("topk_blocks", kb).Set("init_blocks", init).Set("local_blocks", local);
  return k;
}

// Every variant of the five launchers the plan makes for MiniMax-M3 (tp 4 and tp 1), plus top-k
// keys with other Kb / init / local (the kernels take 1..32, 0..4, 1..4).
std::vector<Key> MsaIndexKeys(const Arch& arch) {
  std::vector<Key> keys;
  for (const MsaShape& s : kShapes) {
    for (bool small : {true, false}) keys.push_back(InsertKey(arch, small, s));
  }
  for (int64_t hi : {1, 4}) {
    for (bool large : {false, true}) {
      Key k = NewKey("msa_index_prefill", arch);
      keys.push_back(k.Set("large", large).Set("index_heads", hi).Set("index_dim", int64_t{kD}));
    }
  }
  for (int64_t hi : {1, 4}) {
    for (int64_t tile = 1; tile <= 64; tile *= 2) keys.push_back(IndexDecodeKey(arch, tile, hi));
  }
  // The fused top-k with other Kb / init / local.
  keys.push_back(IndexDecodeKey(arch, 4, 1, 3, 2, 2));
  for (int64_t strips : {1, 2, 4, 8})
    keys.push_back(TopkKey(arch, "msa_topk_prefill", strips, 16, 0, 1));
  keys.push_back(TopkKey(arch, "msa_topk_prefill", 1, 32, 4, 4));
  keys.push_back(TopkKey(arch, "msa_topk_prefill", 2, 3, 2, 2));
  keys.push_back(TopkKey(arch, "msa_topk_decode", 0, 16, 0, 1));
  keys.push_back(TopkKey(arch, "msa_topk_decode", 0, 32, 4, 4));
  keys.push_back(TopkKey(arch, "msa_topk_decode", 0, 3, 2, 2));
  return keys;
}

std::string ShownKey(const Key& key) {
  const std::string s = key.String();
  return s.substr(s.find(',') + 1);  // drop arch=, it is in the header
}

// Compiles `keys` for `arch` through the worker pool into a fresh cache under `dir`, as `prewarm
// run` does (JobForKey, FillCache, CompileInWorker), with `extra_defines` added to each job; reads
// each entry back.
absl::StatusOr<std::vector<CompiledKey>> CompileThroughCache(
    const std::vector<Key>& keys, const Arch& arch, const std::string& dir,
    const std::vector<std::string>& extra_defines) {
  ASSIGN_OR_RETURN(std::unique_ptr<Toolchain> tc, OpenToolchain(arch.platform));
  RETURN_IF_ERROR(tc->CheckArch(arch));
  const CacheStore store(dir);
  std::vector<FillItem> items;
  for (const Key& key : keys) {
    ASSIGN_OR_RETURN(const std::string mk, ManagerKey(*tc, arch, key.launcher));
    CompileJob job = JobForKey(key, arch);
    for (const std::string& d : extra_defines) job.defines.push_back(d);
    items.push_back({{key.launcher, mk, key.String(), arch.name}, std::move(job)});
  }
  FillOptions fo;
  fo.jobs = AvailableCpus();
  fo.producer = ProducerString(tc->Identity());
  WorkerOptions wo;
  wo.binary = testing::PrewarmBinary();
  fo.compile = [wo](const CompileJob& job) { return CompileInWorker(job, wo); };
  const std::vector<FillResult> filled = FillCache(store, items, fo);
  std::vector<CompiledKey> out;
  for (size_t i = 0; i < items.size(); ++i) {
    CompiledKey c{keys[i], "", ""};
    const CacheStore::Lookup entry = store.Read(items[i].ref, CacheStore::ReadLock::kWait);
    if (filled[i].state == KeyState::kFailed) {
      c.error = "compile: " + filled[i].error;
    } else if (entry.state != CacheStore::State::kHit) {
      c.error = "entry not in the cache";
    } else {
      c.code = entry.payload;
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace prewarm::msa_test
