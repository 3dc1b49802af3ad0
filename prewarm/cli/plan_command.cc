// prewarm plan: the reachable keys, as a table for people or JSON (docs/cli.md).
#include <algorithm>
#include <iomanip>

#include "prewarm/cli/commands.h"
#include "prewarm/cli/inputs.h"
#include "prewarm/util/strings.h"

namespace prewarm {
namespace {

void PrintHeader(const Inputs& in, const Plan& plan, std::ostream& out) {
  std::vector<std::string> archs;
  for (const Arch& a : plan.archs) archs.push_back(a.name);
  out << "prewarm plan: " << plan.TotalKeys() << " keys, " << plan.launchers.size()
      << " launchers, arch " << StrJoin(archs, ",") << "\n";
  out << "limits:\n";
  // Every row says where its value came from.
  auto row = [&](std::string_view field, const std::string& value, std::string_view origin) {
    out << "  " << std::left << std::setw(30) << field << std::setw(9) << value << " (" << origin
        << ")\n";
  };
  for (const IntLimitSpec& spec : IntLimitSpecs()) {
    row(spec.field, StrCat(in.limits.Get(spec.id)), in.limits.origins[static_cast<int>(spec.id)]);
  }
  row("kv_cache_dtype", std::string(KvCacheDtypeName(in.limits.kv_cache_dtype)),
      in.limits.kv_cache_dtype_origin);
  row("graph_only", in.limits.graph_only ? "true" : "false", in.limits.graph_only_origin);
  row("decode tokens per step", StrCat("1..", in.limits.MaxDecodeTokens()),
      StrCat("derived: min(max_num_seqs x (num_speculative_tokens + 1), max_num_batched_tokens",
             in.limits.graph_only ? ", max_cudagraph_capture_size" : "", ")"));
  const ModelConfig& m = in.model;
  const Shape& s = in.shape;
  out << "model: " << m.name << " (" << m.source << ")\n"
      << "  family " << AttentionFamilyName(s.family) << " (" << m.family_reason << ")\n";
  if (s.family == AttentionFamily::kMsa) {
    const MsaConfig& c = m.msa;
    out << "  Hq=" << m.num_heads << " Hkv=" << c.num_kv_heads << " D=" << c.head_dim
        << " rotary=" << c.rotary_dim << " block=" << c.block_size << " Kb=" << c.topk_blocks
        << " Hi=" << c.index_heads << " Di=" << c.index_dim << " init=" << c.init_blocks
        << " local=" << c.local_blocks;
    if (c.sparse_layers > 0)
      out << "; " << c.sparse_layers << " of " << c.num_layers << " layers MSA";
    out << "; per rank (tp " << in.limits.tensor_parallel_size << "): Hq=" << s.heads
        << " Hkv=" << s.kv_heads << " Hi=" << s.index_n_heads << "\n";
  } else {
    out << "  H=" << m.num_heads << " L=" << s.kv_lora_rank << " Dn=" << s.qk_nope_head_dim
        << " Dr=" << s.qk_rope_head_dim << " Dv=" << s.v_head_dim;
    if (s.has_indexer) {
      out << " Hi=" << s.index_n_heads << " Di=" << s.index_head_dim << " Ktop=" << s.index_topk;
    } else {
      out << " (no indexer)";
    }
    out << "; per rank (tp " << in.limits.tensor_parallel_size << "): Hr=" << s.heads;
    if (s.decode_context_parallel_size > 1) {
      out << ", sparse_decode Hr x dcp " << s.decode_context_parallel_size << " = "
          << s.DecodeHeads();
    }
    out << "\n";
  }
  if (!in.arch_note.empty()) out << "arch: " << in.arch_note << "\n";
  if (const std::string note = PlanNote(plan); !note.empty()) out << "note: " << note << "\n";
}

void PrintTable(const Inputs& in, const Plan& plan, std::ostream& out) {
  PrintHeader(in, plan, out);
  int name_width = 20;  // the widest launcher name and two spaces, at least 20
  for (const LauncherPlan& lp : plan.launchers) {
    name_width = std::max(name_width, static_cast<int>(lp.name.size()) + 2);
  }
  out << "\n"
      << std::left << std::setw(name_width) << "LAUNCHER"
      << "KEYS\n";
  for (const LauncherPlan& lp : plan.launchers) {
    out << std::setw(name_width) << lp.name << lp.keys.size() << "\n";
  }
  out << std::setw(name_width) << "total" << plan.TotalKeys() << "\n";
  for (const LauncherPlan& lp : plan.launchers) {
    out << "\n" << lp.name << " (" << lp.keys.size() << " keys)\n";
    size_t width = 0;
    for (const PlannedKey& pk : lp.keys) width = std::max(width, pk.key.String().size());
    for (const PlannedKey& pk : lp.keys) {
      out << "  " << std::setw(static_cast<int>(width)) << pk.key.String()
          << "  witness: " << DescribeStep(pk.witness) << "\n";
    }
  }
}

}  // namespace

int RunPlan(const Config& config, std::ostream& out) {
  absl::StatusOr<Inputs> in = ResolveInputs(config, AutoArchPolicy::kFallBackToGfx942);
  if (!in.ok()) return ReportError(in.status());
  const Plan plan = BuildPlan(in->limits, in->model, in->shape, in->archs);
  if (config.format == OutputFormat::kJson) {
    out << PlanToJson(plan).dump(2) << "\n";
  } else {
    PrintTable(*in, plan, out);
  }
  return kExitOk;
}

}  // namespace prewarm
