#include "bench/kernel_bench_args.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "nvfp4_mla/index_geometry.h"
#include "nvfp4_mla/sparse_geometry.h"
#include "prewarm/arch/arch.h"

namespace prewarm {

const char kKernelBenchUsage[] =
    "usage: kernel_bench [--model-config FILE] [--tensor-parallel-size N] [--dcp N]\n"
    "                    [--shapes LABEL[,LABEL...]] [--launcher L[,L...]]\n"
    "                    [--rows N[,N...]] [--ctx N[,N...]] [--variant V] [--reps N]\n"
    "                    [--bf16-tflops T]\n"
    "                    [--simt] [--trace] [--define NAME[=VALUE]]...\n"
    "                    [--list | --compile-only]\n"
    "                    [--arch A]\n"
    "  default: the 64-head stand-in (RESULTS' earlier rows) and DeepSeek-V3.2 (the embedded\n"
    "  example) at tp 1 and tp 8; --model-config FILE / --tensor-parallel-size / --dcp: that one\n"
    "  model (the example without FILE) at that tp and dcp (default 1)\n"
    "  --shapes: of the default set, stand-in, v3.2-tp1, v3.2-tp8\n"
    "  --launcher: sparse_prefill, sparse_decode, norm_rope_insert, fp8_bmm, topk_prefill,\n"
    "              topk_decode, index_prefill, index_decode\n"
    "  --rows, --ctx (<= 131072), --variant (a key field's value, or FIELD=VALUE as the variant\n"
    "  column prints it: strips=4): only those rows (sparse_decode: --rows any batch sizes)\n"
    "  --reps: launches per row (default by row, fewer where one launch is long)\n"
    "  --trace: kernels built with PW_TRACE=1 (kernels/common/trace.h); after each row, when each\n"
    "  trace point happened over the blocks of one more launch (sparse_prefill, sparse_decode on\n"
    "  Hopper's warpgroup blocks: 0 start, 1 slots + Q + first records in, 2 first tile done, 3\n"
    "  every tile done, 4 stored, 5 cluster combine done; the 16-head block also 6 slots looked\n"
    "  up, 7 first records asked for, and of its second tile 8 dequantized, 9 S done, 10 P\n"
    "  stored, 11 O done)\n"
    "  --list: print the rows and keys, no GPU; --compile-only: compile every key with the\n"
    "  arch's run-time compiler, no GPU; --arch (only with these two; default sm_90)\n";

namespace {

// A positive number, the whole of `text`; 0 when it is not one.
double PositiveNumber(const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  return end != text && *end == '\0' && v > 0 && v < 1e12 ? v : 0;
}

}  // namespace

std::string ParseKernelBenchArgs(int argc, char** argv, KernelBenchOptions& o) {
  RowOptions& r = o.rows;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      o.help = true;
      continue;
    }
    if (a == "--simt" || a == "--list" || a == "--compile-only") {
      (a == "--simt" ? o.simt : a == "--list" ? o.list : o.compile_only) = true;
      continue;
    }
    if (a == "--trace") {
      if (!o.trace) o.defines.push_back("PW_TRACE=1");
      o.trace = true;
      continue;
    }
    const std::vector<std::string> valued = {
        "--bf16-tflops", "--reps",         "--launcher",
        "--rows",        "--ctx",          "--variant",
        "--define",      "--model-config", "--tensor-parallel-size",
        "--dcp",         "--shapes",       "--arch"};
    if (std::find(valued.begin(), valued.end(), a) == valued.end()) {
      return "unknown argument " + a;
    }
    if (i + 1 >= argc) return a + " needs a value";
    const std::string v = argv[++i];
    if (a == "--define") {
      // The launch code reads these too (kernels/nvfp4_mla/sparse_geometry.h, index_geometry.h):
      // the grid, the threads, the shared memory and the workspace follow them.
      const std::string bad =
          BadBenchDefine(v, {{"PW_SPARSE_NARROW_PARTS", PW_SPARSE_NARROW_PARTS},
                             {"PW_SPARSE_DEC_CLUSTER", PW_SPARSE_DEC_CLUSTER},
                             {"PW_SPARSE_WG", PW_SPARSE_WG},
                             {"PW_SPARSE_WG_NARROW", PW_SPARSE_WG_NARROW},
                             {"PW_INDEX_DECODE_RING", PW_INDEX_DECODE_RING},
                             {"PW_INDEX_DECODE_M_WARPS", PW_INDEX_DECODE_M_WARPS},
                             {"PW_INDEX_DECODE_M_BLOCKS", PW_INDEX_DECODE_M_BLOCKS}});
      if (!bad.empty()) return bad;
      o.defines.push_back(v);
    } else if (a == "--launcher") {
      const std::vector<std::string>& names = BenchLaunchers();
      for (const std::string& l : std::vector<std::string>(absl::StrSplit(v, ','))) {
        if (std::find(names.begin(), names.end(), l) == names.end()) {
          std::string list;
          for (size_t j = 0; j < names.size(); ++j) {
            list += (j == 0 ? "" : j + 1 == names.size() ? " or " : ", ") + names[j];
          }
          return "--launcher " + l + ": must be " + list;
        }
        r.launchers.push_back(l);
      }
    } else if (a == "--shapes") {
      for (const std::string& s : std::vector<std::string>(absl::StrSplit(v, ','))) {
        if (s.empty()) return "--shapes " + v + ": an empty label";
        r.shapes.push_back(s);  // checked against the run's models (MakeBenchModels)
      }
    } else if (a == "--model-config") {
      if (v.empty()) return "--model-config: an empty path";
      r.model_config = v;
    } else if (a == "--arch") {
      if (!ParseArch(v).ok()) return "--arch " + v + ": not an arch prewarm knows";
      o.arch = v;
    } else if (a == "--variant") {  // a key field's value (0 is one), or FIELD=VALUE as printed
      std::string value = v;
      if (const size_t eq = v.find('='); eq != std::string::npos) {
        const std::string field = v.substr(0, eq);
        if (field.empty() ||
            field.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") != std::string::npos) {
          return a + " " + v + ": FIELD=VALUE needs a key field's name (strips=4)";
        }
        r.variant_field = field;
        value = v.substr(eq + 1);
      }
      const double x = value == "0" ? 0 : PositiveNumber(value.c_str());
      if ((x == 0 && value != "0") || x != static_cast<int>(x)) {
        return a + " " + v + ": must be a non-negative integer, or FIELD=VALUE";
      }
      r.variant = static_cast<int>(x);
    } else if (a == "--rows" || a == "--ctx") {  // one count, or a comma list of them
      std::vector<int> counts;
      if (!ParseCountList(v, &counts)) {
        return a + " " + v + ": must be a positive integer, or a comma list of them";
      }
      for (int x : counts) {
        if (a == "--ctx" && x > kBenchMaxCtx) {
          return a + " " + v + ": must be at most " + std::to_string(kBenchMaxCtx);
        }
      }
      std::vector<int>& into = a == "--rows" ? r.rows : r.ctx;
      into.insert(into.end(), counts.begin(), counts.end());
    } else {
      const double x = PositiveNumber(v.c_str());
      const bool integer = a != "--bf16-tflops";
      if (x == 0 || (integer && x != static_cast<int>(x))) {
        return a + " " + v + ": must be a positive " + (integer ? "integer" : "number");
      }
      if (a == "--bf16-tflops") o.bf16_tflops = x;
      if (a == "--reps") o.reps = static_cast<int>(x);
      if (a == "--tensor-parallel-size") r.tp = static_cast<int>(x);
      if (a == "--dcp") r.dcp = static_cast<int>(x);
    }
  }
  if (o.list && o.compile_only) return "--list and --compile-only: give one";
  if (!o.arch.empty() && !o.list && !o.compile_only) {
    return "--arch " + o.arch + ": only with --list or --compile-only (a GPU run uses its GPU's)";
  }
  return "";
}

}  // namespace prewarm
